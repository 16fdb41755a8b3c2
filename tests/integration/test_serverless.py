"""The serverless backend: stateless writers in separate processes racing for the same queues, a moto server
over HTTP."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.killed import output_after_kill
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TopicConfig, open_store

from .serverless_producer import BATCH

PRODUCER = Path(__file__).with_name("serverless_producer.py")
PRODUCERS = 8
BATCHES = 1000
SPREAD = 3  # queues a spread batch goes to


@pytest.mark.long
def test_concurrent_producers_get_dense_unique_offsets_in_their_own_order(tmp_path, aws_env):
    efs, prefix = tmp_path / "efs", f"race{uuid.uuid4().hex[:8]}"
    config = StoreConfig(home=tmp_path, backend="serverless", efs_path=efs, dynamodb_prefix=prefix)
    store = open_store(config)
    store.create_topic(TopicConfig(name="race", queues=1))
    env = {**os.environ, **aws_env.env}
    producers = [
        subprocess.Popen(
            [sys.executable, str(PRODUCER), str(efs), prefix, str(p), str(BATCHES)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PRODUCERS)
    ]
    live = LiveReader(store)  # reads while they write: it must never find a hole, nor see anything move
    live.start()
    acknowledged, requests = {}, 0
    for producer in producers:  # all of them run at once; collect each one's acks
        out, err = producer.communicate(timeout=900)
        assert producer.returncode == 0, err[-2000:]
        for line in out.splitlines():
            if line.startswith("requests"):
                requests += int(line.split()[1])
                continue
            offset, who, seq = map(int, line.split())
            assert offset not in acknowledged, f"offset {offset} acknowledged twice"
            acknowledged[offset] = (who, seq)
    total = PRODUCERS * BATCHES * BATCH
    assert len(acknowledged) == total

    live.stop.set()
    live.join()
    assert live.error is None, live.error
    stored = [(offset, *body) for offset, body in read_queue(store)]
    assert [o for o, _, _ in stored] == list(range(total))  # dense, from 0, each offset once
    assert live.seen and all(stored[o][1:] == body for o, body in live.seen.items())  # what it saw stayed
    assert {o: (who, seq) for o, who, seq in stored} == acknowledged  # every ack is where it was acknowledged
    for producer in range(PRODUCERS):  # each producer's messages in the order it sent them
        seqs = [seq for _, who, seq in stored if who == producer]
        assert seqs == sorted(seqs) == list(range(BATCHES * BATCH))
    print(f"DynamoDB requests per message: {requests / total:.4f}")
    assert requests / total <= 0.05  # a count, not a timing: 1.125 requests a batch of 100 by the protocol
    store.close()


@pytest.mark.parametrize("rounds", [3, pytest.param(12, marks=pytest.mark.long)])  # make test's, make test-long's
def test_producers_killed_at_any_point_of_the_protocol_leave_no_gap_and_no_duplicate(tmp_path, aws_env, rounds):
    efs, prefix = tmp_path / "efs", f"crash{uuid.uuid4().hex[:8]}"
    store = open_store(StoreConfig(home=tmp_path, backend="serverless", efs_path=efs, dynamodb_prefix=prefix))
    store.create_topic(TopicConfig(name="race", queues=1))
    env = {**os.environ, **aws_env.env}
    rng = random.Random(5)
    acknowledged: dict[int, tuple[int, int]] = {}
    for run in range(rounds):  # 3 producers at a time, killed at random moments (mid-append, mid-sequencing, ...)
        for line in lines_until_killed(efs, prefix, [run * 10 + p for p in range(3)], env, rng):
            offset, who, seq = map(int, line.split())
            acknowledged[offset] = (who, seq)
    assert len(acknowledged) > 150 * rounds

    stored = read_queue(store)
    assert [o for o, _ in stored] == list(range(len(stored)))  # dense: no gap
    bodies = [body for _, body in stored]
    assert len(bodies) == len(set(bodies))  # no message twice
    by_offset = dict(stored)
    assert all(by_offset.get(o) == body for o, body in acknowledged.items())  # every ack where it was acked

    # What the killed writers left unsequenced is dropped by maintenance; everything sequenced moves to S3.
    cold = open_store(
        StoreConfig(
            home=tmp_path,
            backend="serverless",
            efs_path=efs,
            dynamodb_prefix=prefix,
            tier="s3",
            tier_bucket=f"crash-{prefix}",
            efs_segment_grace_s=0.5,
        )
    )
    time.sleep(0.6)
    cold.maintenance().run()
    cold.maintenance().run()  # the first spares files whose entries it indexed itself
    assert sorted(cold.segments.iterdir()) == []
    assert read_queue(cold) == stored
    cold.close()
    store.close()


def test_a_batch_over_several_queues_is_in_all_of_them_or_in_none_whenever_its_producer_dies(tmp_path, aws_env):
    efs, prefix = tmp_path / "efs", f"spread{uuid.uuid4().hex[:8]}"
    store = open_store(StoreConfig(home=tmp_path, backend="serverless", efs_path=efs, dynamodb_prefix=prefix))
    store.create_topic(TopicConfig(name="spread", queues=SPREAD))
    env = {**os.environ, **aws_env.env}
    rng = random.Random(31)
    acknowledged: dict[tuple[int, int], tuple[int, int]] = {}
    for run in range(4):  # 3 producers at a time racing for the same queues, killed at random moments
        for line in lines_until_killed(efs, prefix, [run * 10 + p for p in range(3)], env, rng, "spread", SPREAD):
            queue, offset, who, seq = map(int, line.split())
            acknowledged[(queue, offset)] = (who, seq)
    assert len(acknowledged) > 300

    stored: dict[tuple[int, int], tuple[int, int]] = {}
    for queue in range(SPREAD):
        messages = read_queue(store, "spread", queue)
        assert [o for o, _ in messages] == list(range(len(messages)))  # dense: no gap
        stored.update(((queue, offset), origin) for offset, origin in messages)
    assert len(set(stored.values())) == len(stored)  # no message twice
    assert all(stored.get(at) == origin for at, origin in acknowledged.items())  # every ack where it was acked
    batches: dict[tuple[int, int], set[int]] = {}  # (producer, batch) -> the queues its messages are in
    for (queue, _), (who, seq) in stored.items():
        batches.setdefault((who, seq // BATCH), set()).add(queue)
    torn = {batch: queues for batch, queues in batches.items() if len(queues) != SPREAD}
    assert torn == {}
    counts = {batch: 0 for batch in batches}
    for who, seq in stored.values():
        counts[(who, seq // BATCH)] += 1
    assert set(counts.values()) == {BATCH}  # and every message of each
    store.close()


def lines_until_killed(efs, prefix: str, producers: list[int], env, rng: random.Random, *spread) -> list[str]:
    """Run one producer process per number (serverless_producer.py; `spread`: topic and queue count), wait until
    they are under way (however slowly the machine starts them), SIGKILL them all at a random moment; return the
    lines they printed, one per acknowledged message (a line the kill cut short was no acknowledgement)."""
    processes = [
        subprocess.Popen(
            [sys.executable, str(PRODUCER), str(efs), prefix, str(number), "1000", *map(str, spread)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for number in producers
    ]
    first = processes[0].stdout.readline()
    time.sleep(rng.uniform(0.2, 2.0))
    for process in processes:
        process.send_signal(signal.SIGKILL)
    lines = []
    for index, process in enumerate(processes):
        out, err = output_after_kill(process)
        assert process.returncode == -signal.SIGKILL, err[-2000:]
        lines += ((first if index == 0 else "") + out).split("\n")[:-1]
    return lines


class LiveReader(threading.Thread):
    """A consumer reading queue 0 of `race` as it grows: each read must return consecutive offsets from where
    it asked (a hole would show as a skipped offset), and `seen` keeps what it got to compare at the end."""

    def __init__(self, store) -> None:
        super().__init__(daemon=True)
        self.store, self.stop, self.error = store, threading.Event(), None
        self.seen: dict[int, tuple[int, int]] = {}

    def run(self) -> None:
        offset = 0
        while not self.stop.is_set():
            result = self.store.get("race", 0, offset, max_messages=1000)
            offsets = [m.queue_offset for m in result.messages]
            if offsets != list(range(offset, result.next_offset)) or result.next_offset > result.max_offset:
                self.error = (
                    f"read at {offset} returned offsets {offsets[:3]}..{offsets[-3:]}, next {result.next_offset}"
                )
                return
            self.seen.update((m.queue_offset, tuple(map(int, m.body.decode().split(":")))) for m in result.messages)
            offset = result.next_offset
            if len(offsets) < 1000:  # caught up: let the writers get ahead (each read is a request to moto)
                time.sleep(0.05)


def read_queue(store, topic: str = "race", queue: int = 0) -> list[tuple[int, tuple[int, int]]]:
    """(offset, (producer, seq)) of every message of the queue, read as a consumer reads."""
    stored, offset = [], 0
    while True:  # big reads: moto answers each Query by walking the whole table (DynamoDB reads only the page)
        result = store.get(topic, queue, offset, max_messages=10_000)
        stored += [(m.queue_offset, tuple(map(int, m.body.decode().split(":")))) for m in result.messages]
        if result.next_offset >= result.max_offset:
            return stored
        offset = result.next_offset


def test_a_key_lookup_racing_the_indexer_finds_each_message_once(tmp_path, aws_env, monkeypatch):
    """The indexer moves a batch from the queue's pending entries into a batch item between the lookup's read of
    the queue and its Query of the items: the batch is in both, and is found once."""
    prefix = f"keys{uuid.uuid4().hex[:8]}"
    store = open_store(
        StoreConfig(home=tmp_path, backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=prefix)
    )
    store.create_topic(TopicConfig(name="orders", queues=1))
    store.put("orders", [Message(b"first", keys=("k",)), Message(b"second", keys=("k",))])
    read_state = store.index.state

    def state_then_indexed(topic: str, queue: int):
        seen = read_state(topic, queue)
        store.index.index(topic, queue, seen.indexed, [ref.entry() for ref in seen.pending])  # the indexer, now
        assert read_state(topic, queue).indexed > seen.indexed  # it did move the batch
        return seen

    monkeypatch.setattr(store.index, "state", state_then_indexed)
    assert [m.body for m in store.messages_by_key("orders", "k")] == [b"first", b"second"]
    store.close()
