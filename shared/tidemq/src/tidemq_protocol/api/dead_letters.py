"""The HTTP API's bodies for a group's dead letters (`%DLQ%<group>`): list them, and resend chosen ones to the topics
they came from (RocketMQ's dashboard "resend DLQ message"; SQS's dead-letter queue redrive)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from .common import ApiModel, MessageId, Offset, json_integer
from .messages import MessageView

RESEND_MOST = 64
"""Most dead letters one resend request takes: a range past it is resent a request at a time (`next_offset`)."""

JsonOffset = Annotated[Offset, BeforeValidator(json_integer)]


class DeadLetter(MessageView):
    """A message of the group's dead-letter topic (its origin in its properties: RETRY_TOPIC, ORIGIN_MESSAGE_ID,
    RECONSUME_TIME, DLQ_REASON, ...), and when it was resent, if it was."""

    resent_at_ms: int | None = Field(description="When it was resent to its origin topic (null: never).")


class DeadLetterList(ApiModel):
    group: str
    dead_letter_topic: str
    messages: list[DeadLetter]
    next_offset: int = Field(description="Where the next page starts.")
    min_offset: int
    max_offset: int


class ResendRequest(ApiModel):
    """Which dead letters to resend: by id, or the range [from_offset, to_offset) of the dead-letter topic (its
    one queue), at most RESEND_MOST of them a request; `next_offset` in the answer goes on with the range. A range
    that ends where it starts, or before, is empty."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["message_ids"],
                    "not": {"anyOf": [{"required": ["from_offset"]}, {"required": ["to_offset"]}]},
                },
                {"required": ["from_offset"], "not": {"required": ["message_ids"]}},
            ]
        }
    )

    message_ids: Annotated[list[MessageId], Field(min_length=1, max_length=RESEND_MOST)] | SkipJsonSchema[None] = Field(
        default=None, description="Ids of messages of `%DLQ%<group>`."
    )
    from_offset: JsonOffset | SkipJsonSchema[None] = Field(default=None, description="First offset of the range.")
    to_offset: JsonOffset | None = Field(default=None, description="End of the range, not included (null: its end).")

    @model_validator(mode="after")
    def _one_choice(self) -> ResendRequest:
        for name in ("message_ids", "from_offset"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} must not be null (leave it out)")
        if (self.message_ids is None) == (self.from_offset is None):
            raise ValueError("give message_ids, or from_offset (and to_offset), not both")
        if self.message_ids is not None and "to_offset" in self.model_fields_set:
            raise ValueError("to_offset goes with from_offset, not message_ids")
        return self


ResendStatus = Literal["resent", "already_resent"]


class ResendResult(ApiModel):
    msg_id: str = Field(description="The dead letter's id.")
    offset: int = Field(description="The dead letter's offset in `%DLQ%<group>`.")
    status: ResendStatus = Field(
        description="resent: now a new message on `topic`; already_resent: resent before (nothing was sent again)."
    )
    topic: str = Field(description="The topic it came from and goes back to (its RETRY_TOPIC).")
    resent_msg_id: str | None = Field(description="The new message's id (null when already resent).")
    resent_at_ms: int


class ResendResponse(ApiModel):
    results: list[ResendResult]
    next_offset: int | None = Field(
        description="A range resend: where the next request goes on (null: the range is done). Null for ids."
    )
