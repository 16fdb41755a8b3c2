"""The BrokerContainer's admin bodies (`servers/container`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
)

from .common import ApiModel


class BrokerAdd(ApiModel):
    """A broker to add: the text of its config file (Java properties; docs/container.md)."""

    properties: str = Field(min_length=1, max_length=64 * 1024, description="`key=value` lines, as in broker-a.conf.")


class BrokerSettings(ApiModel):
    """A broker's settings by their config-file keys (secrets hidden when shown); as a change, the keys to set."""

    settings: dict[
        Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,99}$")], Annotated[str, Field(max_length=4096)]
    ]


class BrokerQuota(ApiModel):
    usage_bytes: int = Field(description="Its commit log and ConsumeQueue on disk.")
    quota_bytes: int | None = Field(description="quotaPercentForDiskPartition of the partition (null: no quota).")
    threshold_bytes: int | None = Field(description="Past this, it frees space or refuses writes.")
    state: Literal["ok", "freed", "waiting_for_tier", "refusing_writes"]
    segments_released: int = Field(description="Segments the last check removed (safe in the cold tier).")
    warning: str | None


class BrokerView(ApiModel):
    name: str
    cluster: str
    id: int
    identity: str = Field(description="cluster_name_id, as RocketMQ names a broker (and its log directory).")
    role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]
    store: str
    tier: str
    in_flight: int
    quota: BrokerQuota
    replication: dict[str, Any] | None = Field(description="A master: its slave's position; a slave: its own.")
    isolated_log: bool


class BrokerList(ApiModel):
    brokers: list[BrokerView]
