"""Compact the serverless backend's cold tier, one Spark task per queue: merge small segments, and key-compact
the topics that ask for it.

    spark-submit --master local[2] spark_emr/jobs/compaction.py --dynamodb-prefix tidemq --bucket tidemq-tier

Every queue of every topic (or of `--topic`) is compacted (spark_emr/compaction.py):

    segment compaction   runs of small segments (one per upload, of each kind) become segments of about
                         `--target-bytes` (default 134217728: 128 MiB), byte for byte, every record CRC-checked
    key compaction       for a topic with the attribute cleanup.policy=COMPACTION: only the newest message of
                         each key (its first key) stays, a message without a key stays, and a tombstone (an empty
                         body) goes with everything before it once older than compaction.tombstone_grace_ms
                         (a topic attribute; default 86400000, a day); offsets stay, a read at a removed offset
                         returns the next message that stayed
    index compaction     each queue's index objects (one per upload) merged into objects of about a 16th of
                         `--target-bytes`, so lookups by id and key read few (tidemq_store.tiered.lookup)

Readers switch to the new segments atomically (a new manifest generation); what they replace is deleted once the
switch is `--grace-s` old (default 600), by this run or the next. Uploads go on meanwhile. Killed and run again,
the job finds each queue either switched or not and carries on. `--now-ms` measures tombstone age from another
time; `--dry-run` reports what would be written and removed. The last line on stdout is the summary as JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, replace

from spark_emr.backend import Backend, backend_arguments
from spark_emr.compaction import (
    DEFAULT_GRACE_S,
    DEFAULT_TARGET_BYTES,
    Plan,
    compact_queue,
    tier_driver,
)
from spark_emr.session import dry_run, run_job
from spark_emr.tier import QueueRef
from tidemq_protocol.attributes import CleanupPolicy, TopicPolicy
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import InvalidArgument

COUNTS = (
    "objects_in",
    "bytes_in",
    "records_in",
    "objects_out",
    "bytes_out",
    "records_out",
    "records_removed",
    "index_objects_in",
    "index_objects_out",
)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = backend_arguments(
        __doc__, "measure tombstone age from here (default now)", "report what would be written; change nothing"
    )
    parser.add_argument("--target-bytes", type=int, default=DEFAULT_TARGET_BYTES, help="segment size to make")
    parser.add_argument(
        "--grace-s", type=float, default=DEFAULT_GRACE_S, help="how long replaced objects stay for readers"
    )
    args = parser.parse_args(argv)
    if args.target_bytes < 1024:
        parser.error(f"--target-bytes must be at least 1024, got {args.target_bytes}")
    if args.grace_s < 0:
        parser.error(f"--grace-s must not be negative, got {args.grace_s}")
    return args


def topic_plan(attributes: dict[str, str], base: Plan) -> Plan | str:
    """The plan a topic's attributes ask for, or what is wrong with them (a topic whose attributes were stored
    unchecked: before the API checked them, or through the engine directly)."""
    try:
        policy = TopicPolicy.of(attributes)
    except InvalidArgument as error:
        return str(error)
    compacted = policy.cleanup is CleanupPolicy.COMPACTION
    return replace(base, key_compaction=compacted, tombstone_grace_ms=policy.tombstone_grace_ms)


def run(spark, args: argparse.Namespace) -> dict:
    """Compact as `args` say; return the summary."""
    began = time.monotonic()
    backend = Backend.here(args.dynamodb_prefix, args.bucket, args.prefix)
    base = Plan(
        target_bytes=args.target_bytes,
        now_ms=now_ms() if args.now_ms is None else args.now_ms,
        grace_s=args.grace_s,
        dry_run=args.dry_run,
    )
    work, refused = [], []
    for topic in backend.topics(args.topic):
        plan = topic_plan(topic.attributes, base)
        if isinstance(plan, str):
            refused.append(topic.name)
            print(f"compaction: topic {topic.name!r} left alone: {plan}", file=sys.stderr, flush=True)
        else:
            work += [(QueueRef(topic.name, queue), plan) for queue in range(topic.queues)]
    print(f"compaction: {len(work)} queues to look at in {backend.tier.describe()}", file=sys.stderr, flush=True)
    location = backend.tier

    def compact(items):
        driver = tier_driver(location)  # one S3 client per Python worker, kept for its next tasks
        for ref, plan in items:
            done = compact_queue(driver, ref, plan)
            what = "key" if plan.key_compaction else "segment"
            print(
                f"compaction: {ref.topic}:{ref.queue} {what}: {done.objects_in} objects -> {done.objects_out}, "
                f"{done.records_removed} records removed, switched={done.switched}, "
                f"index objects {done.index_objects_in} -> {done.index_objects_out}, "
                f"{done.objects_deleted} replaced objects deleted {done.note}",
                file=sys.stderr,
                flush=True,
            )
            yield asdict(done)

    results = spark.sparkContext.parallelize(work, max(1, min(len(work), 64))).mapPartitions(compact).collect()
    summary = {
        "job": "compaction",
        "tier": location.describe(),
        "queues_in": len(work),
        "topics_refused": refused,
        **{name: sum(r[name] for r in results) for name in COUNTS},
        "queues_switched": sum(r["switched"] for r in results),
        "objects_deleted": sum(r["objects_deleted"] for r in results),
        "now_ms": base.now_ms,
    }
    if args.dry_run:
        return dry_run(
            "compaction", [f"compact {r['topic']}:{r['queue']}" for r in results if r["objects_out"]], summary, began
        )
    return summary | {"dry_run": False, "seconds": round(time.monotonic() - began, 3)}


def main(argv: list[str] | None = None) -> None:
    run_job("compaction", run, arguments(argv))


if __name__ == "__main__":
    main()
