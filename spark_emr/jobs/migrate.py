"""Move the serverless backend's hot data (EFS) to the cold tier (S3) in bulk, queue by queue in parallel.

    spark-submit --master local[2] spark_emr/jobs/migrate.py --dynamodb-prefix tidemq --bucket tidemq-tier \\
        --efs-path /mnt/efs/tidemq

For a backlog the scheduled maintenance run has not moved (a newly tiered topic, a region of many queues): every
queue with messages not uploaded yet (`--topic`: every queue of that topic) is one task running the maintenance
run's own upload step (`Maintenance.upload_queue`) under the queue's lease, so a queue is never written by two
uploaders, whether the other is this job or the scheduled run (a queue held by another is left to it: counted in
`left_work`). Producers go on writing meanwhile. At the end the driver deletes the EFS segment files nothing refers
to any more (the maintenance run's step 2). The executors need the shared directory mounted where the driver has
it. `--dry-run` lists the queues and moves nothing. The last line on stdout is the job's summary as JSON.
"""

from __future__ import annotations

import argparse
import sys
import time

from spark_emr.backend import Backend, backend_arguments
from spark_emr.session import dry_run, run_job
from tidemq_store.serverless.maintenance import Maintenance, RunReport


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = backend_arguments(__doc__, None, "list the queues; move nothing")
    parser.add_argument("--efs-path", required=True, help="the shared directory (TIDEMQ_EFS_PATH)")
    return parser.parse_args(argv)


def run(spark, args: argparse.Namespace) -> dict:
    """Migrate as `args` say; return the summary."""
    began = time.monotonic()
    backend = Backend.here(args.dynamodb_prefix, args.bucket, args.prefix, args.efs_path)
    store = backend.open()
    try:
        maintenance = store.maintenance()
        if args.topic is None:
            queues = maintenance.dirty_queues()
        else:
            queues = [(args.topic, queue) for queue in range(store.get_topic(args.topic).queues)]
    finally:
        store.close()
    print(f"migrate: {len(queues)} queues to move to {backend.tier.describe()}", file=sys.stderr, flush=True)
    summary = {"job": "migrate", "tier": backend.tier.describe(), "queues_in": len(queues)}
    if args.dry_run:
        return dry_run("migrate", (f"move {topic}:{queue}" for topic, queue in queues), summary, began)

    def upload(maintenance: Maintenance, item: tuple[str, int]) -> tuple:
        report = RunReport()
        maintenance.upload_queue(*item, report)
        return report.queues, report.messages, report.left_work, report.failed, report.touched_files

    partitions = max(1, min(len(queues), 64))
    results = spark.sparkContext.parallelize(queues, partitions).mapPartitions(backend.per_queue(upload)).collect()
    touched = set().union(*(r[4] for r in results)) if results else set()
    failed = [key for r in results for key in r[3]]
    store = backend.open()
    try:
        files_deleted = 0 if failed else store.maintenance().delete_unreferenced_files(touched)[0]
    finally:
        store.close()
    return summary | {
        "queues_moved": sum(r[0] for r in results),
        "records_out": sum(r[1] for r in results),
        "left_work": any(r[2] for r in results),
        "failed": failed,
        "efs_files_deleted": files_deleted,
        "seconds": round(time.monotonic() - began, 3),
    }


def main(argv: list[str] | None = None) -> None:
    run_job("migrate", run, arguments(argv))


if __name__ == "__main__":
    main()
