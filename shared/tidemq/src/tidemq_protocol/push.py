"""What a group's push delivery (RocketMQ's push consumer) is asked to do: `PushSpec`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .message import TagFilter
from .names import TopicName


class PushSpec(BaseModel):
    """What a group's push delivery (RocketMQ's push consumer) is asked to do: the topic and tag filter it
    delivers, the target, the batch size and the retry policy, each field bounded. The store never delivers: the
    functions check how `target` is written when a subscription is set, and deliver to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: TopicName
    target: str = Field(min_length=1, description="Where messages go, as given when the subscription was set.")
    tag: str = Field(default="*", description="Tag filter: `*`, or tags joined by `||`.")
    max_attempts: int = Field(default=16, ge=1, le=1000, description="Calls per batch before it is dead-lettered.")
    batch_size: int = Field(default=1, ge=1, le=1000, description="Most messages in one call.")
    backoff_base_ms: int = Field(default=1000, ge=1, description="Wait before the first retry; doubles each time.")
    backoff_max_ms: int = Field(
        default=300_000, ge=1, description="Longest wait between two attempts (below backoff_base_ms: every wait)."
    )

    @field_validator("tag")
    @classmethod
    def _tag_filter(cls, tag: str) -> str:
        TagFilter.parse(tag)
        return tag
