"""Messages as client and server hold them: one to store (`Message`), one read back (`StoredMessage`), a topic's
message type (the filters a subscription reads them through are `filter`'s)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class MessageType(StrEnum):
    """RocketMQ 5's topic message types; a topic accepts one kind. A FIFO topic's messages each carry a message
    group (`tidemq_protocol.record.MESSAGE_GROUP`), and only its messages do (tidemq_store/batch.py checks it)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"


@dataclass(slots=True)
class Message:
    """A message to store. `queue` is chosen by the caller (the produce logic routes sharding keys)."""

    body: bytes
    queue: int = 0
    keys: tuple[str, ...] = ()
    tag: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    born_timestamp: int | None = None
    msg_id: str | None = None
    """The id the message is to keep (record.MESSAGE_ID, RocketMQ's UNIQ_KEY) instead of one from where it is stored:
    set by the broker's own paths only (the gRPC proxy carries a RocketMQ client's id here); the HTTP API has no
    field for it."""


@dataclass(slots=True)
class StoredMessage:
    """A message read back from the store, with where and when it was stored."""

    topic: str
    queue: int
    queue_offset: int
    msg_id: str
    born_timestamp: int
    store_timestamp: int
    body: bytes
    keys: tuple[str, ...]
    tag: str | None
    properties: dict[str, str]


def key_queue(key: str, queues: int) -> int:
    """The queue of a sharding key or a message group among `queues`: one key, one queue, so its order is kept."""
    return zlib.crc32(key.encode()) % queues


def tag_hash(tag: str | None) -> int:
    """The 32-bit tag code kept in each ConsumeQueue entry (0 for no tag); reads confirm the real tag."""
    return zlib.crc32(tag.encode()) if tag else 0
