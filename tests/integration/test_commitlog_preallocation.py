"""Preallocated commit-log segments (TIDEMQ_COMMITLOG_PREALLOCATE_BYTES): zeros written ahead of the writer, a spare
next segment taken at a roll, a clean log that holds data alone, and recovery that stops at the zeros, cutting a
torn write into them so that puts continue where the last whole batch ended."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from tests.push_targets import wait_for
from tidemq_protocol.message import Message
from tidemq_protocol.record import PendingRecord, encode_batch, parse_message_id, record_size
from tidemq_store import StoreConfig, TopicConfig, open_store

SEGMENT = 256 * 1024
AHEAD = 64 * 1024
BODY = b"x" * 1000


def segment_files(home):
    return sorted(p for p in (home / "commitlog").iterdir() if p.name.isdigit())


def file_end(home) -> int:
    """The commit-log position where the last segment's file ends (its data, then any zeros)."""
    last = segment_files(home)[-1]
    return int(last.name) + last.stat().st_size


def put_batches(store, count: int) -> None:
    for _ in range(count):
        store.put("t", [Message(BODY) for _ in range(10)])


def test_zeros_are_written_ahead_of_the_writer_and_cut_off_by_a_clean_close(open_test_store, store_config):
    store = open_test_store(commitlog_segment_bytes=SEGMENT, commitlog_preallocate_bytes=AHEAD)
    home = store_config().home
    store.create_topic(TopicConfig(name="t", queues=1))
    put_batches(store, 1)
    written = store.commitlog.written_position
    wait_for(lambda: file_end(home) >= written + AHEAD, "zeros written ahead of the first put")
    last = segment_files(home)[-1]
    assert last.read_bytes()[written - int(last.name) :] == bytes(file_end(home) - written)
    store.close()
    assert file_end(home) == written


def test_a_roll_takes_the_spare_segment_readied_ahead(open_test_store, store_config):
    store = open_test_store(commitlog_segment_bytes=SEGMENT, commitlog_preallocate_bytes=AHEAD)
    home = store_config().home
    store.create_topic(TopicConfig(name="t", queues=1))
    spare = home / "commitlog" / "preallocated"
    while store.commitlog.written_position + 2 * 10 * 1100 < SEGMENT:  # fill the first segment but a batch or two
        put_batches(store, 1)
    wait_for(spare.exists, "the spare segment readied before the active one fills")
    wait_for(lambda: spare.stat().st_size == AHEAD, "the spare segment zero-filled")
    spare_inode = spare.stat().st_ino
    put_batches(store, 3)  # rolls
    first, second = segment_files(home)
    assert second.stat().st_ino == spare_inode
    assert not spare.exists()  # the next is readied only once this one is zero-filled to its end
    assert int(first.name) + first.stat().st_size == int(second.name)  # the sealed segment cut where its data ends
    assert file_end(home) >= store.commitlog.written_position
    store.close()
    assert not spare.exists()
    assert file_end(home) == store.commitlog.written_position
    with open_store(StoreConfig(home=home, commitlog_segment_bytes=SEGMENT)) as reopened:
        assert len(reopened.get("t", 0, 0, max_messages=10_000).messages) == reopened.queue_offsets("t")[0].max_offset


def test_with_preallocation_off_each_file_ends_where_its_data_does(open_test_store, store_config):
    store = open_test_store(commitlog_segment_bytes=SEGMENT, commitlog_preallocate_bytes=0)
    home = store_config().home
    store.create_topic(TopicConfig(name="t", queues=1))
    for _ in range(40):
        put_batches(store, 1)
        assert file_end(home) == store.commitlog.written_position
    assert len(segment_files(home)) > 1
    assert not (home / "commitlog" / "preallocated").exists()


def test_a_torn_write_into_the_preallocated_zeros_is_cut_and_puts_continue_there(tmp_path):
    """A killed writer leaves its active segment with zeros after its data; a torn put landed in them (whole
    records of a batch without its last, then half a record) is cut on reopening, and the next put goes there."""
    home = tmp_path / "store"
    child = textwrap.dedent(f"""
        import os, signal, sys, time
        from tidemq_store import Message, StoreConfig, TopicConfig, open_store
        store = open_store(StoreConfig(home={str(home)!r}, commitlog_segment_bytes={SEGMENT},
                                       commitlog_preallocate_bytes={AHEAD}))
        store.create_topic(TopicConfig(name="t", queues=1))
        for b in range(3):
            store.put("t", [Message(b"m%d-%d" % (b, i)) for i in range(5)])
        end = store.commitlog.written_position
        last = sorted(p for p in os.scandir({str(home / "commitlog")!r}) if p.name.isdigit())[-1]
        deadline = time.monotonic() + 60
        while int(last.name) + os.stat(last.path).st_size < end + {AHEAD // 2} and time.monotonic() < deadline:
            time.sleep(0.01)
        print(end, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    finished = subprocess.run([sys.executable, "-c", child], timeout=120, capture_output=True, text=True)
    assert finished.returncode == -signal.SIGKILL, finished.stderr
    end = int(finished.stdout)
    assert file_end(home) >= end + AHEAD // 2  # the crash left the zeros written ahead
    records = [PendingRecord(0, 15 + i, 0, b"", b"torn") for i in range(4)]
    sizes = [record_size(b"t", r.properties, r.body) for r in records]
    last = segment_files(home)[-1]
    with open(last, "r+b") as segment:
        segment.seek(end - int(last.name))
        segment.write(encode_batch(b"t", records, end, 0)[: sum(sizes[:3]) + 10])
    with open_store(StoreConfig(home=home, commitlog_segment_bytes=SEGMENT)) as store:
        assert store.commitlog.written_position == end
        got = store.get("t", 0, 0, max_messages=100).messages
        assert [m.body for m in got] == [b"m%d-%d" % (b, i) for b in range(3) for i in range(5)]
        after = store.put("t", [Message(b"after")])[0]
        assert after.queue_offset == 15
        assert parse_message_id(after.msg_id)[0] == end
        assert [m.body for m in store.get("t", 0, 15).messages] == [b"after"]
