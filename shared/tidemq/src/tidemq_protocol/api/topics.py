"""The HTTP API's bodies for topics: create, describe, list, change, and the cold tier's status."""

from __future__ import annotations

from pydantic import (
    Field,
)

from tidemq_protocol.attributes import Attributes, TopicAttributes
from tidemq_protocol.limits import HOUR_MS, MAX_QUEUES
from tidemq_protocol.message import MessageType

from .common import MAX_JSON_INTEGER, ApiModel, TopicName


class TopicSpec(ApiModel):
    name: TopicName
    queues: int = Field(default=8, ge=1, le=MAX_QUEUES)
    retention_ms: int | None = Field(
        default=72 * HOUR_MS, ge=1000, le=MAX_JSON_INTEGER, description="null keeps messages forever."
    )
    message_type: MessageType = MessageType.NORMAL
    attributes: TopicAttributes = Field(
        default_factory=dict,
        description="Free-form, except the ones TideMQ reads: cleanup.policy (DELETE or COMPACTION), "
        "compaction.tombstone_grace_ms, tier.storage_class (STANDARD_IA or GLACIER_IR), tier.storage_class_after_ms.",
    )


class TopicView(TopicSpec):
    attributes: Attributes = Field(default_factory=dict)  # as stored: a view is never refused
    created_at: int


class TopicList(ApiModel):
    topics: list[TopicView]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class QueueRange(ApiModel):
    queue: int
    min_offset: int
    max_offset: int


class TopicDescription(TopicView):
    queue_offsets: list[QueueRange]
    type_settings: dict[str, int] = Field(
        default_factory=dict,
        description="The server's settings the topic's message type runs by (DELAY: timer_max_delay_ms, the "
        "longest delay; TRANSACTION: transaction_timeout_ms, transaction_check_interval_ms, transaction_check_max).",
    )


class TierQueueView(ApiModel):
    """Where one queue's messages are, and how far its upload to the cold tier lags."""

    queue: int
    hot_min_offset: int = Field(description="Oldest offset the hot tier still holds.")
    cold_min_offset: int | None = Field(description="Oldest offset in the cold tier (null: none there).")
    cold_max_offset: int | None = Field(description="Just past the newest offset in the cold tier.")
    max_offset: int
    upload_lag_messages: int = Field(description="Acknowledged messages not yet in the cold tier.")
    upload_lag_seconds: float = Field(description="Age of the oldest of them.")


class TierStatus(ApiModel):
    topic: str
    tier: str | None = Field(description="The cold tier (e.g. s3://bucket/prefix); null when tiering is off.")
    level: str = Field(description="tieredStorageLevel: which tier serves reads.")
    queues: list[TierQueueView]


class TierUpload(ApiModel):
    topic: str
    uploaded: int = Field(description="Messages uploaded by this request.")


class TopicChange(ApiModel):
    """Fields to change; absent fields stay as they are (`retention_ms: null` keeps forever)."""

    retention_ms: int | None = Field(default=None, ge=1000, le=MAX_JSON_INTEGER)
    queues: int | None = Field(
        default=None, ge=1, le=MAX_QUEUES, description="Queues can grow, not shrink (fewer than now: 409)."
    )
    attributes: TopicAttributes | None = Field(default=None, description="Replace the attributes (as at create).")
