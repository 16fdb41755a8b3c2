"""Readers sharing one view of a queue's tier files (the read-ahead cache's fetch threads do) while compactions switch
the queue and delete what they replaced at once: every read returns the queue's bytes, however slowly the queue is
listed again. Before, each reader that met a deleted segment listed the queue again; with S3 slow to list, the
readers kept invalidating each other's reads and gave up with "the listing kept changing" (seen on LocalStack)."""

from __future__ import annotations

import random
import threading
import time
import uuid

from spark_emr.compaction import Plan, compact_queue
from spark_emr.tier import QueueRef
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig
from tidemq_store.serverless.cold import ColdTier
from tidemq_store.tiered import open_driver
from tidemq_store.tiered.manifest import load_manifest

READERS = 8
LIST_DELAY_S = 0.05


def test_readers_of_one_view_read_through_compactions_that_delete_at_once(aws_env, open_test_store, tmp_path):
    store = open_test_store(
        backend="serverless",
        efs_path=tmp_path / "efs",
        dynamodb_prefix=f"l{uuid.uuid4().hex[:8]}",
        tier="s3",
        tier_bucket=f"tier-{uuid.uuid4().hex[:12]}",
    )
    store.create_topic(TopicConfig(name="stream", queues=1))
    for batch in range(48):  # an upload per batch: a small segment of each kind each time
        store.put("stream", [Message(b"%d-%d " % (batch, i) + bytes(200)) for i in range(10)])
        store.maintenance().run()

    cold = ColdTier(store.config)
    view = cold.view("stream", 0)
    count = view.max_offset
    whole = view.run(0, count)
    expected = [whole.records[e.position : e.end] for e in whole.entries]
    # S3 listing slowly, as under load: a reader's listing again takes long enough for the others to read meanwhile
    cold.driver.client.meta.events.register("before-call.s3.ListObjectsV2", lambda **_: time.sleep(LIST_DELAY_S))
    cold.driver.client.meta.events.register("before-call.s3.GetObject", lambda **_: time.sleep(0.02))

    stop, errors, reads = threading.Event(), [], [0] * READERS

    def reader(index: int) -> None:
        rng = random.Random(index)
        try:
            while not stop.is_set():
                first = rng.randrange(count)
                run = view.run(first, min(count, first + rng.randrange(1, 60)))
                got = [
                    run.records[e.position - run.entries[0].position : e.end - run.entries[0].position]
                    for e in run.entries
                ]
                assert got == expected[first : first + len(got)], f"offsets from {first}"
                reads[index] += 1
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    for thread in threads:
        thread.start()
    compactor = open_driver(store.config)
    try:
        for target in (
            8192,
            16384,
            32768,
            65536,
            131072,
            262144,
        ):  # each merges the last one's segments: a switch, then deletion
            time.sleep(0.3)
            result = compact_queue(compactor, QueueRef("stream", 0), Plan(target_bytes=target, grace_s=0))
            assert result.switched and result.objects_deleted, result
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        cold.close()
    assert errors == []
    assert load_manifest(compactor, "stream/0").generation == 6
    assert all(reads), reads
