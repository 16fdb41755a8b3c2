"""Tiered storage (RocketMQ 5.1's design): every queue uploaded in quasi-real time to a cold tier.

segment.py     driver layer: FileSegment, POSIX and S3 drivers, the object layout
container.py   container layer: each queue's tier commit log and ConsumeQueue
dispatcher.py  upload: dispatch and commit offsets, triggers, retries
cache.py       the read-ahead cache for cold reads
store.py       access layer: TieredMessageStore, reads per tieredStorageLevel
"""

from __future__ import annotations

from ..config import StoreConfig, TierMedium
from .segment import PosixDriver, S3Driver, TierDriver
from .store import TieredMessageStore


def open_driver(config: StoreConfig) -> TierDriver:
    """The driver for `config.tier` (the S3 bucket is created if missing)."""
    if config.tier is TierMedium.POSIX:
        return PosixDriver(config.tier_directory)
    from .s3 import ensure_bucket, s3_client

    client = s3_client()
    ensure_bucket(client, config.tier_bucket)
    return S3Driver(client, config.tier_bucket, config.tier_prefix)


__all__ = ["PosixDriver", "S3Driver", "TierDriver", "TieredMessageStore", "open_driver"]
