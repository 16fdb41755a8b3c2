"""The store engine's settings, read from `TIDEMQ_*` environment variables with the defaults below.

`shared.settings.Settings` extends this model with the process-level settings (port, backend), so a
process has exactly one settings object; tests build a `StoreConfig` directly.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


class FlushDiskType(StrEnum):
    """RocketMQ's flushDiskType. `SYNC` acknowledges a put only after fsync (group commit shares one
    fsync among concurrent puts); `ASYNC` acknowledges after write() and fsyncs every flush interval."""

    SYNC = "SYNC"
    ASYNC = "ASYNC"


class StoreConfig(BaseSettings):
    """Everything that bounds or places the embedded store engine."""

    model_config = SettingsConfigDict(env_prefix="TIDEMQ_", extra="ignore")

    home: Path = Field(default=Path(".tidemq"), description="Directory holding all store data.")
    flush_disk_type: FlushDiskType = Field(default=FlushDiskType.SYNC)
    flush_interval_ms: int = Field(default=500, ge=1, description="ASYNC: how often the commit log is fsync'd.")
    commitlog_segment_bytes: int = Field(default=GIB, ge=64 * KIB, description="Commit-log segment file size.")
    max_message_bytes: int = Field(default=4 * MIB, ge=KIB, description="Largest body + properties of one message.")
    max_batch_messages: int = Field(default=1000, ge=1, description="Most messages in one put.")
    max_batch_bytes: int = Field(default=8 * MIB, ge=KIB, description="Largest encoded batch in one put.")
    max_get_messages: int = Field(default=10_000, ge=1, description="Most messages one get may ask for.")
    checkpoint_interval_s: float = Field(
        default=5.0, gt=0, description="How often ConsumeQueue memtables are flushed and the replay checkpoint moved."
    )
    clean_interval_s: float = Field(default=60.0, gt=0, description="How often expired messages are cleaned.")
    metadata_sync: bool = Field(
        default=False,
        description="fsync the metadata WAL on every change (survives power loss; a process crash never loses it).",
    )
