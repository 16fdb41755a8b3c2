"""The store engine's settings, read from `TIDEMQ_*` environment variables with the defaults below.

`shared.settings.Settings` extends this model with the process-level settings (port, backend), so a
process has exactly one settings object; tests build a `StoreConfig` directly.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tidemq_protocol.timer import DEFAULT_MAX_DELAY_MS, MAX_DELAY_MS

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


class FlushDiskType(StrEnum):
    """RocketMQ's flushDiskType. `SYNC` acknowledges a put only after fsync (group commit shares one
    fsync among concurrent puts); `ASYNC` acknowledges after write() and fsyncs every flush interval."""

    SYNC = "SYNC"
    ASYNC = "ASYNC"


class Backend(StrEnum):
    """Which `MessageStore` serves: the embedded engine, or the serverless one (EFS files + DynamoDB)."""

    EMBEDDED = "embedded"
    SERVERLESS = "serverless"


class TierMedium(StrEnum):
    """Where the cold tier lives: nowhere (`off`), a directory (`posix`: local disk or an EFS mount), or S3."""

    OFF = "off"
    POSIX = "posix"
    S3 = "s3"


class TieredStorageLevel(StrEnum):
    """RocketMQ's tieredStorageLevel: when a read is served from the cold tier.

    `DISABLE` never; `NOT_IN_DISK` when the hot tier no longer holds the offset; `NOT_IN_MEM` also when
    the message is further than `tier_in_memory_bytes` from the end of the hot commit log (likely out of
    the page cache); `FORCE` whenever the tier holds it. Every level falls back to the hot tier for what
    the tier does not hold yet.
    """

    DISABLE = "DISABLE"
    NOT_IN_DISK = "NOT_IN_DISK"
    NOT_IN_MEM = "NOT_IN_MEM"
    FORCE = "FORCE"


class StoreConfig(BaseSettings):
    """Everything that bounds or places the embedded store engine."""

    model_config = SettingsConfigDict(env_prefix="TIDEMQ_", extra="ignore")

    backend: Backend = Field(default=Backend.EMBEDDED, description="embedded or serverless.")
    home: Path = Field(default=Path(".tidemq"), description="Directory holding all store data.")
    flush_disk_type: FlushDiskType = Field(default=FlushDiskType.SYNC)
    flush_interval_ms: int = Field(default=500, ge=1, description="ASYNC: how often the commit log is fsync'd.")
    commitlog_segment_bytes: int = Field(default=GIB, ge=64 * KIB, description="Commit-log segment file size.")
    commitlog_preallocate_bytes: int = Field(
        default=8 * MIB,
        ge=0,
        description="Zeros kept written ahead of the commit-log writer, so an append's fdatasync persists data alone "
        "(0: off; the files grow with each append).",
    )
    disk_reserve_bytes: int = Field(
        default=128 * MIB,
        ge=0,
        description="Room kept free on the disk under the commit log: a put that would leave less is refused (a 503, "
        "taken again once there is room), so that the indexes, offsets and acks written beside it never find the "
        "disk full (RocketMQ's diskMaxUsedSpaceRatio; 0: no reserve).",
    )
    max_message_bytes: int = Field(default=4 * MIB, ge=KIB, description="Largest body + properties of one message.")
    max_batch_messages: int = Field(default=1000, ge=1, description="Most messages in one put.")
    max_batch_bytes: int = Field(default=8 * MIB, ge=KIB, description="Largest encoded batch in one put.")
    max_get_messages: int = Field(default=10_000, ge=1, description="Most messages one get may ask for.")
    max_page_bytes: int = Field(
        default=MIB,
        ge=64 * KIB,
        description="Most bytes of configs in one page of topics or groups (a page holds at least one).",
    )
    checkpoint_interval_s: float = Field(
        default=5.0, gt=0, description="How often ConsumeQueue memtables are flushed and the replay checkpoint moved."
    )
    clean_interval_s: float = Field(default=60.0, gt=0, description="How often expired messages are cleaned.")
    metadata_sync: bool = Field(
        default=False,
        description="fsync the metadata WAL on every change (survives power loss; a process crash never loses it).",
    )
    tier: TierMedium = Field(default=TierMedium.OFF, description="Cold tier medium: off, posix or s3.")
    tier_path: Path | None = Field(default=None, description="posix tier: its directory (default: <home>/tier).")
    tier_bucket: str = Field(
        default="tidemq-tier", pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", description="s3 tier: the bucket."
    )
    tier_prefix: str = Field(default="tidemq", description="s3 tier: the key prefix under which queues are stored.")
    tier_level: TieredStorageLevel = Field(default=TieredStorageLevel.NOT_IN_DISK, description="tieredStorageLevel.")
    tier_upload_age_ms: int = Field(default=1000, ge=1, description="Upload a queue's new messages at this age.")
    tier_upload_messages: int = Field(default=10_000, ge=1, description="... or once this many are waiting.")
    tier_upload_bytes: int = Field(default=4 * MIB, ge=KIB, description="... or once this many bytes are waiting.")
    tier_segment_bytes: int = Field(default=64 * MIB, ge=KIB, description="posix tier: segment file size.")
    tier_in_memory_bytes: int = Field(default=256 * MIB, ge=0, description="NOT_IN_MEM: the hot tail read hot.")
    tier_cache_bytes: int = Field(default=64 * MIB, ge=0, description="Read-ahead cache bound (0: no read-ahead).")
    tier_cache_ttl_s: float = Field(default=30.0, gt=0, description="Read-ahead entries expire after this long.")
    hot_retention_ms: int | None = Field(
        default=None, ge=0, description="Remove hot segments fully uploaded and older than this (unset: keep)."
    )

    efs_path: Path | None = Field(default=None, description="serverless: the shared directory (default <home>/efs).")
    efs_segment_bytes: int = Field(default=64 * MIB, ge=64 * KIB, description="serverless: a writer's file size.")
    efs_segment_age_s: float = Field(
        default=600.0, gt=0, description="serverless: a writer starts a new file after this long."
    )
    efs_segment_grace_s: float = Field(
        default=3600.0, gt=0, description="serverless: files idle this long and referenced by no batch are deleted."
    )
    efs_hot_ms: int = Field(
        default=0, ge=0, description="serverless: messages stay on the shared directory this long once in the tier."
    )
    maintenance_interval_s: float = Field(
        default=10.0, gt=0, description="serverless, locally: how often the maintenance run (tier upload) starts."
    )
    dynamodb_prefix: str = Field(
        default="tidemq", pattern=r"^[A-Za-z0-9_.-]{1,200}$", description="serverless: DynamoDB table name prefix."
    )

    timer_max_delay_ms: int = Field(
        default=DEFAULT_MAX_DELAY_MS,
        ge=0,
        le=MAX_DELAY_MS,
        description="Longest delay a delay message may have: its delivery time at most this far ahead (3 days; at "
        "most 40).",
    )
    send_dedup_window_ms: int = Field(
        default=5 * 60_000,
        ge=1000,
        le=24 * 60 * 60_000,
        description="How long a send's idempotency key (an Idempotency-Key, a RocketMQ message id) is remembered: a "
        "send of the key within it is answered as the first and not stored again (5 minutes, as SQS FIFO).",
    )
    timer_outcome_retention_ms: int = Field(
        default=DEFAULT_MAX_DELAY_MS,
        ge=0,
        description="How long past its due time a delivered or recalled timer's outcome is kept, so that a recall of "
        "it says too late (delivered) or recalled.",
    )
    timer_poll_ms: int = Field(
        default=100,
        ge=1,
        description="serverless: a consumer of a DELAY topic moves its due timers at most this often (per process).",
    )

    @property
    def efs_directory(self) -> Path:
        return self.efs_path or self.home / "efs"

    @property
    def tier_directory(self) -> Path:
        return self.tier_path or self.home / "tier"
