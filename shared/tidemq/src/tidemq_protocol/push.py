"""What a group's push delivery (RocketMQ's push consumer) is asked to do: `PushSpec`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .filter import MAX_EXPRESSION_LENGTH, MessageFilter, TagFilter, one_filter, subscription_filter
from .names import TopicName

LEGACY_RETRY_FIELDS = ("max_attempts", "backoff_base_ms", "backoff_max_ms")
"""The retry fields a push subscription had before groups had a retry policy: a stored one that has them loads with
them moved to its group's policy (`tidemq_store.model.GroupConfig`); the API refuses them (422)."""


class PushSpec(BaseModel):
    """What a group's push delivery (RocketMQ's push consumer) is asked to do: the topic and the filter (a tag
    expression, or a SQL92 expression: `message_filter`) it delivers, the target and the batch size, each field
    bounded. How often and when a failed batch is called again
    is the group's retry policy (`GroupConfig.retry`, tidemq_protocol.retry), as for pop. The store never
    delivers: the functions check how `target` is written when a subscription is set, and deliver to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: TopicName
    target: str = Field(min_length=1, description="Where messages go, as given when the subscription was set.")
    tag: str = Field(default="*", description="Tag filter: `*`, or tags joined by `||`.")
    sql: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_EXPRESSION_LENGTH,
        description="SQL92 filter over message properties, instead of a tag filter (`tag` then absent or `*`).",
    )
    batch_size: int = Field(default=1, ge=1, le=1000, description="Most messages in one call.")

    @field_validator("tag")
    @classmethod
    def _tag_filter(cls, tag: str) -> str:
        TagFilter.parse(tag)
        return tag

    @model_validator(mode="after")
    def _one_filter(self) -> PushSpec:
        one_filter(self.tag, self.sql)
        return self

    @property
    def message_filter(self) -> MessageFilter | None:
        """The subscription's filter, parsed (InvalidFilterExpression for a SQL92 expression that does not parse:
        set_push refuses it before the subscription is stored)."""
        return subscription_filter(None if self.sql is not None else self.tag, self.sql)
