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
from tidemq_protocol.errors import InvalidArgument, MessageNotFound, SendConflict
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


def test_a_key_past_its_window_is_forgotten_and_stores_anew(opener):
    store = opener(send_dedup_window_ms=1000)
    store.create_topic(TopicConfig(name="orders", queues=4))
    first = store.put("orders", spread(b"a"), SendKey("k"))
    wait_until(lambda: clock.now_ms() > first[0].store_timestamp + 1000)
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


def test_a_delay_topics_key_is_accepted_and_not_deduplicated(topic_store):
    topic_store.create_topic(TopicConfig(name="later", queues=1, message_type=MessageType.DELAY))
    due = delivery_properties(delay=60_000)
    results = [topic_store.put("later", [Message(b"d", 0, properties=due)], SendKey("k")) for _ in range(2)]
    assert results[0][0].msg_id != results[1][0].msg_id


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
    rng, threads = random.Random(29), 3
    acked: dict[tuple[int, int, int], tuple[int, int, str]] = {}
    for run in range(kills):
        nexts = [1 + max((i for t, i, _ in acked if t == thread), default=-1) for thread in range(threads)]
        starts = ",".join(str(max(0, n - rng.randint(0, 3))) for n in nexts)
        out, _ = killed_at_random([sys.executable, str(WRITER), json.dumps(backend), starts], run, rng)
        for line in out.decode().splitlines():
            fields = line.split()
            if len(fields) != 6:
                continue  # cut short by the kill: no acknowledgement
            t, i, j, queue, offset, msg_id = fields
            where = (int(queue), int(offset), msg_id)
            assert acked.setdefault((int(t), int(i), int(j)), where) == where  # a retry answers as the first send
    store = open_store(StoreConfig(**backend))
    try:
        bodies = stored_bodies(store, TOPIC)
        assert len(bodies) == len(set(bodies)), "a message stored twice"
        for (t, i, j), (queue, offset, _) in acked.items():
            assert store.get(TOPIC, queue, offset, max_messages=1).messages[0].body == batch_messages(t, i)[j].body
        assert len(acked) > 0 and len(store.queue_offsets(TOPIC)) == QUEUES
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
