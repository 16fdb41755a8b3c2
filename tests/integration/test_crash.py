"""Nothing acknowledged is lost, and a batch is stored whole or not at all (its messages spread over several
queues): a writer is killed with SIGKILL at random moments, again and again."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from tests.killed import killed_at_random
from tidemq_store import StoreConfig, open_store

from .crash_writer import QUEUES, batch_sizes, make_message

WRITER = Path(__file__).with_name("crash_writer.py")
KILLS = [12, pytest.param(48, marks=pytest.mark.long)]  # make test's, and make test-long's


def read_all(store) -> dict[tuple[int, int], object]:
    """Every message of the topic; none while no writer has lived long enough to create it (a kill in start-up)."""
    found = {}
    if "crash" not in {topic.name for topic in store.list_topics()}:
        return found
    for queue in range(QUEUES):
        offset = 0
        while True:
            result = store.get("crash", queue, offset, max_messages=5000)
            for message in result.messages:
                found[(queue, message.queue_offset)] = message
            if result.next_offset == offset:
                break
            offset = result.next_offset
    return found


@pytest.mark.parametrize("kills", KILLS)
def test_every_acknowledged_message_survives_repeated_sigkill(tmp_path, kills):
    home = tmp_path / "store"
    rng = random.Random(20261122)
    acknowledged: dict[tuple[int, int], tuple[int, int, int]] = {}
    kills_while_writing = 0
    for run in range(kills):
        # sometimes during start-up and recovery, mostly mid-write
        out, _ = killed_at_random([sys.executable, str(WRITER), str(home), str(run)], run, rng)
        lines = out.decode().split("\n")[:-1]  # a line cut by the kill has no newline: not acknowledged
        kills_while_writing += bool(lines)
        for line in lines:
            queue, offset, *origin = map(int, line.split())
            assert (queue, offset) not in acknowledged, f"offset {queue}:{offset} acknowledged twice"
            acknowledged[(queue, offset)] = tuple(origin)

        with open_store(StoreConfig(home=home, commitlog_segment_bytes=256 * 1024)) as store:
            stored = read_all(store)
        for queue in range(QUEUES):
            offsets = sorted(o for q, o in stored if q == queue)
            assert offsets == list(range(len(offsets))), f"queue {queue} has a gap after run {run}"
        for (queue, offset), (origin_run, thread, seq) in acknowledged.items():
            message = stored.get((queue, offset))
            assert message is not None, f"acknowledged {queue}:{offset} lost after kill {run}"
            expected = make_message(origin_run, thread, seq)
            assert (message.body, message.keys, message.tag, message.properties) == (
                expected.body,
                expected.keys,
                expected.tag,
                dict(expected.properties),
            )
    assert kills_while_writing >= kills // 2, "too few kills landed while messages were being written"
    assert len(acknowledged) > 40 * kills
    assert_batches_whole(stored)


def assert_batches_whole(stored: dict) -> None:
    """Every batch a writer thread put (they span queues) is in the store with all its messages, or with none."""
    present: dict[tuple[int, int], set[int]] = {}  # (run, thread) -> seqs stored
    for message in stored.values():
        run, thread, seq = map(int, message.body.split(b"-", 3)[:3])
        present.setdefault((run, thread), set()).add(seq)
    spanning = 0
    for (run, thread), seqs in present.items():
        seq = 0
        for size in batch_sizes(run, thread):
            if seq > max(seqs):
                break
            batch = set(range(seq, seq + size))
            assert batch <= seqs or not batch & seqs, f"batch {run}/{thread}@{seq} is partly stored"
            spanning += len({make_message(run, thread, s).queue for s in batch}) > 1
            seq += size
    assert spanning > 100  # the check saw batches that span queues
