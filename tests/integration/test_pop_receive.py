"""Pop consumption in process, over each backend and its ledger (the embedded store and RocksDB; the serverless store
and DynamoDB, on a moto server over HTTP or LocalStack): receives take from every queue, each message is held by one
delivery at a time, comes back with attempt + 1 when its visible time ends, and is gone for good once acked; handles
name one delivery; concurrent receivers share a topic without holding one message twice. Time is passed in (`now`),
never slept."""

from __future__ import annotations

import random
import threading
import uuid
from collections import Counter

import pytest
from pynamodb.signals import pre_dynamodb_send

from functions.logic.push import dead_letter
from tidemq_protocol.errors import InvalidArgument, InvalidReceiptHandle
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, TopicConfig
from tidemq_store.pop.api import Settled
from tidemq_store.pop.receive import PopConsumption

T0 = 1_000_000


@pytest.fixture(params=["embedded", pytest.param("serverless", marks=pytest.mark.local_aws)])
def store(request, open_test_store, tmp_path):
    """The backend's store (the serverless one marked `local_aws`, so `make test-localstack` runs it too)."""
    if request.param == "embedded":
        return open_test_store()
    request.getfixturevalue("aws_env")
    return open_test_store(backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=f"p{uuid.uuid4().hex[:8]}")


@pytest.fixture
def pop(store):
    store.create_topic(TopicConfig(name="t", queues=4))
    store.put("t", [Message(b"m%d" % i, queue=i % 4, tag="A" if i % 3 else "B") for i in range(100)])
    return PopConsumption(store, store.pop_ledger)


def bodies(popped) -> list[bytes]:
    return [p.message.body for p in popped]


def test_receives_take_every_message_once_from_all_queues_then_nothing(pop):
    first = pop.receive("g", "t", 32, 30_000, now=T0)
    second = pop.receive("g", "t", 1, 30_000, now=T0)
    assert len(first) == 32 and second[0].message.queue != first[0].message.queue  # each starts at another queue
    rest = second
    while batch := pop.receive("g", "t", 32, 30_000, now=T0):
        rest += batch
    assert sorted(bodies(first + rest)) == sorted(b"m%d" % i for i in range(100))
    assert all(p.attempt == 1 and p.invisible_until_ms == T0 + 30_000 for p in first + rest)
    assert pop.receive("h", "t", 32, 30_000, now=T0)  # another group has a ledger of its own


def test_an_unacked_message_comes_back_when_its_visible_time_ends_and_an_acked_one_never(pop):
    popped = []
    while batch := pop.receive("g", "t", 32, 10_000, now=T0):
        popped += batch
    acked, kept = popped[::2], popped[1::2]
    assert pop.ack("g", "t", [p.receipt_handle for p in acked]) == [Settled.DONE] * len(acked)
    assert pop.receive("g", "t", 32, 10_000, now=T0 + 9_999) == []
    again = []
    while batch := pop.receive("g", "t", 32, 10_000, now=T0 + 10_000):
        again += batch
    assert sorted(bodies(again)) == sorted(bodies(kept))
    assert all(p.attempt == 2 for p in again)
    assert pop.ack("g", "t", [p.receipt_handle for p in kept]) == [Settled.STALE] * len(kept)  # delivered again
    assert pop.ack("g", "t", [p.receipt_handle for p in acked]) == [Settled.ALREADY_ACKED] * len(acked)
    assert pop.ack("g", "t", [p.receipt_handle for p in again]) == [Settled.DONE] * len(again)
    assert pop.receive("g", "t", 32, 10_000, now=T0 + 10**9) == []


def test_a_change_of_invisible_time_holds_the_message_longer_under_a_new_handle(pop):
    (held,) = pop.receive("g", "t", 1, 10_000, now=T0)
    handle = pop.change_invisible("g", "t", held.receipt_handle, 60_000, now=T0 + 5_000)
    with pytest.raises(InvalidReceiptHandle):
        pop.change_invisible("g", "t", held.receipt_handle, 60_000, now=T0 + 5_000)  # the old handle is spent
    later = []
    while batch := pop.receive("g", "t", 32, 10_000, now=T0 + 20_000):
        later += batch
    assert held.message.body not in bodies(later)
    assert pop.ack("g", "t", [handle]) == [Settled.DONE]


def test_a_released_message_comes_back_after_its_delay_with_its_next_attempt(pop):
    (held,) = pop.receive("g", "t", 1, 60_000, now=T0)
    pop.release("g", "t", held.receipt_handle, 1_000, now=T0)
    while pop.receive("g", "t", 32, 60_000, now=T0 + 500):
        pass
    (again,) = pop.receive("g", "t", 1, 60_000, now=T0 + 1_000)
    assert (again.message.msg_id, again.attempt) == (held.message.msg_id, 2)


def test_tag_filters_apply_as_for_pull(pop):
    popped = []
    while batch := pop.receive("g", "t", 32, 10_000, "B", now=T0):
        popped += batch
    assert sorted(bodies(popped)) == sorted(b"m%d" % i for i in range(100) if i % 3 == 0)


def test_bad_arguments_and_handles_are_refused(pop):
    for max_messages, invisible_ms in [(0, 10_000), (1, 0)]:
        with pytest.raises(InvalidArgument):
            pop.receive("g", "t", max_messages, invisible_ms)
    (held,) = pop.receive("g", "t", 1, 10_000, now=T0)
    for handle in ["nonsense", held.receipt_handle[:-2] + "AA"]:
        with pytest.raises(InvalidReceiptHandle):
            pop.ack("g", "t", [handle]) if handle == "nonsense" else pop.change_invisible("g", "t", handle, 10_000)
    assert pop.ack("g", "t", [held.receipt_handle]) == [Settled.DONE]


def test_concurrent_receivers_never_hold_one_message_at_once_and_ack_each_once(pop):
    pop.store.create_topic(TopicConfig(name="many", queues=8))
    for start in range(0, 4000, 500):
        pop.store.put("many", [Message(b"%d" % i, queue=i % 8) for i in range(start, start + 500)])
    acked: Counter = Counter()
    lock, receivers = threading.Lock(), set()

    def consumer(index: int) -> None:
        rng, now = random.Random(index), T0
        while True:
            batch = pop.receive("g", "many", 7, 1_000, now=now)
            if not batch:
                return
            receivers.add(index)
            give_back = [p for p in batch if rng.random() < 0.1]
            done = [p for p in batch if p not in give_back]
            outcomes = pop.ack("g", "many", [p.receipt_handle for p in done])
            assert outcomes == [Settled.DONE] * len(done)  # no other consumer held them meanwhile
            for p in give_back:
                pop.release("g", "many", p.receipt_handle, 0, now=now)
            with lock:
                acked.update(p.message.msg_id for p in done)

    threads = [threading.Thread(target=consumer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    while leftovers := pop.receive("g", "many", 32, 1_000, now=T0):  # given back as the others finished
        pop.ack("g", "many", [p.receipt_handle for p in leftovers])
        acked.update(p.message.msg_id for p in leftovers)
    assert len(acked) == 4000 and set(acked.values()) == {1}
    assert len(receivers) > 1  # they did run at once


def test_a_message_past_its_last_attempt_is_dead_lettered_once_and_leaves_the_ledger(store):
    store.create_topic(TopicConfig(name="d", queues=2))
    store.put(
        "d", [Message(b"poison", queue=0, keys=("p-1",), tag="T", properties={"a": "1"}), Message(b"ok", queue=1)]
    )
    pop = PopConsumption(
        store,
        store.pop_ledger,
        max_attempts=3,
        dead_letters=lambda group, messages, attempts: dead_letter(store, group, messages, attempts, "not acked"),
    )
    now, attempts = T0, []
    while True:  # never acked: it comes back each time its invisible time ends, until its third delivery ends
        received = pop.receive("g", "d", 32, 1_000, now=now)
        pop.ack("g", "d", [p.receipt_handle for p in received if p.message.body == b"ok"])
        popped = [p for p in received if p.message.body == b"poison"]
        if not popped:
            break
        attempts.append(popped[0].attempt)
        now += 1_000
    assert attempts == [1, 2, 3]
    (letter,) = store.get("%DLQ%g", 0, 0).messages
    assert (letter.body, letter.keys, letter.tag, letter.properties["a"]) == (b"poison", ("p-1",), "T", "1")
    assert letter.properties["RECONSUME_TIME"] == "3" and letter.properties["ORIGIN_QUEUE_OFFSET"] == "0"
    assert all(entry.offset != 0 for entry in store.pop_ledger.read("g", "d", 0).entries)  # the group moved on
    assert not [p for p in pop.receive("g", "d", 32, 1_000, now=now + 10**7) if p.message.body == b"poison"]
    assert len(store.get("%DLQ%g", 0, 0).messages) == 1  # lettered once


def test_max_attempts_and_dead_letters_go_together(store):
    for max_attempts, dead_letters in [(3, None), (None, print), (0, print)]:
        with pytest.raises(InvalidArgument):
            PopConsumption(store, store.pop_ledger, max_attempts, dead_letters)


def test_a_topic_or_group_deleted_takes_its_ledgers_with_it(pop):
    assert len(pop.receive("g", "t", 32, 10_000, now=T0)) == 32
    pop.store.create_group(GroupConfig(name="g"))
    pop.store.delete_group("g")
    assert len(pop.receive("g", "t", 32, 10_000, now=T0)) == 32  # afresh: every message again
    pop.store.delete_topic("t")
    pop.store.create_topic(TopicConfig(name="t", queues=4))
    pop.store.put("t", [Message(b"new %d" % i, queue=i % 4) for i in range(8)])
    assert sorted(bodies(pop.receive("g", "t", 32, 10_000, now=T0))) == sorted(b"new %d" % i for i in range(8))


def test_a_store_with_a_cold_tier_keeps_the_ledger_of_its_hot_store(open_test_store, tmp_path):
    store = open_test_store(tier="posix", tier_path=tmp_path / "tier")
    store.create_topic(TopicConfig(name="t", queues=2))
    store.put("t", [Message(b"%d" % i, queue=i % 2) for i in range(10)])
    assert store.pop_ledger is store.hot.pop_ledger
    popped = PopConsumption(store, store.pop_ledger).receive("g", "t", 32, 10_000, now=T0)
    assert sorted(bodies(popped)) == sorted(b"%d" % i for i in range(10))
    store.close()
    store = open_test_store(tier="posix", tier_path=tmp_path / "tier")  # the ledger outlives the process
    assert PopConsumption(store, store.pop_ledger).receive("g", "t", 32, 10_000, now=T0) == []


@pytest.mark.local_aws  # make test-localstack runs it too
def test_a_serverless_receive_of_32_and_one_ack_of_them_cost_the_ledger_under_a_tenth_of_a_request_each(
    open_test_store, tmp_path, aws_env
):
    """Counted, not timed: the ledger's part is a Query and a transaction for the receive (one queue) and one
    transaction for the ack; the store adds its read of the queue's item (the topic's config it knows since the
    put: metadata.CONFIG_CACHE_S)."""
    store = open_test_store(backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=f"p{uuid.uuid4().hex[:8]}")
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"%d" % i) for i in range(64)])
    pop = PopConsumption(store, store.pop_ledger)
    sent: list[tuple[str, str | None]] = []

    def count(_sender, *, operation_name: str, table_name: str | None, **_) -> None:
        sent.append((operation_name, table_name))

    pre_dynamodb_send.connect(count)
    try:
        before = store.tables.requests
        popped = pop.receive("g", "t", 32, 30_000, now=T0)
        assert pop.ack("g", "t", [p.receipt_handle for p in popped]) == [Settled.DONE] * 32
        requests = store.tables.requests - before
    finally:
        pre_dynamodb_send.disconnect(count)
    ledger = [op for op, table in sent if table == f"{store.tables.prefix}-pop_ledger" or op == "TransactWriteItems"]
    assert len(popped) == 32 and len(ledger) == len(sent) - 1 == requests - 1
    assert len(ledger) <= 0.1 * 32  # 3: the read, the claim, the ack
    assert requests <= 4  # with the store's read of the queue
