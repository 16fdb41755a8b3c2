"""The HTTP API's bodies for consumer groups: create, describe with lag, commit and reset offsets, and set a
group's push subscription."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tidemq_protocol import push
from tidemq_protocol.attributes import Attributes
from tidemq_protocol.push_target import TARGET_FORMS, checked_push_target, shown_target
from tidemq_protocol.retry import RetryPolicy

from .common import (
    MAX_JSON_INTEGER,
    ONE_FILTER,
    TARGET_PATTERN,
    ApiModel,
    GroupName,
    Offset,
    QueueKey,
    SqlFilterText,
    TagFilterText,
    TopicName,
    integer_fields,
    json_integer,
)


class PushSubscription(push.PushSpec):
    """A group's push delivery (RocketMQ's push consumer): new messages of `topic` its filter selects (`tag`, or a SQL92
    expression `sql`: not both) go to `target`, `batch_size` at a time, each queue in order; a failed call is retried
    after the group's backoff, and after its `max_delivery_attempts` calls the batch goes to the group's dead-letter
    topic `%DLQ%<group>` (the group's `retry` policy: set it when creating or changing the group)."""

    # What the API takes, and shows of the store's record (`ShownPush`): `target` checked against the
    # push-target grammar, so that a malformed one is a 422 naming the field.
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=ONE_FILTER)

    topic: TopicName
    target: Annotated[str, AfterValidator(checked_push_target)] = Field(
        description=f"Where messages go: {TARGET_FORMS}. Shown with `***` for a webhook URL's credentials.",
        json_schema_extra={"pattern": TARGET_PATTERN},
    )
    tag: TagFilterText = "*"
    sql: SqlFilterText | None = Field(
        default=None,
        description="SQL92 filter over message properties, instead of `tag` (docs/filters.md): one that does not "
        "parse is a 400 (InvalidFilterExpression) naming its `position`.",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _json_integers(cls, value: Any, info: ValidationInfo) -> Any:
        return integer_fields(cls, value, info)


def _shown(push: object) -> object:
    """A stored subscription as the API shows it: without its signing secret, credentials in its target
    redacted (`tidemq_protocol.push_target.shown_target`)."""
    if isinstance(push, BaseModel):
        push = push.model_dump()
    if isinstance(push, dict):
        push = {name: value for name, value in push.items() if name != "signing_secret"}
        if isinstance(push.get("target"), str):
            push["target"] = shown_target(push["target"])
    return push


ShownPush = Annotated[PushSubscription, BeforeValidator(_shown)]
"""A group's push subscription as every answer shows it (made from the store's record too)."""


RetryField = Field(
    default=None,
    description="How often and when the group's messages are delivered again, pop or push, before its dead letters "
    "(null, or a field of it null: the server's defaults, TIDEMQ_MAX_DELIVERY_ATTEMPTS and TIDEMQ_RETRY_BACKOFF).",
)


class GroupSpec(ApiModel):
    name: GroupName
    attributes: Attributes = Field(default_factory=dict)
    fifo: StrictBool = Field(
        default=False,
        description="Consume FIFO topics in order: a message group's messages one batch at a time, each only after "
        "the one before it was acked or dead-lettered (other groups go on meanwhile).",
    )
    retry: RetryPolicy | None = RetryField


class GroupChange(ApiModel):
    """Fields to change; absent fields stay as they are (`retry: null` goes back to the server's defaults)."""

    attributes: Attributes | None = Field(
        default=None, description="Replace the attributes (as at create; null: they stay)."
    )
    retry: RetryPolicy | None = RetryField


class GroupView(GroupSpec):
    push: ShownPush | None = Field(default=None, description="Set: a push group (see .../push).")
    created_at: int


class GroupList(ApiModel):
    groups: list[GroupView]
    next_after: str | None


class QueueLag(ApiModel):
    queue: int
    committed_offset: int | None = Field(description="null: the group never committed on this queue.")
    min_offset: int
    max_offset: int
    lag: int = Field(description="Messages from the committed offset (or the queue's start) to max_offset.")


class TopicLag(ApiModel):
    topic: str
    lag: int
    queues: list[QueueLag]


class GroupDescription(GroupView):
    lag: int
    topics: list[TopicLag]


class OffsetCommit(ApiModel):
    topic: TopicName
    offsets: dict[QueueKey, Annotated[Offset, BeforeValidator(json_integer)]] = Field(
        min_length=1,
        description="Next offset to consume, by queue (in the queue's range, else 409).",
        json_schema_extra={"additionalProperties": False},
    )


class OffsetReset(ApiModel):
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"to": {"const": "timestamp"}}},
            "then": {"required": ["timestamp"], "properties": {"timestamp": {"type": "integer"}}},
        }
    )

    topic: TopicName
    to: Literal["earliest", "latest", "timestamp"]
    timestamp: int | None = Field(
        default=None, ge=0, le=MAX_JSON_INTEGER, description="Required when `to` is timestamp (ms)."
    )

    @model_validator(mode="after")
    def _timestamp_given(self) -> OffsetReset:
        if self.to == "timestamp" and self.timestamp is None:
            raise ValueError("timestamp is required when resetting to a timestamp")
        return self


class CommittedOffsets(ApiModel):
    group: str
    topic: str
    offsets: dict[int, int]
