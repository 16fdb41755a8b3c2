"""Transactional messages in process, over each backend (the embedded store and RocksDB; the serverless store and
DynamoDB, on a moto server over HTTP or LocalStack): a half message is seen by no reader (pull, pop, lookups) until
it is committed, then once, with its id; a rolled-back one never; a repeated end is idempotent and the opposite end
a conflict; checks open only when due and go to one producer each; everything survives the store being opened
again. Times are passed in, never slept."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from functions.logic import dead_letters
from functions.logic.push import dead_letter
from tidemq_protocol.api.dead_letters import ResendRequest
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    MessageNotFound,
    MessageTypeMismatch,
    TransactionConflict,
    TransactionNotFound,
)
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.record import MESSAGE_ID
from tidemq_store import GroupConfig, TopicConfig
from tidemq_store.pop.receive import PopConsumption
from tidemq_store.transactions.api import TransactionState

from ..clock_steps import clock_ahead

GROUP = "payments"
HOLD = 10_000


@pytest.fixture
def store(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="tx", queues=2, message_type=MessageType.TRANSACTION))
    return store


def half(store, body: str, queue: int = 0, timeout_ms: int = 0, **fields):
    """A half message of "tx", its first check due `timeout_ms` after it is stored (0: due at once)."""
    message = Message(body.encode(), queue, keys=(f"key-{body}",), tag="t", properties={"p": body}, **fields)
    return store.transactions.prepare("tx", message, GROUP, timeout_ms)


def pulled(store, queue: int = 0) -> list:
    return store.get("tx", queue, store.queue_offsets("tx")[queue].min_offset, 100).messages


def popped(store, group: str = "readers") -> list:
    return [p.message for p in PopConsumption(store, store.pop_ledger).receive(group, "tx", 32, HOLD)]


def test_a_half_message_is_invisible_until_committed_then_visible_once_with_its_id(store):
    transaction = half(store, "order-1", queue=1)
    assert transaction.state is TransactionState.PREPARED
    assert pulled(store, 1) == [] and popped(store) == [] and store.messages_by_key("tx", "key-order-1") == []
    with pytest.raises(MessageNotFound):
        store.message_by_id(transaction.msg_id)

    committed = store.transactions.end("tx", transaction.msg_id, True, "producer")
    assert committed.state is TransactionState.COMMITTED and committed.offset == 0

    (message,) = pulled(store, 1)
    assert (message.msg_id, message.body, message.queue_offset) == (transaction.msg_id, b"order-1", 0)
    assert message.keys == ("key-order-1",) and message.tag == "t" and message.properties == {"p": "order-1"}
    assert MESSAGE_ID not in message.properties
    assert [m.msg_id for m in popped(store)] == [transaction.msg_id]
    assert store.message_by_id(transaction.msg_id).body == b"order-1"
    assert [m.msg_id for m in store.messages_by_key("tx", "key-order-1")] == [transaction.msg_id]
    assert store.read_records("tx", 1, 0).count == 1


def test_a_repeated_commit_changes_nothing_and_a_rollback_after_it_is_a_conflict(store):
    transaction = half(store, "order-2")
    first = store.transactions.end("tx", transaction.msg_id, True, "producer")
    assert store.transactions.end("tx", transaction.msg_id, True, "producer") == first
    with pytest.raises(TransactionConflict, match="cannot roll back: it was committed"):
        store.transactions.end("tx", transaction.msg_id, False, "producer")
    assert [m.msg_id for m in pulled(store)] == [transaction.msg_id]  # once, however often it was ended


def test_a_rolled_back_half_message_is_never_visible_and_a_commit_after_it_is_a_conflict(store):
    transaction = half(store, "order-3")
    ended = store.transactions.end("tx", transaction.msg_id, False, "producer")
    assert ended.state is TransactionState.ROLLED_BACK
    assert store.transactions.end("tx", transaction.msg_id, False, "producer") == ended
    with pytest.raises(TransactionConflict, match="cannot commit: it was rolled back"):
        store.transactions.end("tx", transaction.msg_id, True, "producer")
    assert pulled(store) == [] and popped(store) == [] and store.queue_offsets("tx")[0].max_offset == 0
    with pytest.raises(MessageNotFound):
        store.message_by_id(transaction.msg_id)
    with pytest.raises(MessageNotFound):
        store.transactions.half_message(ended)


def test_a_commit_and_a_rollback_racing_end_it_one_way_and_only_a_commit_is_ever_seen(store):
    transactions = [half(store, f"race-{i}") for i in range(12)]
    outcomes: dict[str, list[str]] = {t.msg_id: [] for t in transactions}

    def end(commit: bool) -> None:
        for t in transactions:
            try:
                store.transactions.end("tx", t.msg_id, commit, "racer")
                outcomes[t.msg_id].append("commit" if commit else "rollback")
            except TransactionConflict:
                pass

    racers = [threading.Thread(target=end, args=(commit,)) for commit in (True, False, True, False)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    committed = {t.msg_id for t in transactions if store.transactions.get("tx", t.msg_id).committed}
    for t in transactions:
        assert len(set(outcomes[t.msg_id])) == 1  # every racer that succeeded ended it the same way
        assert set(outcomes[t.msg_id]) == ({"commit"} if t.msg_id in committed else {"rollback"})
    assert sorted(m.msg_id for m in pulled(store)) == sorted(committed)


def test_checks_open_only_when_due_and_each_is_taken_by_one_producer(store):
    transaction = half(store, "order-4", timeout_ms=5_000)
    first = transaction.prepared_ms + 5_000  # the timeout after the store's own stamp, not after the caller's clock
    assert transaction.check_at_ms == first == store.transactions.get("tx", transaction.msg_id).check_at_ms
    log = store.transactions
    assert log.due(first - 1, 10) == []
    (due,) = log.due(first, 10, "tx", GROUP)
    assert log.due(first, 10, "tx", "another-group") == []
    opened = log.open_check(due, first + 3_000, claim=False)
    assert (opened.checks, opened.claimed, opened.check_at_ms) == (1, 0, first + 3_000)
    assert log.open_check(due, first + 3_000, claim=False) is None  # opened already: of two sweepers, one opens it
    assert log.due(first + 2_999, 10) == []

    assert log.claim("tx", "another-group", 10) == []
    (taken,) = _eventually(lambda: log.claim("tx", GROUP, 10))
    assert taken.msg_id == transaction.msg_id and taken.claimed == 1
    assert log.claim("tx", GROUP, 10) == []  # each check goes to one producer
    assert log.half_message(taken).body == b"order-4"

    noted = log.note("tx", transaction.msg_id, "unknown on check 1")
    assert noted.answer == "unknown on check 1" and noted.state is TransactionState.PREPARED
    claimed_at_once = log.open_check(log.due(first + 3_000, 10)[0], first + 6_000, claim=True)
    assert (claimed_at_once.checks, claimed_at_once.claimed) == (2, 2)
    with pytest.raises(TransactionConflict):
        log.end("tx", transaction.msg_id, False, "check limit", checks=1)  # a check was opened since
    assert log.end("tx", transaction.msg_id, False, "check limit", checks=2).state is TransactionState.ROLLED_BACK
    assert log.due(10**13, 10) == [] and pulled(store) == []


def test_transactions_and_their_half_messages_are_there_when_the_store_is_opened_again(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="tx", queues=2, message_type=MessageType.TRANSACTION))
    kept, committed, rolled_back = half(store, "kept"), half(store, "committed"), half(store, "rolled-back")
    store.transactions.end("tx", committed.msg_id, True, "producer")
    store.transactions.end("tx", rolled_back.msg_id, False, "producer")
    store.close()

    store = reopen()
    assert store.transactions.get("tx", kept.msg_id).state is TransactionState.PREPARED
    assert store.transactions.half_message(kept).body == b"kept"
    assert [m.msg_id for m in pulled(store)] == [committed.msg_id]
    store.transactions.end("tx", kept.msg_id, True, "producer")
    assert [m.msg_id for m in pulled(store)] == [committed.msg_id, kept.msg_id]
    with pytest.raises(TransactionConflict):
        store.transactions.end("tx", rolled_back.msg_id, True, "producer")
    assert [t.msg_id for t in store.transactions.list("tx", TransactionState.ROLLED_BACK, None, 10)] == [
        rolled_back.msg_id
    ]


def test_a_topic_takes_half_messages_only_if_it_is_a_transaction_topic_and_only_them(store):
    store.create_topic(TopicConfig(name="plain", queues=1))
    with pytest.raises(MessageTypeMismatch, match="topic 'plain' is NORMAL: only a TRANSACTION topic"):
        store.transactions.prepare("plain", Message(b"x"), GROUP, 0)
    with pytest.raises(MessageTypeMismatch, match="topic 'tx' is TRANSACTION"):
        store.put("tx", [Message(b"x")])
    with pytest.raises(TransactionNotFound):
        store.transactions.get("plain", half(store, "elsewhere").msg_id)  # a transaction of another topic


def test_the_listing_pages_a_topics_transactions_newest_first(store):
    made = [half(store, f"listed-{i}") for i in range(5)]
    store.transactions.end("tx", made[1].msg_id, True, "producer")
    first = store.transactions.list("tx", None, None, 2)
    second = store.transactions.list("tx", None, first.next_after, 2)
    third = store.transactions.list("tx", None, second.next_after, 2)
    listed = [t.msg_id for page in (first, second, third) for t in page]
    assert sorted(listed) == sorted(t.msg_id for t in made) and third.next_after is None
    assert [t.prepared_ms for page in (first, second, third) for t in page] == sorted(
        (t.prepared_ms for t in made), reverse=True
    )
    assert [t.msg_id for t in store.transactions.list("tx", TransactionState.COMMITTED, None, 10)] == [made[1].msg_id]


def test_deleting_the_topic_forgets_its_transactions(store):
    transaction = half(store, "doomed")
    store.delete_topic("tx")
    store.create_topic(TopicConfig(name="tx", queues=2, message_type=MessageType.TRANSACTION))
    with pytest.raises(TransactionNotFound):
        store.transactions.end("tx", transaction.msg_id, True, "producer")
    assert pulled(store) == []


def _eventually(read, attempts: int = 200):
    """What `read` returns once it returns something (the serverless `open` index is eventually consistent)."""
    for _ in range(attempts):
        found = read()
        if found:
            return found
        time.sleep(0.05)
    return read()


WRITER = Path(__file__).with_name("transaction_crash_writer.py")


@pytest.mark.parametrize("when", ["before_append", "after_append"])
def test_an_embedded_commit_killed_between_its_writes_is_finished_once_when_the_store_opens_again(
    open_test_store, store_config, when
):
    """The embedded engine's commit is three writes (embedded/transactions.py): a process killed with SIGKILL after
    the decision, or after the append too, leaves a commit the next opening finishes, its message appended once."""
    home = store_config().home
    killed = subprocess.run([sys.executable, str(WRITER), str(home), when], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    msg_id = killed.stdout.split()[0]
    store = open_test_store()
    assert store.transactions.get("tx", msg_id).state is TransactionState.COMMITTED
    assert [m.msg_id for m in store.get("tx", 1, 0, 100).messages] == [msg_id]
    assert store.message_by_id(msg_id).body == b"paid"


def test_a_dead_letter_of_a_committed_message_is_resent_to_its_transaction_topic_as_a_committed_message(store):
    store.create_group(GroupConfig(name="billing"))
    transaction = half(store, "poison")
    store.transactions.end("tx", transaction.msg_id, True, "producer")
    (message,) = pulled(store)
    dead_letter(store, "billing", [message], 16, "not acked after 16 deliveries")
    letters, next_offset = dead_letters.chosen(store, "billing", ResendRequest(from_offset=0))
    stored: list[str] = []

    class Notices:
        def messages_stored(self, topic: str) -> None:
            stored.append(topic)

    (result,) = dead_letters.resend(store, "billing", letters, next_offset, Notices(), lambda topic: None).results
    assert result.status == "resent" and stored == ["tx"]
    again = store.transactions.get("tx", result.resent_msg_id)
    assert (again.state, again.ended_by) == (TransactionState.COMMITTED, "dead-letter resend")
    assert [m.body for m in pulled(store)] == [b"poison", b"poison"]
    assert pulled(store)[1].msg_id == result.resent_msg_id


def test_a_serverless_half_message_too_old_for_its_file_is_rolled_back_not_committed(
    aws_env, open_test_store, tmp_path
):
    """A segment file may be deleted once idle for efs_segment_grace_s: a half message older than half of that is
    rolled back ("expired") rather than committed from a file that may be gone."""
    store = open_test_store(
        backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=f"x{now_ms()}", efs_segment_grace_s=0.01
    )
    store.create_topic(TopicConfig(name="tx", queues=1, message_type=MessageType.TRANSACTION))
    transaction = half(store, "late")
    while now_ms() <= transaction.prepared_ms + 5:  # older than half the grace (5 ms)
        time.sleep(0.001)
    with pytest.raises(TransactionConflict, match="it was rolled back \\(expired"):
        store.transactions.end("tx", transaction.msg_id, True, "producer")
    assert store.transactions.get("tx", transaction.msg_id).state is TransactionState.ROLLED_BACK
    assert pulled(store) == []


def test_a_transaction_on_a_topic_made_just_after_the_clock_stepped_back_commits(reopen):
    """A topic made when messages were stamped later than the clock reads (in the same millisecond, or before the
    clock stepped back) is made no earlier than them: its transactions are stamped no earlier than it, and so are
    not taken for a deleted namesake's (a 404 TransactionNotFound on commit, seen once under the gateway's load)."""
    store = reopen()
    store.create_topic(TopicConfig(name="before", queues=1))
    with clock_ahead(60_000):
        store.put("before", [Message(b"stamped a minute ahead", 0)])
    store.create_topic(TopicConfig(name="tx", queues=2, message_type=MessageType.TRANSACTION))
    transaction = half(store, "after-the-step")
    committed = store.transactions.end("tx", transaction.msg_id, True, "producer")
    assert committed.state is TransactionState.COMMITTED
    assert [(m.msg_id, m.body) for m in pulled(store)] == [(transaction.msg_id, b"after-the-step")]
