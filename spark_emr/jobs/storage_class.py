"""Move old cold segments of the serverless backend's tier to a cheaper S3 storage class, per topic.

    spark-submit --master local[2] spark_emr/jobs/storage_class.py --dynamodb-prefix tidemq --bucket tidemq-tier

A topic opts in with two attributes (`tidemq topic create ... ` / `PATCH /v1/topics/{topic}`):

    tier.storage_class           STANDARD_IA or GLACIER_IR (both serve reads directly, as the tier needs)
    tier.storage_class_after_ms  how old a segment must be first (default 2592000000: 30 days)

Every segment object of such a topic's queues (commit log and ConsumeQueue) older than that and in another class is
copied onto itself in the new class: same key, same bytes, so a reader at any moment reads the same bytes from one
or the other, and a segment deleted meanwhile (retention) is skipped. One task per queue; a rerun finds nothing
left to move. `--topic` (one topic), `--now-ms` (measure age from another time), `--dry-run` (count what would
move). A topic whose attributes name no such class is reported and left alone. Small segments are not yet merged
on the way (that is segment compaction's part). The last line on stdout is the job's summary as JSON.
"""

from __future__ import annotations

import argparse
import sys
import time

from botocore.exceptions import ClientError

from spark_emr.backend import Backend, backend_arguments
from spark_emr.session import run_job
from spark_emr.tier import QueueRef
from tidemq_protocol.attributes import TopicPolicy
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import InvalidArgument


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = backend_arguments(
        __doc__, "measure segment age from here (default now)", "count what would move; move nothing"
    )
    return parser.parse_args(argv)


def policy(attributes: dict[str, str]) -> tuple[str, int] | str | None:
    """(storage class, age in ms) a topic's attributes ask for; None when they ask nothing; what is wrong with them
    otherwise (a topic created before the API checked them, or through the engine directly)."""
    try:
        wanted = TopicPolicy.of(attributes)
    except InvalidArgument as error:
        return str(error)
    if wanted.storage_class is None:
        return None
    return wanted.storage_class.value, wanted.storage_class_after_ms


def run(spark, args: argparse.Namespace) -> dict:
    """Move segments as `args` say; return the summary."""
    began = time.monotonic()
    backend = Backend.here(args.dynamodb_prefix, args.bucket, args.prefix)
    now = now_ms() if args.now_ms is None else args.now_ms
    work, refused = [], []
    for topic in backend.topics(args.topic):
        wanted = policy(topic.attributes)
        if isinstance(wanted, str):
            refused.append(topic.name)
            print(f"storage_class: topic {topic.name!r} left alone: {wanted}", file=sys.stderr, flush=True)
        elif wanted is not None:
            storage_class, after_ms = wanted
            work += [(QueueRef(topic.name, q), storage_class, (now - after_ms) / 1000) for q in range(topic.queues)]
    print(f"storage_class: {len(work)} queues to look at", file=sys.stderr, flush=True)
    location, dry_run = backend.tier, args.dry_run

    def move(items):
        client = location.client()
        for ref, storage_class, before_s in items:
            seen = moved = moved_bytes = 0
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=location.bucket, Prefix=location.queue_prefix(ref)
            ):
                for item in page.get("Contents", ()):
                    seen += 1
                    old = item["LastModified"].timestamp() < before_s
                    if not old or item.get("StorageClass", "STANDARD") == storage_class:
                        continue
                    if not dry_run:
                        try:
                            client.copy_object(
                                Bucket=location.bucket,
                                Key=item["Key"],
                                CopySource={"Bucket": location.bucket, "Key": item["Key"]},
                                StorageClass=storage_class,
                                MetadataDirective="COPY",
                            )
                        except ClientError as error:
                            if error.response.get("Error", {}).get("Code") not in ("NoSuchKey", "404"):
                                raise
                            continue  # deleted meanwhile (retention)
                    moved += 1
                    moved_bytes += item["Size"]
            yield seen, moved, moved_bytes

    results = spark.sparkContext.parallelize(work, max(1, min(len(work), 64))).mapPartitions(move).collect()
    return {
        "job": "storage_class",
        "tier": location.describe(),
        "queues_in": len(work),
        "topics_refused": refused,
        "objects_in": sum(r[0] for r in results),
        "objects_moved" if not dry_run else "objects_to_move": sum(r[1] for r in results),
        "bytes_moved" if not dry_run else "bytes_to_move": sum(r[2] for r in results),
        "dry_run": dry_run,
        "now_ms": now,
        "seconds": round(time.monotonic() - began, 3),
    }


def main(argv: list[str] | None = None) -> None:
    run_job("storage_class", run, arguments(argv))


if __name__ == "__main__":
    main()
