"""The compaction job killed midway (SIGKILL of spark-submit's whole process group) at different stages, then run
again: every message is there once, in order, byte for byte; the key-compacted topic keeps exactly the newest
message per key; and nothing the manifests no longer list is left behind, nor an index object a merged one covers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tidemq_protocol.message import Message
from tidemq_protocol.record import decode_records
from tidemq_store import TopicConfig
from tidemq_store.serverless.cold import ColdTier
from tidemq_store.tiered.index import cover, index_prefix, parse_index_key
from tidemq_store.tiered.manifest import KINDS, load_manifest

from .processes import kill_at
from .test_compaction import tier_records

QUEUES = 3


@pytest.mark.long
def test_a_compaction_killed_several_times_then_run_again_loses_and_duplicates_nothing(serverless_backend):
    store, args = serverless_backend
    store.create_topic(TopicConfig(name="stream", queues=QUEUES))
    store.create_topic(TopicConfig(name="table", queues=1, attributes={"cleanup.policy": "COMPACTION"}))
    newest: dict[str, bytes] = {}
    for b in range(12):  # small objects: an upload per batch
        store.put("stream", [Message(b"s %d-%d " % (b, i) + bytes(300), queue=i % QUEUES) for i in range(30)])
        table = [(f"key-{(b * 7 + i) % 13}", b"t %d-%d" % (b, i)) for i in range(10)]
        store.put("table", [Message(body, keys=(key,), queue=0) for key, body in table])
        newest.update(table)
        store.maintenance().run()
    reader = ColdTier(store.config)
    before = {q: tier_records(reader, "stream", q) for q in range(QUEUES)}
    reader.close()

    command = [sys.executable, "-m", "spark_emr", "run", "compaction", *args, "--target-bytes", "8192"]
    command += ["--grace-s", "0"]
    stages = (("queues to look at", 0.0), ("queues to look at", 1.0), ("compaction: stream:", 0.0))
    for stage, after_s in stages:  # the listing, the tasks, between queues
        kill_at(command, stage, after_s)
    done = subprocess.run(command, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["queues_in"] == QUEUES + 1

    fresh = ColdTier(store.config)
    try:
        for queue in range(QUEUES):
            assert tier_records(fresh, "stream", queue) == before[queue]
        kept = decode_records(b"".join(tier_records(fresh, "table", 0)))
        assert sorted((m.keys[0], m.body) for m in kept) == sorted(newest.items())
        assert [m.queue_offset for m in kept] == sorted(m.queue_offset for m in kept)
        for topic, queues in (("stream", QUEUES), ("table", 1)):
            for queue in range(queues):
                manifest = load_manifest(fresh.driver, f"{topic}/{queue}")
                listed = {f"{topic}/{queue}/{kind}/{s.name}" for kind in KINDS for s in manifest.segments(kind)}
                found = {  # the index objects have their own (test_compaction's index test)
                    o.key
                    for o in fresh.driver.objects(f"{topic}/{queue}/")
                    if "/manifest/" not in o.key and "/index/" not in o.key
                }
                assert found == listed  # what a killed run wrote and lost the switch for is gone too
                objects = fresh.driver.objects(index_prefix(f"{topic}/{queue}"))
                indexes = [item for item in map(parse_index_key, objects) if item is not None]
                assert indexes, f"{topic}/{queue} has no index objects"
                # with --grace-s 0 the last run deleted what a merged object (maybe a killed run's) covers
                assert sorted(i.key for i in cover(indexes)) == sorted(i.key for i in indexes)
    finally:
        fresh.close()
