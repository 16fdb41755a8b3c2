"""The serverless backend: stateless writers in separate processes, one queue, a moto server over HTTP."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tidemq_store import StoreConfig, TopicConfig, open_store

from .serverless_producer import BATCH

PRODUCER = Path(__file__).with_name("serverless_producer.py")
PRODUCERS = 8
BATCHES = 100


def test_concurrent_producers_get_dense_unique_offsets_in_their_own_order(tmp_path, aws_env):
    efs, prefix = tmp_path / "efs", f"race{uuid.uuid4().hex[:8]}"
    config = StoreConfig(home=tmp_path, backend="serverless", efs_path=efs, dynamodb_prefix=prefix)
    store = open_store(config)
    store.create_topic(TopicConfig(name="race", queues=1))
    env = {**os.environ, **aws_env.env}
    producers = [
        subprocess.Popen([sys.executable, str(PRODUCER), str(efs), prefix, str(p), str(BATCHES)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in range(PRODUCERS)
    ]  # fmt: skip
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

    stored, offset = [], 0
    while True:
        result = store.get("race", 0, offset, max_messages=1000)
        stored += [(m.queue_offset, *map(int, m.body.decode().split(":"))) for m in result.messages]
        if result.next_offset >= result.max_offset:
            break
        offset = result.next_offset
    assert [o for o, _, _ in stored] == list(range(total))  # dense, from 0, each offset once
    assert {o: (who, seq) for o, who, seq in stored} == acknowledged  # every ack is where it was acknowledged
    for producer in range(PRODUCERS):  # each producer's messages in the order it sent them
        seqs = [seq for _, who, seq in stored if who == producer]
        assert seqs == sorted(seqs) == list(range(BATCHES * BATCH))
    print(f"DynamoDB requests per message: {requests / total:.4f}")
    store.close()


def test_producers_killed_at_any_point_of_the_protocol_leave_no_gap_and_no_duplicate(tmp_path, aws_env):
    efs, prefix = tmp_path / "efs", f"crash{uuid.uuid4().hex[:8]}"
    store = open_store(StoreConfig(home=tmp_path, backend="serverless", efs_path=efs, dynamodb_prefix=prefix))
    store.create_topic(TopicConfig(name="race", queues=1))
    env = {**os.environ, **aws_env.env}
    rng = random.Random(5)
    acknowledged: dict[int, tuple[int, int]] = {}
    for run in range(6):  # 3 producers at a time, killed at random moments (mid-append, mid-transaction, ...)
        producers = [
            subprocess.Popen([sys.executable, str(PRODUCER), str(efs), prefix, str(run * 10 + p), "1000"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for p in range(3)
        ]  # fmt: skip
        time.sleep(rng.uniform(1.5, 3.0))
        for producer in producers:
            producer.send_signal(signal.SIGKILL)
        for producer in producers:
            out, err = producer.communicate(timeout=60)
            assert producer.returncode == -signal.SIGKILL, err[-2000:]
            for line in out.split("\n")[:-1]:  # a line cut by the kill was not acknowledged
                offset, who, seq = map(int, line.split())
                acknowledged[offset] = (who, seq)
    assert len(acknowledged) > 1000

    stored, offset = [], 0
    while True:
        result = store.get("race", 0, offset, max_messages=1000)
        stored += [(m.queue_offset, tuple(map(int, m.body.decode().split(":")))) for m in result.messages]
        if result.next_offset >= result.max_offset:
            break
        offset = result.next_offset
    assert [o for o, _ in stored] == list(range(len(stored)))  # dense: no gap
    bodies = [body for _, body in stored]
    assert len(bodies) == len(set(bodies))  # no message twice
    by_offset = dict(stored)
    assert all(by_offset.get(o) == body for o, body in acknowledged.items())  # every ack where it was acked
    store.close()
