"""The Spark-side library over the cold tier: where it is, which queues it holds, and their messages.

A `TierLocation` names a tier in S3 (bucket, prefix) and the endpoint to reach it (`AWS_ENDPOINT_URL` on the
driver: moto or LocalStack here, AWS itself when unset); it travels to the executors inside the job's closures,
so they reach the same tier whatever their environment. The layout and formats are the engine's: the queues are
listed by `tidemq_store.tiered.s3.S3Driver`, and a queue is read through `TieredQueue` (its ConsumeQueue, then its
records, each CRC-checked by `tidemq_protocol.record`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import boto3

from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import decode_run
from tidemq_store.aws import aws_region
from tidemq_store.tiered.container import TieredQueue
from tidemq_store.tiered.s3 import CLIENT_CONFIG, S3Driver

READ_ENTRIES = 4096
"""Offsets one read of a queue's ConsumeQueue covers (then one read of their records)."""


@dataclass(frozen=True, slots=True)
class TierLocation:
    """A tier in S3, and how to reach it."""

    bucket: str
    prefix: str
    endpoint_url: str | None
    region: str

    @classmethod
    def here(cls, bucket: str, prefix: str) -> TierLocation:
        """The tier at bucket/prefix, reached as this process reaches S3 (`AWS_ENDPOINT_URL`, region)."""
        return cls(bucket, prefix.strip("/"), os.environ.get("AWS_ENDPOINT_URL") or None, aws_region())

    def client(self):
        """A boto3 S3 client for this tier (the engine's client settings)."""
        return boto3.session.Session().client(
            "s3", region_name=self.region, endpoint_url=self.endpoint_url, config=CLIENT_CONFIG
        )

    def driver(self) -> S3Driver:
        return S3Driver(self.client(), self.bucket, self.prefix)

    def queue_prefix(self, ref: QueueRef) -> str:
        """The key prefix of every object of the queue's tier files (both kinds)."""
        return f"{self.prefix}/{ref.topic}/{ref.queue}/" if self.prefix else f"{ref.topic}/{ref.queue}/"

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" + (f" via {self.endpoint_url}" if self.endpoint_url else "")


@dataclass(frozen=True, slots=True)
class QueueRef:
    topic: str
    queue: int


def tier_queues(location: TierLocation, topic: str | None = None) -> list[QueueRef]:
    """Every queue the tier holds (of `topic` only, if given), in order."""
    return [QueueRef(t, q) for t, q in location.driver().queues() if topic is None or t == topic]


def queue_messages(
    location: TierLocation, ref: QueueRef, from_ms: int | None = None, to_ms: int | None = None
) -> Iterator[StoredMessage]:
    """The queue's messages in the tier, in offset order, each record CRC-checked; with `from_ms`/`to_ms`, only
    those stored in [from_ms, to_ms). Read-only: an upload under way is left alone."""
    tiered = TieredQueue(location.driver(), ref.topic, ref.queue, segment_bytes=1, writer=False)
    low, high = tiered.min_offset, tiered.max_offset
    if low is None or high is None:
        return
    if from_ms is not None:
        low = tiered.first_offset_stored_at(from_ms, low, high)
    end = high if to_ms is None else tiered.first_offset_stored_at(to_ms, low, high)
    offset = low
    while offset < end:
        run = tiered.run(offset, min(end, offset + READ_ENTRIES))
        yield from decode_run(run.records, ref.topic, ref.queue, offset)
        offset += len(run.entries)
