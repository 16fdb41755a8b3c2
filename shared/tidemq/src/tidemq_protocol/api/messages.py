"""The HTTP API's bodies for messages: produce, consume, look up."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Self

from pydantic import (
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from tidemq_protocol.codec import SEND_STATUS_HEADER  # noqa: F401  (where the servers import it from)
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import MESSAGE_GROUP, message_group_of

from .common import (
    _BASE64,
    BASE64_PATTERN,
    KEY_PATTERN,
    MAX_BATCH_MESSAGES,
    PROPERTY_NAME_SCHEMA,
    PROPERTY_VALUE_PATTERN,
    TAG_PATTERN,
    ApiModel,
    BodyEncoding,
    MessageGroup,
    QueueIndex,
)


class MessageIn(ApiModel):
    """One message to produce. Its body and properties together take at most `TIDEMQ_MAX_MESSAGE_BYTES`
    (4 MiB), the properties (keys, tag and user properties, encoded) at most 32767 bytes: over either, 413."""

    model_config = ConfigDict(
        json_schema_extra={
            # a base64 body is valid base64: what `body_bytes` decodes
            "if": {"properties": {"body_encoding": {"const": "base64"}}, "required": ["body_encoding"]},
            "then": {"properties": {"body": {"pattern": BASE64_PATTERN}}},
            # a message group routes its message as a sharding key does: one or the other
            "not": {"required": ["sharding_key", "message_group"]},
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

    @model_validator(mode="after")
    def _body_decodes(self) -> MessageIn:
        self.body_bytes()
        if self.sharding_key is not None and self.message_group is not None:
            raise ValueError("give sharding_key or message_group, not both: a message's group is its key")
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
    offset: int
    store_timestamp: int


class ProduceResponse(ApiModel):
    messages: list[PutView]


def _shown(properties: dict[str, str]) -> dict[str, str]:
    """A message's user properties (its message group is a field of its own)."""
    if MESSAGE_GROUP not in properties:
        return properties
    return {name: value for name, value in properties.items() if name != MESSAGE_GROUP}


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
