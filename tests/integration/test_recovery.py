"""Recovery: a torn tail is cut, indexes are rebuilt from the checkpoint, damage to sealed data is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.message import Message
from tidemq_protocol.record import PendingRecord, encode_batch, record_size
from tidemq_store import TopicConfig


def put_batches(store, count: int, size: int = 5, queue: int = 0) -> list:
    return [store.put("t", [Message(b"m%d-%d" % (b, i), queue=queue) for i in range(size)]) for b in range(count)]


def last_segment(home):
    return sorted((home / "commitlog").iterdir())[-1]


def test_a_torn_tail_is_cut_and_offsets_continue(open_test_store, store_config):
    store = open_test_store()
    store.create_topic(TopicConfig(name="t", queues=1))
    put_batches(store, 3)
    end = store.commitlog.written_position
    store.close()
    # A crash in the middle of the next put: some whole records of a batch, then half a record.
    records = [PendingRecord(0, 15 + i, 0, b"", b"torn") for i in range(4)]
    torn = encode_batch(b"t", records, end, 0)
    sizes = [record_size(b"t", r.properties, r.body) for r in records]
    with open(last_segment(store_config().home), "ab") as segment:
        segment.write(torn[: sum(sizes[:3]) + 10])
    store = open_test_store()
    assert store.commitlog.written_position == end
    assert [m.queue_offset for m in store.get("t", 0, 0, max_messages=100).messages] == list(range(15))
    assert store.put("t", [Message(b"after")])[0].queue_offset == 15


def test_index_entries_past_a_lost_log_tail_are_dropped(open_test_store, store_config):
    store = open_test_store()
    store.create_topic(TopicConfig(name="t", queues=1))
    put_batches(store, 1)
    first_end = store.commitlog.written_position
    put_batches(store, 1)
    store.close()
    # As after a power loss: the log lost its second batch, the index (flushed) still knows it.
    home = store_config().home
    os.truncate(last_segment(home), first_end)
    (home / "checkpoint").write_text(json.dumps({"position": first_end, "clean": False}))
    store = open_test_store()
    assert store.queue_offsets("t")[0].max_offset == 5
    assert store.put("t", [Message(b"next")])[0].queue_offset == 5
    assert [m.body for m in store.get("t", 0, 4).messages] == [b"m0-4", b"next"]


def test_damage_inside_a_sealed_segment_is_refused_not_truncated(open_test_store, store_config):
    store = open_test_store(commitlog_segment_bytes=64 * 1024)
    store.create_topic(TopicConfig(name="t", queues=1))
    for _ in range(20):
        store.put("t", [Message(b"x" * 1000) for _ in range(10)])
    store.close()
    home = store_config().home
    (home / "checkpoint").write_text(json.dumps({"position": 0, "clean": False}))
    first = sorted((home / "commitlog").iterdir())[0]
    with open(first, "r+b") as segment:
        segment.seek(5000)
        segment.write(b"\xff\xff")
    with pytest.raises(CorruptStore, match="sealed commit-log segment"):
        open_test_store(commitlog_segment_bytes=64 * 1024)


def test_a_killed_process_loses_no_acknowledged_message_though_its_index_was_never_flushed(tmp_path):
    """The ConsumeQueue has no WAL and the checkpoint never moved: everything comes back by replay."""
    home = tmp_path / "store"
    child = textwrap.dedent(f"""
        import os, signal
        from tidemq_store import Message, StoreConfig, TopicConfig, open_store
        store = open_store(StoreConfig(home={str(home)!r}, checkpoint_interval_s=3600))
        store.create_topic(TopicConfig(name="t", queues=2))
        for b in range(50):
            store.put("t", [Message(b"%d-%d" % (b, i), queue=b % 2, keys=("k%d" % b,), tag="T") for i in range(20)])
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    finished = subprocess.run([sys.executable, "-c", child], timeout=120)
    assert finished.returncode == -signal.SIGKILL
    from tidemq_store import StoreConfig, open_store

    with open_store(StoreConfig(home=home)) as store:
        for queue in (0, 1):
            got = store.get("t", queue, 0, max_messages=1000, message_filter="T").messages
            assert [m.body for m in got] == [b"%d-%d" % (b, i) for b in range(queue, 50, 2) for i in range(20)]
        assert [m.body for m in store.messages_by_key("t", "k7")] == [b"7-%d" % i for i in range(20)]
