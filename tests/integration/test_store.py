"""The embedded MessageStore end to end on real files: what is put is got, in order, with everything intact."""

from __future__ import annotations

import os
import threading

import pytest

from tidemq_protocol.errors import MessageNotFound, OffsetOutOfRange, TopicNotFound
from tidemq_protocol.message import Message
from tidemq_protocol.record import HEADER_SIZE, decode_records
from tidemq_store import FlushDiskType, GroupConfig, TopicConfig
from tidemq_store.errors import StoreClosed


def drain(store, topic: str, queue: int, offset: int = 0, **options) -> list:
    messages = []
    while True:
        result = store.get(topic, queue, offset, **options)
        messages += result.messages
        if result.next_offset == offset:
            return messages
        offset = result.next_offset


def test_messages_come_back_in_order_with_bodies_and_properties(store):
    store.create_topic(TopicConfig(name="orders", queues=3))
    sent = [
        Message(
            f"order-{i}".encode(),
            queue=i % 3,
            keys=(f"k{i}",),
            tag="even" if i % 2 == 0 else "odd",
            properties={"n": str(i)},
            born_timestamp=1_000 + i,
        )
        for i in range(30)
    ]
    results = store.put("orders", sent)
    assert [r.queue_offset for r in results] == [i // 3 for i in range(30)]
    for queue in range(3):
        got = drain(store, "orders", queue, max_messages=4)
        mine = [m for m in sent if m.queue == queue]
        assert [m.queue_offset for m in got] == list(range(10))
        assert [(m.body, m.keys, m.tag, m.properties, m.born_timestamp) for m in got] == [
            (m.body, m.keys, m.tag, dict(m.properties), m.born_timestamp) for m in mine
        ]
        assert [m.msg_id for m in got] == [r.msg_id for r in results if r.queue == queue]


def test_tag_filter_returns_matching_messages_and_skips_past_the_rest(store):
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"%d" % i, tag=["A", "B", "C"][i % 3]) for i in range(9)])
    result = store.get("t", 0, 0, message_filter="A || C")
    assert [m.body for m in result.messages] == [b"0", b"2", b"3", b"5", b"6", b"8"]
    assert result.next_offset == 9
    result = store.get("t", 0, 0, max_messages=2, message_filter="B")
    assert [m.body for m in result.messages] == [b"1", b"4"] and result.next_offset == 5
    assert store.get("t", 0, 0, message_filter="Z").messages == []


def test_max_bytes_limits_a_read_but_always_returns_one_message(store):
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"x" * 1000) for _ in range(5)])
    assert len(store.get("t", 0, 0, max_bytes=2500).messages) == 2
    assert len(store.get("t", 0, 0, max_bytes=1).messages) == 1


def test_a_read_takes_as_many_records_as_fit_though_the_first_is_larger_than_the_rest(store):
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"x" * 1000)] + [Message(b"%03d" % i) for i in range(100)])
    first, small = HEADER_SIZE + 1 + 1000, HEADER_SIZE + 1 + 3  # records of topic "t"
    fit = 1 + (4000 - first) // small
    batch = store.read_records("t", 0, 0, max_messages=1000, max_bytes=4000)
    assert (batch.count, batch.next_offset, len(batch.records)) == (fit, fit, first + (fit - 1) * small)
    assert [m.body for m in store.get("t", 0, 0, max_messages=1000, max_bytes=4000).messages][-1] == b"%03d" % (fit - 2)


@pytest.mark.parametrize("between", [10, 20_000])  # near: one read of the span of the runs; far: one read each
def test_a_read_of_records_takes_its_queues_records_and_none_of_those_between(store, between):
    store.create_topic(TopicConfig(name="t", queues=2))
    mine = []
    for put in range(5):
        bodies = [b"%d-%d" % (put, i) for i in range(3)]
        mine += bodies
        store.put("t", [Message(body, queue=0) for body in bodies] + [Message(b"o" * between, queue=1)])
    batch = store.read_records("t", 0, 0, max_messages=1000)
    assert batch.count == len(mine) and batch.next_offset == len(mine)
    assert [(m.queue, m.body) for m in decode_records(batch.records)] == [(0, body) for body in mine]


def test_offsets_and_time_lookup(store):
    store.create_topic(TopicConfig(name="t", queues=2))
    first = store.put("t", [Message(b"a", queue=1)])[0]
    later = store.put("t", [Message(b"b", queue=1), Message(b"c", queue=1)])
    assert [(q.min_offset, q.max_offset) for q in store.queue_offsets("t")] == [(0, 0), (0, 3)]
    assert store.offset_for_timestamp("t", 1, 0) == 0
    assert store.offset_for_timestamp("t", 1, later[0].store_timestamp) in (0, 1)
    assert store.offset_for_timestamp("t", 1, later[0].store_timestamp + 1) == 3
    assert first.store_timestamp <= later[0].store_timestamp
    result = store.get("t", 1, 3)
    assert result.messages == [] and result.next_offset == 3 and result.max_offset == 3


def test_lookup_by_id_and_by_key(store):
    store.create_topic(TopicConfig(name="t", queues=2))
    results = store.put("t", [Message(b"one", keys=("order-1", "user-9")), Message(b"two", queue=1, keys=("user-9",))])
    assert store.message_by_id(results[1].msg_id).body == b"two"
    assert [m.body for m in store.messages_by_key("t", "user-9")] == [b"one", b"two"]
    assert [m.body for m in store.messages_by_key("t", "user-9", limit=1)] == [b"two"]
    assert [m.body for m in store.messages_by_key("t", "order-1")] == [b"one"]
    assert store.messages_by_key("t", "nobody") == []
    with pytest.raises(MessageNotFound):
        store.message_by_id("0" * 24)
    with pytest.raises(MessageNotFound):
        store.message_by_id(results[1].msg_id[:-1] + "0")


def test_reads_cross_many_small_segments(open_test_store):
    store = open_test_store(commitlog_segment_bytes=64 * 1024)
    store.create_topic(TopicConfig(name="t", queues=2))
    bodies = [bytes([i % 256]) * 3000 for i in range(200)]
    for i in range(0, 200, 10):
        store.put("t", [Message(b, queue=(i // 10) % 2) for b in bodies[i : i + 10]])
    assert len(store.commitlog.segments()) > 5
    got = drain(store, "t", 0, max_messages=1000) + drain(store, "t", 1, max_messages=1000)
    assert sorted(m.body for m in got) == sorted(bodies)
    assert [m.body for m in store.messages_by_key("t", "x")] == []


def test_a_closed_store_says_so(open_test_store):
    """A thread still at work when its store closes (the trace writer's flush, say) gets StoreClosed, which it expects,
    not a KeyError from a closed RocksDB family."""
    store = open_test_store()
    store.create_topic(TopicConfig(name="t", queues=1))
    store.close()
    with pytest.raises(StoreClosed):
        store.put("t", [Message(b"late")])
    with pytest.raises(StoreClosed):
        store.get_topic("t")


def test_topic_lifecycle_and_paging(store):
    for name in ["c", "a", "b", "d"]:
        store.create_topic(TopicConfig(name=name, queues=1))
    assert [t.name for t in store.list_topics(limit=2)] == ["a", "b"]
    assert [t.name for t in store.list_topics(after="b", limit=10)] == ["c", "d"]
    updated = store.update_topic("a", retention_ms=None, queues=4, attributes={"team": "x"})
    assert (updated.retention_ms, updated.queues, updated.attributes) == (None, 4, {"team": "x"})
    assert store.get_topic("a") == updated
    store.delete_topic("a")
    with pytest.raises(TopicNotFound):
        store.get_topic("a")
    assert [t.name for t in store.list_topics()] == ["b", "c", "d"]


def test_a_recreated_topic_starts_empty(store):
    store.create_topic(TopicConfig(name="t", queues=1))
    old = store.put("t", [Message(b"old", keys=("k",))])[0]
    store.delete_topic("t")
    store.create_topic(TopicConfig(name="t", queues=1))
    assert store.queue_offsets("t")[0].max_offset == 0
    new = store.put("t", [Message(b"new", keys=("k",))])[0]
    assert new.queue_offset == 0
    assert [m.body for m in store.messages_by_key("t", "k")] == [b"new"]
    with pytest.raises(MessageNotFound):
        store.message_by_id(old.msg_id)


def test_groups_commit_offsets(store):
    store.create_topic(TopicConfig(name="t", queues=2))
    store.create_group(GroupConfig(name="g"))
    store.put("t", [Message(b"x", queue=1)] * 3)
    store.commit_offsets("g", "t", {1: 2, 0: 0})
    assert store.committed_offsets("g", "t") == {0: 0, 1: 2}
    assert store.group_topics("g") == ["t"]
    with pytest.raises(OffsetOutOfRange, match=r"valid offsets are 0\.\.3"):
        store.commit_offsets("g", "t", {1: 4})
    store.delete_topic("t")
    assert store.group_topics("g") == []
    store.delete_group("g")
    assert store.list_groups() == []


@pytest.mark.parametrize("flush", list(FlushDiskType))
def test_concurrent_producers_get_dense_offsets_and_lose_nothing(open_test_store, flush):
    store = open_test_store(flush_disk_type=flush)
    store.create_topic(TopicConfig(name="t", queues=2))
    acknowledged: dict[int, list] = {0: [], 1: []}
    lock = threading.Lock()

    def produce(worker: int) -> None:
        for batch in range(50):
            messages = [Message(f"{worker}-{batch}-{i}".encode(), queue=worker % 2) for i in range(10)]
            results = store.put("t", messages)
            with lock:
                acknowledged[worker % 2] += [(r.queue_offset, m.body) for r, m in zip(results, messages, strict=True)]

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for queue in (0, 1):
        got = [(m.queue_offset, m.body) for m in drain(store, "t", queue, max_messages=500)]
        assert got == sorted(acknowledged[queue]) and [o for o, _ in got] == list(range(1500))


def test_a_long_poll_waits_while_the_message_at_its_offset_is_written_but_not_yet_durable(open_test_store, monkeypatch):
    """SYNC: a reader sees a message once its fsync is done, so a wait for it must not end before (it used to end
    at once when a later message's entry was there, and the read then found nothing: a round trip spent)."""
    store = open_test_store(flush_disk_type=FlushDiskType.SYNC, commitlog_preallocate_bytes=0)
    store.create_topic(TopicConfig(name="orders", queues=1))
    syncing, release = threading.Event(), threading.Event()
    fdatasync = os.fdatasync

    def held(fd: int) -> None:  # the commit log's fsync, held until the test lets it go
        syncing.set()
        assert release.wait(60)
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", held)
    putter = threading.Thread(target=store.put, args=("orders", [Message(b"one"), Message(b"two")]))
    putter.start()
    try:
        assert syncing.wait(60)  # written: both entries are in the ConsumeQueue, neither is durable
        assert store.max_offset("orders", 0) == 2
        assert store.wait_for_messages("orders", 0, 0, timeout_s=0.3) is False
        assert store.get("orders", 0, 0).messages == []
    finally:
        release.set()
        putter.join(60)
    assert store.wait_for_messages("orders", 0, 0, timeout_s=60) is True
    assert [m.body for m in store.get("orders", 0, 0).messages] == [b"one", b"two"]
