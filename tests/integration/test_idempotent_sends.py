"""Idempotent sends (tidemq_store/sends.py) on both backends, real RocksDB and a moto server over HTTP: a batch sent
again under its key is answered with the first send's results and stored once, across reopenings, racing threads and
writers killed with SIGKILL; the same key with other messages is refused; a key is forgotten past its window."""

from __future__ import annotations

import json
import random
import sys
import threading
import uuid
from functools import partial
from pathlib import Path

import pytest

from tests.killed import killed_at_random
from tidemq_protocol import clock
from tidemq_protocol.errors import InvalidArgument, InvalidBatch, MessageNotFound, SendConflict
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.record import encode_record, message_id
from tidemq_protocol.timer import delivery_properties
from tidemq_store import MessageStore, StoreConfig, TopicConfig, open_store
from tidemq_store.sends import SendKey, check_send_key

from .send_key_writer import QUEUES, TOPIC, batch_messages

WRITER = Path(__file__).with_name("send_key_writer.py")


def stored_bodies(store: MessageStore, topic: str) -> list[bytes]:
    """Every message of the topic, queue by queue."""
    bodies = []
    for queue in store.queue_offsets(topic):
        offset = queue.min_offset
        while offset < queue.max_offset:
            got = store.get(topic, queue.queue, offset, max_messages=1000)
            bodies += [m.body for m in got.messages]
            offset = got.next_offset
    return bodies


def spread(*bodies: bytes) -> list[Message]:
    return [Message(body, queue=i % 4) for i, body in enumerate(bodies)]


@pytest.fixture(params=["embedded", pytest.param("serverless", marks=pytest.mark.local_aws)])
def opener(request, open_test_store, tmp_path):
    """Opens the backend's store (embedded; serverless on the moto server) with overrides, the same data each time:
    call it again after closing the one it gave (serverless: any number at once)."""
    if request.param == "embedded":
        return open_test_store
    request.getfixturevalue("aws_env")
    prefix = f"s{uuid.uuid4().hex[:8]}"
    return lambda **overrides: open_test_store(
        backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=prefix, **overrides
    )


@pytest.fixture
def topic_store(opener) -> MessageStore:
    store = opener()
    store.create_topic(TopicConfig(name="orders", queues=4))
    return store


def test_a_batch_sent_again_under_its_key_answers_its_first_results_and_is_stored_once(topic_store):
    first = topic_store.put("orders", spread(b"a", b"b", b"c"), SendKey("batch-1"))
    again = topic_store.put("orders", [Message(b, queue=3) for b in (b"a", b"b", b"c")], SendKey("batch-1"))
    assert [(r.msg_id, r.queue, r.queue_offset) for r in again] == [(r.msg_id, r.queue, r.queue_offset) for r in first]
    assert sorted(stored_bodies(topic_store, "orders")) == [b"a", b"b", b"c"]
    assert [topic_store.message_by_id(r.msg_id).body for r in again] == [b"a", b"b", b"c"]


def test_records_sent_again_under_their_key_are_stored_once(topic_store):
    records = b"".join(encode_record(b"orders", 1, 7, b"", body) for body in (b"x", b"y"))
    first = topic_store.put_records("orders", records, 0, SendKey("records-1"))
    again = topic_store.put_records("orders", records, 2, SendKey("records-1"))
    assert again == first
    assert sorted(stored_bodies(topic_store, "orders")) == [b"x", b"y"]


def test_a_key_sent_with_other_messages_is_refused_and_stores_nothing(topic_store):
    topic_store.put("orders", spread(b"a"), SendKey("k"))
    before = topic_store.queue_offsets("orders")
    for other in (spread(b"b"), spread(b"a", b"a"), [Message(b"a", queue=0, tag="t")]):
        with pytest.raises(SendConflict):
            topic_store.put("orders", other, SendKey("k"))
    assert topic_store.queue_offsets("orders") == before


def test_the_same_key_on_another_topic_or_without_a_key_stores_again(topic_store):
    topic_store.create_topic(TopicConfig(name="invoices", queues=4))
    topic_store.put("orders", spread(b"a"), SendKey("k"))
    topic_store.put("invoices", spread(b"a"), SendKey("k"))
    topic_store.put("orders", spread(b"a"))
    assert stored_bodies(topic_store, "orders") == [b"a", b"a"]
    assert stored_bodies(topic_store, "invoices") == [b"a"]


def test_a_key_is_remembered_across_a_reopening(opener):
    store = opener()
    store.create_topic(TopicConfig(name="orders", queues=4))
    first = store.put("orders", spread(b"a", b"b"), SendKey("k"))
    store.close()
    store = opener()
    assert store.put("orders", spread(b"a", b"b"), SendKey("k")) == first
    assert sorted(stored_bodies(store, "orders")) == [b"a", b"b"]


WINDOW_MS = 5000
"""The short window the next test sets: long enough that a put right after another is inside it however busy the
machine (a serverless put on the loaded moto server has taken 2.3 s), short enough to wait out."""


def test_a_key_past_its_window_is_forgotten_and_stores_anew(opener):
    store = opener(send_dedup_window_ms=WINDOW_MS)
    store.create_topic(TopicConfig(name="orders", queues=4))
    first = store.put("orders", spread(b"a"), SendKey("k"))
    wait_until(lambda: clock.now_ms() > first[0].store_timestamp + WINDOW_MS)
    again = store.put("orders", spread(b"a"), SendKey("k"))
    assert again[0].msg_id != first[0].msg_id
    assert stored_bodies(store, "orders") == [b"a", b"a"]
    assert store.put("orders", spread(b"a"), SendKey("k")) == again  # remembered anew


def test_a_key_of_a_topic_deleted_and_made_again_is_forgotten(topic_store):
    topic_store.put("orders", spread(b"a"), SendKey("k"))
    topic_store.delete_topic("orders")
    deleted_at = clock.now_ms()
    wait_until(lambda: clock.now_ms() > deleted_at)  # the new topic is made after the send
    topic_store.create_topic(TopicConfig(name="orders", queues=4))
    topic_store.put("orders", spread(b"b"), SendKey("k"))
    assert stored_bodies(topic_store, "orders") == [b"b"]


@pytest.fixture
def later(topic_store) -> MessageStore:
    topic_store.create_topic(TopicConfig(name="later", queues=4, message_type=MessageType.DELAY))
    return topic_store


def due_in(ms: int, *bodies: bytes) -> list[Message]:
    return [Message(body, i % 4, properties=delivery_properties(delay=ms)) for i, body in enumerate(bodies)]


def pending_timers(store: MessageStore, topic: str) -> int:
    """How many timer messages of `topic` the store keeps (the backend's own table of them)."""
    if hasattr(store, "tables"):
        return sum(1 for _ in store.tables.timers.query(topic, consistent_read=True))
    return sum(1 for _ in store.timers._pending.items())


def test_a_delay_batch_held_for_later_sent_again_is_kept_once_and_delivered_once(later):
    first = later.put("later", due_in(1500, b"a", b"b"), SendKey("k"))
    again = later.put(
        "later", [Message(b, 3, properties=delivery_properties(delay=1500)) for b in (b"a", b"b")], SendKey("k")
    )
    assert again == first  # the same timer ids, queues, offset -1 and recall handles
    assert [r.queue_offset for r in first] == [-1, -1] and all(r.recall_handle for r in again)
    assert pending_timers(later, "later") == 2
    wait_until(lambda: later.timers.move_due("later") is not None and len(stored_bodies(later, "later")) >= 2)
    assert sorted(stored_bodies(later, "later")) == [b"a", b"b"]
    assert later.put("later", due_in(1500, b"a", b"b"), SendKey("k")) == first  # delivered: still the first's
    assert sorted(stored_bodies(later, "later")) == [b"a", b"b"] and pending_timers(later, "later") == 0


def test_a_delay_key_sent_with_other_messages_is_refused_and_keeps_nothing(later):
    later.put("later", due_in(60_000, b"a"), SendKey("k"))
    for other in (due_in(60_000, b"b"), due_in(60_000, b"a", b"a"), due_in(0, b"a")):
        with pytest.raises(SendConflict):
            later.put("later", other, SendKey("k"))
    assert pending_timers(later, "later") == 1 and stored_bodies(later, "later") == []


def test_a_delay_batch_appended_at_once_sent_again_when_due_later_answers_the_first(later):
    """A delivery time past at the first send (appended) and a resend of it both name the same moment: the key's
    record of either way is found by the other."""
    past = [Message(b"a", 0, properties=delivery_properties(clock.now_ms() - 1000))]
    first = later.put("later", past, SendKey("k"))
    assert first[0].queue_offset == 0
    assert later.put("later", past, SendKey("k")) == first
    assert stored_bodies(later, "later") == [b"a"] and pending_timers(later, "later") == 0


def test_a_recalled_delay_batch_sent_again_is_not_kept_again(later):
    (first,) = later.put("later", due_in(60_000, b"a"), SendKey("k"))
    later.recall("later", first.recall_handle)
    assert later.put("later", due_in(60_000, b"a"), SendKey("k")) == [first]
    assert pending_timers(later, "later") == 0


def test_a_delay_put_holds_at_most_99_timers_the_key_making_the_100th_item(later):
    with pytest.raises(InvalidBatch):
        later.put("later", due_in(60_000, *[b"%d" % i for i in range(100)]), SendKey("k"))
    results = later.put("later", due_in(60_000, *[b"%d" % i for i in range(99)]), SendKey("k"))
    assert later.put("later", due_in(60_000, *[b"%d" % i for i in range(99)]), SendKey("k")) == results
    assert pending_timers(later, "later") == 99


@pytest.mark.parametrize("key", ["", "x" * 129, "tab\there", "é"])
def test_a_key_that_cannot_name_a_send_is_invalid(key):
    with pytest.raises(InvalidArgument):
        check_send_key(key)


def test_racing_threads_sending_one_key_store_it_once(opener):
    """Threads send one batch under one key at once, key after key: four with a store each on the serverless backend
    (as separate processes would), or eight sharing the one store of the embedded backend."""
    first = opener()
    first.create_topic(TopicConfig(name="orders", queues=4))
    serverless = type(first).__name__.startswith("Serverless")
    stores = [opener() for _ in range(3)] + [first] if serverless else [first] * 8
    for round_ in range(3 if serverless else 10):
        answers = race([partial(send_round, store, round_) for store in stores])
        assert all(answer == answers[0] for answer in answers)
    bodies = stored_bodies(first, "orders")
    assert len(bodies) == len(set(bodies)) == (6 if serverless else 20)


def send_round(store: MessageStore, round_: int) -> list:
    return store.put("orders", spread(b"%d-a" % round_, b"%d-b" % round_), SendKey(f"r{round_}"))


def race(calls: list) -> list:
    """Run the calls on threads of their own, released at once; their answers (an error raised fails the test)."""
    barrier, answers, errors = threading.Barrier(len(calls)), [], []

    def run(call) -> None:
        barrier.wait()
        try:
            answers.append(call())
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return answers


@pytest.mark.parametrize("kills", [pytest.param(4, id="short"), pytest.param(25, id="long", marks=pytest.mark.long)])
def test_batches_sent_again_across_sigkills_are_stored_exactly_once(kills, reopen_args):
    """A writer of three threads sending keyed batches is SIGKILLed at random moments; each run sends again, under
    their keys, the last acknowledged batches of each thread and the ones the kill cut off. Every acknowledged
    message is then stored exactly once, where its acknowledgement said, and no message is stored twice."""
    backend = reopen_args
    acked = sent_across_kills(backend, kills, random.Random(29))
    store = open_store(StoreConfig(**backend))
    try:
        bodies = stored_bodies(store, TOPIC)
        assert len(bodies) == len(set(bodies)), "a message stored twice"
        for (t, i, j), (queue, offset, _) in acked.items():
            assert store.get(TOPIC, queue, offset, max_messages=1).messages[0].body == batch_messages(t, i)[j].body
        assert len(acked) > 0 and len(store.queue_offsets(TOPIC)) == QUEUES
    finally:
        store.close()


def sent_across_kills(backend: dict, kills: int, rng: random.Random, *args: str) -> dict:
    """Run send_key_writer.py (`args` after its starts) `kills` times, SIGKILLed at random, each run starting its
    threads up to three batches before the last acknowledged; what was acknowledged: (thread, batch, message) ->
    (queue, offset, id), each the same however often it was sent."""
    threads, acked = 3, {}
    for run in range(kills):
        nexts = [1 + max((i for t, i, _ in acked if t == thread), default=-1) for thread in range(threads)]
        starts = ",".join(str(max(0, n - rng.randint(0, 3))) for n in nexts)
        out, _ = killed_at_random([sys.executable, str(WRITER), json.dumps(backend), starts, *args], run, rng)
        for line in out.decode().splitlines():
            fields = line.split()
            if len(fields) != 6:
                continue  # cut short by the kill: no acknowledgement
            t, i, j, queue, offset, msg_id = fields
            where = (int(queue), int(offset), msg_id)
            assert acked.setdefault((int(t), int(i), int(j)), where) == where  # a retry answers as the first send
    return acked


@pytest.mark.parametrize("kills", [pytest.param(4, id="short"), pytest.param(25, id="long", marks=pytest.mark.long)])
def test_delay_batches_sent_again_across_sigkills_are_kept_once_and_delivered_once(kills, reopen_args):
    """As above, on a DELAY topic whose messages are all due a few seconds on: the batches sent before are kept as
    timers, with their keys in the same write; those sent after are appended. Once all are due and moved, every
    acknowledged message is on the topic, and none twice."""
    backend = reopen_args
    deliver_at = clock.now_ms() + 3000
    acked = sent_across_kills(backend, kills, random.Random(31), str(deliver_at))
    store = open_store(StoreConfig(**backend))
    try:
        wait_until(lambda: clock.now_ms() > deliver_at and store.timers.move_due() is not None)
        wait_until(lambda: store.timers.move_due() is not None and pending_timers(store, TOPIC) == 0)
        bodies = stored_bodies(store, TOPIC)
        assert len(bodies) == len(set(bodies)), "a message stored twice"
        expected = {batch_messages(t, i)[j].body for t, i, j in acked}
        assert len(acked) > 0 and expected <= set(bodies)
    finally:
        store.close()


@pytest.fixture(params=["embedded", pytest.param("serverless", marks=pytest.mark.local_aws)])
def reopen_args(request, tmp_path) -> dict[str, str]:
    """The StoreConfig fields of a store a child process opens (serverless: on the session's moto server)."""
    if request.param == "embedded":
        return {"home": str(tmp_path / "store")}
    request.getfixturevalue("aws_env")
    prefix = f"k{uuid.uuid4().hex[:8]}"
    return {
        "home": str(tmp_path),
        "backend": "serverless",
        "efs_path": str(tmp_path / "efs"),
        "dynamodb_prefix": prefix,
    }


def test_the_embedded_logs_key_record_is_no_message(store):
    store.create_topic(TopicConfig(name="orders", queues=1))
    (sent,) = store.put("orders", [Message(b"a", 0)], SendKey("k"))
    position, size = int(sent.msg_id[:16], 16), int(sent.msg_id[16:], 16)
    mark = message_id(position + size, store.commitlog.written_position - position - size)
    with pytest.raises(MessageNotFound):
        store.message_by_id(mark)
    assert store.put("orders", [Message(b"b", 0)])[0].queue_offset == 1


def test_embedded_retention_forgets_keys_past_their_window(store):
    store.create_topic(TopicConfig(name="orders", queues=1))
    store.put("orders", [Message(b"a", 0)], SendKey("k"))
    assert store.cq.sent("orders", "k") is not None
    store.clean_expired(now_ms=clock.now_ms() + store.config.send_dedup_window_ms + 1)
    assert store.cq.sent("orders", "k") is None


def wait_until(condition, timeout_s: float = 30.0) -> None:
    deadline = clock.now_ms() + timeout_s * 1000
    while not condition():
        assert clock.now_ms() < deadline, "the condition never held"
        threading.Event().wait(0.01)


def test_a_put_listener_is_told_where_a_keyed_append_ends_its_key_record_included(store):
    """A SYNC_MASTER acknowledges once its slave holds this much (servers/container/replication.py): a slave holding
    the messages but not the SEND_KEY record after them would hold a torn batch, which it drops."""
    store.create_topic(TopicConfig(name="orders", queues=2))
    told = []
    store.add_put_listener(told.append)
    store.put("orders", spread(b"a", b"b"), SendKey("k"))
    store.put("orders", spread(b"c"))
    assert told[1].positions[0] == told[0].end  # the next append starts where the keyed one ended
    assert told[1].end == store.written_position
    assert told[0].end > told[0].positions[-1] + told[0].sizes[-1]


@pytest.fixture
def paying(topic_store) -> MessageStore:
    topic_store.create_topic(TopicConfig(name="pay", queues=4, message_type=MessageType.TRANSACTION))
    return topic_store


def half(store: MessageStore, body: bytes, key: str | None, queue: int = 0, tag: str | None = None):
    send = SendKey(key) if key else None
    return store.transactions.prepare("pay", Message(body, queue, tag=tag), "checkout", 0, send)


def test_a_half_message_sent_again_under_its_key_answers_its_transaction_and_prepares_nothing(paying):
    first = half(paying, b"paid", "h1", queue=0)
    assert half(paying, b"paid", "h1", queue=3) == first  # routed elsewhere this time: the same transaction
    assert [t.msg_id for t in paying.transactions.list("pay", None, None, 100)] == [first.msg_id]
    committed = paying.transactions.end("pay", first.msg_id, True, "producer")
    assert half(paying, b"paid", "h1") == committed  # answered as it is now: committed, nothing prepared
    assert stored_bodies(paying, "pay") == [b"paid"]
    assert len(paying.transactions.list("pay", None, None, 100)) == 1


def test_a_half_message_key_sent_with_another_message_is_refused_and_prepares_nothing(paying):
    half(paying, b"paid", "h1")
    for body, tag in ((b"other", None), (b"paid", "t")):
        with pytest.raises(SendConflict):
            half(paying, body, "h1", tag=tag)
    assert len(paying.transactions.list("pay", None, None, 100)) == 1


def test_a_half_messages_key_is_apart_from_a_puts_and_remembered_across_a_reopening(opener):
    store = opener()
    store.create_topic(TopicConfig(name="pay", queues=4, message_type=MessageType.TRANSACTION))
    first = half(store, b"paid", "k")
    assert half(store, b"paid", None) != first  # without a key: another transaction
    store.close()
    store = opener()
    assert half(store, b"paid", "k") == first
    assert len(store.transactions.list("pay", None, None, 100)) == 2


def test_racing_threads_sending_one_half_message_prepare_it_once(opener):
    first = opener()
    first.create_topic(TopicConfig(name="pay", queues=4, message_type=MessageType.TRANSACTION))
    serverless = type(first).__name__.startswith("Serverless")
    stores = [opener() for _ in range(3)] + [first] if serverless else [first] * 8
    answers = race([partial(half, store, b"paid", "k") for store in stores])
    assert all(answer.msg_id == answers[0].msg_id for answer in answers)
    assert len(first.transactions.list("pay", None, None, 100)) == 1
