"""The HTTP API's bodies for messages: produce, consume, look up."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from tidemq_protocol.codec import SEND_STATUS_HEADER  # noqa: F401  (where the servers import it from)
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import MESSAGE_GROUP, message_group_of
from tidemq_protocol.timer import MAX_DELAY_MS, MAX_RECALL_HANDLE

from .common import (
    _BASE64,
    BASE64_PATTERN,
    KEY_PATTERN,
    MAX_BATCH_MESSAGES,
    MAX_JSON_INTEGER,
    PROPERTY_NAME_SCHEMA,
    PROPERTY_VALUE_PATTERN,
    TAG_PATTERN,
    ApiModel,
    BodyEncoding,
    MessageGroup,
    QueueIndex,
)


def _both(first: str, second: str, kind: str) -> dict:
    """JSON Schema of a body giving both fields a value (not null)."""
    return {"required": [first, second], "properties": {first: {"type": kind}, second: {"type": kind}}}


class MessageIn(ApiModel):
    """One message to produce. Its body and properties together take at most `TIDEMQ_MAX_MESSAGE_BYTES`
    (4 MiB), the properties (keys, tag and user properties, encoded) at most 32767 bytes: over either, 413."""

    model_config = ConfigDict(
        json_schema_extra={
            # a base64 body is valid base64: what `body_bytes` decodes
            "if": {"properties": {"body_encoding": {"const": "base64"}}, "required": ["body_encoding"]},
            "then": {"properties": {"body": {"pattern": BASE64_PATTERN}}},
            "allOf": [  # a null is a field left out (the model's default), so only two values conflict
                # a message group routes its message as a sharding key does: one or the other
                {"not": _both("sharding_key", "message_group", "string")},
                # a delay message says when it is due one way
                {"not": _both("delivery_time_ms", "delay_ms", "integer")},
            ],
        }
    )

    body: str
    body_encoding: BodyEncoding = "utf-8"
    keys: list[Annotated[str, WithJsonSchema({"type": "string", "pattern": KEY_PATTERN})]] = Field(
        default_factory=list, description="Keys to look the message up by: no whitespace or control characters."
    )
    tag: Annotated[str, WithJsonSchema({"type": "string", "pattern": TAG_PATTERN})] | None = Field(
        default=None, description="One tag for consumers' tag filters: not blank, not `*`, no `||`."
    )
    properties: dict[str, str] = Field(
        default_factory=dict,
        json_schema_extra={
            "propertyNames": PROPERTY_NAME_SCHEMA,
            "additionalProperties": {"type": "string", "pattern": PROPERTY_VALUE_PATTERN},
        },
        description="User properties. Names: no control characters, not KEYS or TAGS; values: no \\x01 or \\x02.",
    )
    queue: QueueIndex | None = Field(default=None, description="Target queue; default: by sharding key, else any.")
    sharding_key: str | None = Field(default=None, min_length=1, description="Same key, same queue: order per key.")
    message_group: MessageGroup | None = Field(
        default=None,
        description="The message's message group: required on a FIFO topic (its messages are consumed in order, "
        "per group), refused on any other. A group's messages go to one queue, chosen by the group.",
    )
    delivery_time_ms: Annotated[int, Field(ge=0, le=MAX_JSON_INTEGER)] | None = Field(
        default=None,
        description="A delay message's delivery time, ms since the epoch: required on a DELAY topic (or delay_ms), "
        "refused on any other. At most TIDEMQ_TIMER_MAX_DELAY_MS ahead (3 days by default: further is a 400); a time "
        "past delivers at once. No consumer sees the message before then.",
    )
    delay_ms: Annotated[int, Field(ge=0, le=MAX_DELAY_MS)] | None = Field(
        default=None,
        description="A delay message's delay from its arrival, in ms (instead of delivery_time_ms): at most "
        "TIDEMQ_TIMER_MAX_DELAY_MS (3 days by default: longer is a 400; 40 days at most).",
    )

    @model_validator(mode="after")
    def _body_decodes(self) -> MessageIn:
        self.body_bytes()
        if self.sharding_key is not None and self.message_group is not None:
            raise ValueError("give sharding_key or message_group, not both: a message's group is its key")
        if self.delivery_time_ms is not None and self.delay_ms is not None:
            raise ValueError("give delivery_time_ms or delay_ms, not both")
        return self

    @classmethod
    def of(cls, body: bytes | str, **fields: Any) -> Self:
        """A message of `body` (text as UTF-8; bytes as UTF-8 text when they are, else base64) and `fields`."""
        data = body.encode() if isinstance(body, str) else bytes(body)
        try:
            return cls(body=data.decode(), **fields)
        except UnicodeDecodeError:
            return cls(body=base64.b64encode(data).decode(), body_encoding="base64", **fields)

    def body_bytes(self) -> bytes:
        if self.body_encoding == "utf-8":
            return self.body.encode()
        # RFC 4648 base64, padding and all, as BASE64_PATTERN declares (the decoder alone takes a stray "=" too)
        if not _BASE64.fullmatch(self.body):
            raise ValueError("body is not valid base64")
        return base64.b64decode(self.body)


class ProduceRequest(ApiModel):
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_BATCH_MESSAGES)


class PutView(ApiModel):
    msg_id: str
    queue: int
    offset: int = Field(description="The message's offset in its queue; -1 for a delay message sent for later.")
    store_timestamp: int
    recall_handle: str | None = Field(
        default=None,
        description="A delay message sent for later: what recalls it before it is due (POST .../recall).",
    )


class ProduceResponse(ApiModel):
    messages: list[PutView]


def _shown(properties: dict[str, str]) -> dict[str, str]:
    """A message's user properties (its message group is a field of its own)."""
    if MESSAGE_GROUP not in properties:
        return properties
    return {name: value for name, value in properties.items() if name != MESSAGE_GROUP}


RECALL_HANDLE_PATTERN = "^[A-Za-z0-9_-]+$"


class RecallRequest(ApiModel):
    """Recall a delay message before it is due (RocketMQ 5.3's RecallMessage): it is then never delivered."""

    recall_handle: str = Field(
        min_length=1,
        max_length=MAX_RECALL_HANDLE,
        pattern=RECALL_HANDLE_PATTERN,
        description="What the produce answered for the message (`recall_handle`).",
    )


class RecallResponse(ApiModel):
    msg_id: str = Field(description="The recalled message's id.")
    due_ms: int = Field(description="When it was due (it will never be delivered).")
    status: Literal["recalled", "already_recalled"] = Field(
        description="`already_recalled`: a recall of it came before (this one, sent again, changed nothing)."
    )


class MessageView(ApiModel):
    msg_id: str
    topic: str
    queue: int
    offset: int
    body: str
    body_encoding: BodyEncoding
    keys: list[str]
    tag: str | None
    properties: dict[str, str]
    message_group: str | None = None
    born_timestamp: int
    store_timestamp: int

    @classmethod
    def of(cls, message: StoredMessage) -> MessageView:
        try:
            body, encoding = message.body.decode(), "utf-8"
        except UnicodeDecodeError:
            body, encoding = base64.b64encode(message.body).decode(), "base64"
        return cls.model_construct(
            msg_id=message.msg_id,
            topic=message.topic,
            queue=message.queue,
            offset=message.queue_offset,
            body=body,
            body_encoding=encoding,
            keys=list(message.keys),
            tag=message.tag,
            properties=_shown(message.properties),
            message_group=message_group_of(message.properties),
            born_timestamp=message.born_timestamp,
            store_timestamp=message.store_timestamp,
        )

    def body_bytes(self) -> bytes:
        return self.body.encode() if self.body_encoding == "utf-8" else base64.b64decode(self.body)


class ConsumeResponse(ApiModel):
    messages: list[MessageView]
    next_offset: int = Field(description="Where the next read starts: past every message examined.")
    min_offset: int
    max_offset: int


class MessageList(ApiModel):
    messages: list[MessageView]


class OffsetForTime(ApiModel):
    topic: str
    queue: int
    timestamp: int
    offset: int = Field(description="The first offset stored at or after `timestamp` (max_offset if none).")
