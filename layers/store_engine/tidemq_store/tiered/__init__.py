"""Tiered storage (RocketMQ 5.1's design): every queue uploaded in quasi-real time to a cold tier.

segment.py     driver layer: FileSegment and TierDriver, the object layout
posix.py       the POSIX driver (a directory or an EFS mount)
s3.py          the S3 driver and its client (imported only by a tier on S3)
container.py   container layer: each queue's tier commit log and ConsumeQueue
index.py       container layer: each queue's IndexFile (ids and keys), its format
directory.py   the id directory: the queue of each record of a deleted hot file, by its place
lookup.py      lookups by id and key through the index
dispatcher.py  upload: dispatch and commit offsets, triggers, retries
cache.py       the read-ahead cache for cold reads
store.py       access layer: TieredMessageStore, reads per tieredStorageLevel
"""

from __future__ import annotations

from ..config import StoreConfig, TierMedium
from .posix import PosixDriver
from .segment import TierDriver
from .store import TieredMessageStore


def open_driver(config: StoreConfig) -> TierDriver:
    """The driver for `config.tier` (the S3 bucket is created if missing)."""
    if config.tier is TierMedium.POSIX:
        return PosixDriver(config.tier_directory)
    from .s3 import S3Driver, ensure_bucket, s3_client  # here: only a tier on S3 loads boto3

    client = s3_client()
    ensure_bucket(client, config.tier_bucket)
    return S3Driver(client, config.tier_bucket, config.tier_prefix)


__all__ = ["PosixDriver", "TierDriver", "TieredMessageStore", "open_driver"]
