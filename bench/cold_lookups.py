"""Lookups by id and by key that reach the cold tier: S3 requests and time per lookup, before and after the
queue's index objects are merged (what the Spark compaction job does, run here in-process: `compact_queue`).

Prints one JSON line per result:
  {"bench": "cold_lookup", "kind": "id"|"unknown_id"|"key", "index_objects": N, "tables_cached": bool,
   "s3_requests_mean": ..., "s3_requests_max": ..., "ms_p50": ..., "ms_p99": ..., "latency_ms": ..., "topics": N}
  for --uploads uploads of --per-upload messages into one queue of an embedded store on S3 (a moto server over
  HTTP), between puts to --topics - 1 other topics, its hot segments removed, looked up --lookups times each way
  with nothing kept from earlier lookups (another process) and with what they kept (slot tables, the id directory's
  objects and names), with --latency-ms added to every S3 request. A lookup by id reads the tier's id directory
  first (tiered/directory.py), so its requests do not grow with --topics; "unknown_id" looks up ids that name a
  real record's place but another size (made up: no message has them).

    python bench/cold_lookups.py                   # 100 uploads x 200 messages, 50 topics, 5 ms per S3 request
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import tempfile
import time
import uuid
from pathlib import Path

from devtools.moto_server import LocalAws
from spark_emr.compaction import Plan, compact_queue
from spark_emr.tier import QueueRef
from tidemq_protocol.errors import MessageNotFound
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TopicConfig, open_store

TOPIC = "lookups"


def produce(store, uploads: int, per_upload: int, topics: int) -> list[tuple[str, str]]:
    """(id, key) of every message of TOPIC, each upload made on its own, with a put to one of `topics` - 1 other
    topics between them (uploaded too: the hot segments and the id directory's objects hold every topic)."""
    others = [f"other-{n}" for n in range(topics - 1)]
    for name in others:
        store.create_topic(TopicConfig(name=name, queues=1))
    made = []
    for upload in range(uploads):
        keys = [f"order-{upload}-{i}" for i in range(per_upload)]
        results = store.put(TOPIC, [Message(b"x" * 200, queue=0, keys=(key,)) for key in keys])
        made += [(result.msg_id, key) for result, key in zip(results, keys, strict=True)]
        store.upload_now(TOPIC)
        if others:
            other = others[upload % len(others)]
            store.put(other, [Message(b"y" * 200, queue=0, keys=(f"k{i}",)) for i in range(per_upload)])
            store.upload_now(other)
    store.clean_expired()
    return made


def measure(store, sample: list[tuple[str, str]], kind: str, cached: bool, sent: list[int], latency_ms: float) -> dict:
    counts, times = [], []
    for msg_id, key in sample:
        if not cached:
            store.lookup.forget()  # another process: nothing read before
        sent.clear()
        began = time.perf_counter()
        if kind == "unknown_id":  # the place of a real record, another size: no message has that id
            with contextlib.suppress(MessageNotFound):
                store.message_by_id(f"{msg_id[:16]}{int(msg_id[16:], 16) + 1:08x}")
                raise AssertionError("a made-up id was found")
        else:
            found = store.message_by_id(msg_id) if kind == "id" else store.messages_by_key(TOPIC, key)[0]
            assert found.msg_id == msg_id
        times.append((time.perf_counter() - began) * 1000)
        counts.append(len(sent))
    times.sort()
    objects = len(store.driver.objects(f"{TOPIC}/0/index/"))
    return {
        "bench": "cold_lookup",
        "kind": kind,
        "index_objects": objects,
        "tables_cached": cached,
        "s3_requests_mean": round(sum(counts) / len(counts), 2),
        "s3_requests_max": max(counts),
        "ms_p50": round(times[len(times) // 2], 2),
        "ms_p99": round(times[int(len(times) * 0.99)], 2),
        "latency_ms": latency_ms,
        "topics": len(store.list_topics(limit=1000)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--uploads", type=int, default=100)
    parser.add_argument("--per-upload", type=int, default=200)
    parser.add_argument("--lookups", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--topics", type=int, default=50, help="topics in the store (the looked-up one and others)")
    args = parser.parse_args()
    with LocalAws() as aws, tempfile.TemporaryDirectory() as home:
        os.environ.update(aws.env)
        config = StoreConfig(
            home=Path(home),
            tier="s3",
            tier_bucket=f"lookups-{uuid.uuid4().hex[:12]}",
            tier_upload_age_ms=3_600_000,
            hot_retention_ms=0,
            commitlog_segment_bytes=256 * 1024,
        )
        store = open_store(config)
        try:
            store.create_topic(TopicConfig(name=TOPIC, queues=1))
            made = produce(store, args.uploads, args.per_upload, args.topics)
            cold_min = store.tier_status(TOPIC)[0].hot_min_offset
            sample = random.Random(7).sample(made[: cold_min - 1], args.lookups)  # only the cold tier has them
            sent: list[int] = []
            store.driver.client.meta.events.register("before-send.s3", lambda **_: sent.append(1))
            store.driver.client.meta.events.register("before-send.s3", lambda **_: time.sleep(args.latency_ms / 1000))
            for merged in (False, True):
                if merged:
                    compact_queue(store.driver, QueueRef(TOPIC, 0), Plan(grace_s=0))
                    compact_queue(store.driver, QueueRef(TOPIC, 0), Plan(grace_s=0))  # deletes what is covered
                for kind in ("id", "unknown_id", "key"):
                    for cached in (False, True):
                        row = measure(store, sample, kind, cached, sent, args.latency_ms)
                        print(json.dumps(row), flush=True)
        finally:
            store.close()


if __name__ == "__main__":
    main()
