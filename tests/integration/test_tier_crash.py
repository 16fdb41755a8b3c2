"""Killed mid-upload, again and again: every acknowledged message ends up in the S3 tier exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.killed import output_after_kill
from tidemq_protocol.record import decode_records
from tidemq_store import StoreConfig, open_store

from .crash_writer import QUEUES, make_message

WRITER = Path(__file__).with_name("crash_writer.py")
KILLS = 20


@pytest.mark.long
def test_every_acknowledged_message_is_in_the_tier_exactly_once_after_repeated_sigkill(tmp_path, aws_env):
    local_aws = aws_env
    home = tmp_path / "store"
    tier = {
        "TIDEMQ_TIER": "s3",
        "TIDEMQ_TIER_BUCKET": "crash-tier",
        "TIDEMQ_TIER_UPLOAD_AGE_MS": "20",  # upload all the time: kills land mid-upload
        "TIDEMQ_TIER_UPLOAD_MESSAGES": "40",
    }
    env = {**os.environ, **local_aws.env, **tier}
    rng = random.Random(1122)
    acknowledged: dict[tuple[int, int], tuple[int, int, int]] = {}
    tier_ends = []
    for run in range(KILLS):
        writer = subprocess.Popen(
            [sys.executable, str(WRITER), str(home), str(run)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        first = writer.stdout.readline()  # it is writing (a busy machine can take a second to start it)
        time.sleep(rng.uniform(0.5, 1.5))
        writer.send_signal(signal.SIGKILL)
        out, err = output_after_kill(writer)
        out = first + out
        assert writer.returncode == -signal.SIGKILL, err.decode()[-2000:]
        for line in out.decode().split("\n")[:-1]:  # a line cut by the kill was not acknowledged
            queue, offset, *origin = map(int, line.split())
            acknowledged[(queue, offset)] = tuple(origin)
        if run % 5 == 4:
            tier_ends.append(uploaded_so_far(home, env))
    assert len(acknowledged) > 1000
    assert tier_ends == sorted(tier_ends) and tier_ends[0] > 0, tier_ends  # uploads ran between the kills

    config = StoreConfig(home=home, tier="s3", tier_bucket="crash-tier", commitlog_segment_bytes=256 * 1024)
    with open_store(config) as store:
        store.upload_now()
        for queue in range(QUEUES):
            check_queue(store, queue, acknowledged)


def uploaded_so_far(home: Path, env: dict[str, str]) -> int:
    """Messages in the tier over all queues, as a restarted store sees them (in a child: the store is one
    process's at a time, and this one must not keep it)."""
    script = (
        "from tidemq_store import StoreConfig, open_store\n"
        f"store = open_store(StoreConfig(home={str(home)!r}, tier_upload_age_ms=3600000))\n"
        "print(sum(s.cold_max_offset or 0 for s in store.tier_status('crash')))\n"
        "store.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout)


def check_queue(store, queue: int, acknowledged: dict[tuple[int, int], tuple[int, int, int]]) -> None:
    """The tier's copy of the queue: every offset once, in order, byte for byte the hot record."""
    tiered = store.dispatcher.tiered_queue("crash", queue)
    hot_max = store.hot.queue_offsets("crash")[queue].max_offset
    assert (tiered.min_offset, tiered.max_offset) == (0, hot_max)
    entries = tiered.entries(0, hot_max)
    log_bytes = tiered.read(0, tiered.commitlog.end)  # the whole tier commit log, orphans included
    records = decode_records(log_bytes)
    assert [m.queue_offset for m in records] == list(range(hot_max)), "a message missing or stored twice"
    positions = [0]
    for _, size, _, _ in entries[:-1]:
        positions.append(positions[-1] + size)
    assert [position for position, *_ in entries] == positions  # regenerated: back to back in the queue's log
    hot_parts, offset = [], 0
    while offset < hot_max:
        batch = store.hot.read_records("crash", queue, offset, max_messages=5000, max_bytes=2**30)
        hot_parts.append(batch.records)
        offset = batch.next_offset
    assert log_bytes == b"".join(hot_parts)  # the hot records, byte for byte
    by_offset = {m.queue_offset: m for m in records}
    for (q, offset), (run, thread, seq) in acknowledged.items():
        if q != queue:
            continue
        message, expected = by_offset[offset], make_message(run, thread, seq)
        assert (message.body, message.keys, message.tag, message.properties) == (
            expected.body,
            expected.keys,
            expected.tag,
            dict(expected.properties),
        )
