"""Retention of the serverless backend's cold tier, per queue, in parallel across topics and queues.

    spark-submit --master local[2] spark_emr/jobs/retention.py --dynamodb-prefix tidemq --bucket tidemq-tier

For every topic with a retention (none: it keeps everything), each queue's cold segments stored wholly before
now - retention are deleted and the queue's `min_offset` moves past its expired messages. Each queue is one
task running the maintenance run's own step (`Maintenance.expire_queue`) under the queue's lease, so a job never
writes a queue's tier while an upload does: that queue is skipped, counted in `queues_skipped`, and the next run
takes it (a run killed midway holds its queues until their lease expires, 15 minutes). Killed midway and run
again, it deletes what is left to delete: a segment goes only after the entries pointing into it.

Arguments: `--dynamodb-prefix` (TIDEMQ_DYNAMODB_PREFIX), `--bucket` / `--prefix` (the tier), `--topic` (one topic
only), `--now-ms` (the time retention is measured from; default now), `--dry-run` (list each queue's cutoff and
delete nothing). The last line on stdout is the job's summary as JSON.
"""

from __future__ import annotations

import argparse
import sys
import time

from spark_emr.backend import Backend, backend_arguments
from spark_emr.session import dry_run, run_job
from tidemq_protocol.clock import now_ms
from tidemq_store.serverless.maintenance import Maintenance


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = backend_arguments(
        __doc__, "measure retention from here (default now)", "list each queue's cutoff; delete nothing"
    )
    return parser.parse_args(argv)


def run(spark, args: argparse.Namespace) -> dict:
    """Apply retention as `args` say; return the summary."""
    began = time.monotonic()
    backend = Backend.here(args.dynamodb_prefix, args.bucket, args.prefix)
    now = now_ms() if args.now_ms is None else args.now_ms
    topics = backend.topics(args.topic)
    work = [
        (t.name, queue, now - t.retention_ms) for t in topics if t.retention_ms is not None for queue in range(t.queues)
    ]
    kept = sum(1 for t in topics if t.retention_ms is None)
    print(
        f"retention: {len(work)} queues of {len(topics) - kept} topics with a retention ({kept} keep everything)",
        file=sys.stderr,
        flush=True,
    )
    summary = {"job": "retention", "topics_in": len(topics), "queues_in": len(work), "now_ms": now}
    if args.dry_run:
        would = (f"expire {topic}:{queue} before {cutoff}" for topic, queue, cutoff in work)
        return dry_run("retention", would, summary, began)

    def expire(maintenance: Maintenance, item: tuple[str, int, int]) -> tuple:
        topic, queue, cutoff = item
        return topic, queue, maintenance.expire_queue(topic, queue, cutoff)

    partitions = max(1, min(len(work), 64))
    results = spark.sparkContext.parallelize(work, partitions).mapPartitions(backend.per_queue(expire)).collect()
    skipped = [f"{topic}:{queue}" for topic, queue, report in results if report is None]
    if skipped:
        print(f"retention: held by another run, left for the next: {', '.join(skipped)}", file=sys.stderr)
    done = [report for _, _, report in results if report is not None]
    return summary | {
        "queues_skipped": len(skipped),
        "segments_deleted": sum(report.segments_deleted for report in done),
        "messages_expired": sum(report.messages_expired for report in done),
        "seconds": round(time.monotonic() - began, 3),
    }


def main(argv: list[str] | None = None) -> None:
    run_job("retention", run, arguments(argv))


if __name__ == "__main__":
    main()
