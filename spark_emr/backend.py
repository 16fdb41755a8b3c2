"""The serverless backend as a job sees it: its topics (DynamoDB) and its cold tier (S3), opened alike on the
driver and on each executor. The endpoint (`AWS_ENDPOINT_URL` on the driver) travels with the job, as in tier.py.
A job that reads no EFS file opens the store over a scratch directory; one that moves EFS data to S3 names the
shared directory (`efs_path`), mounted alike on the driver and the executors."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tidemq_store import StoreConfig, TopicConfig, open_store
from tidemq_store.serverless.maintenance import Maintenance
from tidemq_store.serverless.store import ServerlessMessageStore

from .tier import TierLocation


@dataclass(frozen=True, slots=True)
class Backend:
    """A serverless backend: its DynamoDB table prefix and its tier."""

    dynamodb_prefix: str
    tier: TierLocation
    efs_path: str | None = None

    @classmethod
    def here(cls, dynamodb_prefix: str, bucket: str, prefix: str, efs_path: str | None = None) -> Backend:
        return cls(dynamodb_prefix, TierLocation.here(bucket, prefix), efs_path)

    def open(self) -> ServerlessMessageStore:
        if self.tier.endpoint_url:
            os.environ["AWS_ENDPOINT_URL"] = self.tier.endpoint_url  # pynamodb reads it here
        scratch = Path(tempfile.mkdtemp(prefix="tidemq-job-"))
        config = StoreConfig(
            home=scratch,
            backend="serverless",
            efs_path=Path(self.efs_path) if self.efs_path else scratch / "efs",
            dynamodb_prefix=self.dynamodb_prefix,
            tier="s3",
            tier_bucket=self.tier.bucket,
            tier_prefix=self.tier.prefix,
        )
        return open_store(config)

    def per_queue(self, step: Callable[[Maintenance, tuple], object]) -> Callable[[Iterable[tuple]], Iterator]:
        """A partition function for `mapPartitions`: opens the backend once per partition and yields
        `step(maintenance, item)` for each of its items (a queue's work)."""
        backend = self

        def partition(items: Iterable[tuple]) -> Iterator:
            store = backend.open()
            try:
                maintenance = store.maintenance()
                for item in items:
                    yield step(maintenance, item)
            finally:
                store.close()

        return partition

    def topics(self, topic: str | None = None) -> list[TopicConfig]:
        """Every topic (or just `topic`), read once on the driver."""
        store = self.open()
        try:
            return [t for t in store.all_topics() if topic is None or t.name == topic]
        finally:
            store.close()


def backend_arguments(doc: str, now_help: str | None, dry_run_help: str) -> argparse.ArgumentParser:
    """The parser of a job over the serverless backend: where it is (`--dynamodb-prefix`, `--bucket`, `--prefix`),
    `--topic` (one topic only), `--now-ms` (with `now_help`: the job measures time) and `--dry-run`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dynamodb-prefix", required=True, help="the serverless backend's table prefix")
    parser.add_argument("--bucket", required=True, help="the tier's S3 bucket")
    parser.add_argument("--prefix", default="tidemq", help="the tier's key prefix (default tidemq)")
    parser.add_argument("--topic", default=None, help="only this topic")
    if now_help is not None:
        parser.add_argument("--now-ms", type=int, default=None, help=now_help)
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    return parser
