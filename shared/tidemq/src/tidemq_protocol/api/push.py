"""The HTTP API's bodies for push delivery: a group's subscription as shown, and what a delivery carries."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import ApiModel, GroupName, TopicName
from .groups import ShownPush
from .messages import MessageView


class GroupPush(ApiModel):
    """A group's push subscription and where its dead letters go."""

    group: str
    push: ShownPush
    dead_letter_topic: str = Field(
        description="Batches delivered max_delivery_attempts times land here (`%DLQ%<group>`)."
    )


class PushSubscribed(GroupPush):
    """The answer to setting a subscription: the subscription, and the secret its webhook deliveries are signed
    with, shown this once (never again: keep it where the receiver verifies `X-TideMQ-Signature`)."""

    signing_secret: str | None = Field(
        description="HMAC-SHA256 key of the `X-TideMQ-Signature` header of every webhook delivery (null for Lambda "
        "and Python targets, which are not signed)."
    )


class PushPing(ApiModel):
    """What a webhook receives once when a subscription to it is set (header `X-TideMQ-Event: ping`): no
    messages. Any answer but a redirect lets the subscription be set."""

    group: str
    topic: str
    ping: Literal[True] = True


class PushDelivery(ApiModel):
    """What a push target receives (a webhook's JSON body, a Lambda function's event, a Python callable's
    argument): messages of one queue in offset order."""

    group: str
    topic: str
    queue: int
    attempt: int = Field(description="1 on the first call with these messages, then 2, 3, ... on retries.")
    messages: list[MessageView]


class PushEvent(ApiModel):
    """The push function's event: deliver `topic` to every group pushing from it (or to `group` only).
    The function sends itself `not_before_ms` when it continues in a new invocation."""

    topic: TopicName
    group: GroupName | None = None
    not_before_ms: int | None = Field(default=None, description="Start delivering at this time (ms since epoch).")
    continues: bool = Field(default=False, description="Sent by the push function itself, to go on where it stopped.")

    @model_validator(mode="before")
    @classmethod
    def _former_retries(cls, data: object) -> object:
        """A continuation queued by an earlier version carried its retries (now kept in the store): ignored."""
        if isinstance(data, dict) and "retries" in data:
            return {name: value for name, value in data.items() if name != "retries"}
        return data
