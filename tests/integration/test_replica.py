"""A slave's commit log as a copy of its master's, on real files (embedded/replica.py): the same records at the same
positions, so message ids and queue offsets match; segments roll where the master's do; a slave opened again
recovers what it had; a log that cannot continue the master's is refused."""

from __future__ import annotations

import pytest

from tidemq_protocol.errors import ReplicaDiverged
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig
from tidemq_store.embedded.replica import ReplicaChunk

SEGMENT = 64 * 1024


def catch_up(master, slave, max_bytes: int = 16 * 1024) -> int:
    """Copy chunks until the slave has everything; how many chunks it took."""
    chunks = 0
    while True:
        chunk = ReplicaChunk.decode(master.read_replica(slave.written_position, max_bytes).encode())
        if not chunk.data:
            return chunks
        assert slave.apply_replica(chunk) == chunk.end
        chunks += 1


def fill(store, batches: int, topic: str = "orders") -> list:
    results = []
    for i in range(batches):
        batch = [Message(f"{topic}-{i}-{j}".encode() * 40, queue=j % 3, keys=(f"k{i}-{j}",)) for j in range(5)]
        results += store.put(topic, batch)
    return results


def test_a_slave_holds_the_masters_records_at_the_same_offsets_and_ids(open_test_store, tmp_path):
    master = open_test_store(home=tmp_path / "master", commitlog_segment_bytes=SEGMENT)
    slave = open_test_store(home=tmp_path / "slave", commitlog_segment_bytes=4 * SEGMENT)
    master.create_topic(TopicConfig(name="orders", queues=3))
    sent = fill(master, 120)
    assert catch_up(master, slave) > 3
    assert slave.written_position == master.written_position
    assert slave.commitlog.segments() == master.commitlog.segments()  # rolled where the master rolled
    for result in sent:
        got = slave.get("orders", result.queue, result.queue_offset, max_messages=1).messages[0]
        assert (got.msg_id, got.queue_offset) == (result.msg_id, result.queue_offset)
        assert got.body == master.get("orders", result.queue, result.queue_offset, max_messages=1).messages[0].body
    assert slave.get_topic("orders") == master.get_topic("orders")
    assert [m.msg_id for m in slave.messages_by_key("orders", "k7-2")] == [sent[7 * 5 + 2].msg_id]

    master.update_topic("orders", queues=4)  # a change of the topic reaches the slave with its next messages
    master.put("orders", [Message(b"late", queue=3)])
    catch_up(master, slave)
    assert slave.get_topic("orders").queues == 4
    assert slave.get("orders", 3, 0).messages[0].body == b"late"


def test_a_slave_opened_again_goes_on_from_where_its_log_ends(open_test_store, tmp_path):
    master = open_test_store(home=tmp_path / "master", commitlog_segment_bytes=SEGMENT)
    master.create_topic(TopicConfig(name="orders", queues=3))
    fill(master, 40)
    slave = open_test_store(home=tmp_path / "slave")
    catch_up(master, slave)
    slave.close()
    more = fill(master, 40)
    slave = open_test_store(home=tmp_path / "slave")
    catch_up(master, slave)
    last = more[-1]
    assert slave.get("orders", last.queue, last.queue_offset).messages[0].msg_id == last.msg_id
    assert slave.queue_offsets("orders") == master.queue_offsets("orders")


def test_an_empty_slave_starts_at_the_masters_first_segment(open_test_store, tmp_path):
    master = open_test_store(home=tmp_path / "master", commitlog_segment_bytes=SEGMENT)
    master.create_topic(TopicConfig(name="orders", queues=3))
    fill(master, 150)
    first = master.commitlog.segments()[1].start
    master.commitlog.delete_segments_before(first)  # as retention does
    slave = open_test_store(home=tmp_path / "slave")
    catch_up(master, slave)
    assert slave.commitlog.min_position == first
    assert slave.written_position == master.written_position


def test_a_log_that_cannot_continue_the_masters_is_refused(open_test_store, tmp_path):
    master = open_test_store(home=tmp_path / "master")
    master.create_topic(TopicConfig(name="orders", queues=3))
    fill(master, 5)
    with pytest.raises(ReplicaDiverged, match="past the end"):
        master.read_replica(master.written_position + 1, 1024)
    with pytest.raises(ReplicaDiverged, match="not where a batch starts"):
        master.read_replica(7, 1024)
    other = open_test_store(home=tmp_path / "other")  # a slave that took writes of its own
    other.create_topic(TopicConfig(name="orders", queues=3))
    fill(other, 1)
    chunk = master.read_replica(0, 1 << 20)
    with pytest.raises(ReplicaDiverged):
        other.apply_replica(chunk)
    assert other.written_position < master.written_position  # nothing was written


def test_forcible_release_removes_only_the_oldest_segments_below_the_safe_position(open_test_store, tmp_path):
    store = open_test_store(home=tmp_path / "store", commitlog_segment_bytes=SEGMENT)
    store.create_topic(TopicConfig(name="orders", queues=3))
    fill(store, 150)
    segments = store.commitlog.segments()
    assert len(segments) > 4
    used = store.disk_usage()
    assert store.release_segments(1, safe_before=segments[2].end).segments_deleted == 1  # one byte: one segment
    assert store.commitlog.segments()[0].start == segments[1].start
    assert store.release_segments(10 * SEGMENT, safe_before=segments[2].end).segments_deleted == 2  # no further
    assert store.commitlog.segments()[0].start == segments[2].end
    assert store.disk_usage() < used
    assert store.release_segments(10 * SEGMENT, safe_before=segments[2].end).segments_deleted == 0
    assert store.queue_offsets("orders")[0].min_offset > 0
