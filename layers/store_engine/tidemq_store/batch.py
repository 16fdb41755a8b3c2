"""A put's batch, checked whole before anything is written: every backend validates with this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .clock import now_ms
from .config import StoreConfig
from .errors import InvalidArgument, InvalidBatch, MessageTooLarge, QueueOutOfRange
from .model import Message, TopicConfig, tag_hash
from .record import PendingRecord, encode_properties, record_size


@dataclass(slots=True, frozen=True)
class ValidatedBatch:
    """A put's messages, checked whole and encoded as far as they can be before the store assigns offsets: one
    sequence per field (message i is index i of each), so a batch of a thousand makes no object per message."""

    queues: Sequence[int]
    born_timestamps: Sequence[int]
    properties: Sequence[bytes]  # encoded (record.encode_properties)
    bodies: Sequence[bytes]
    tag_codes: Sequence[int]
    keys: Sequence[tuple[str, ...]]
    sizes: Sequence[int]  # each message's record size in its topic's commit log

    def __len__(self) -> int:
        return len(self.queues)

    def records(self, queue_offsets: Sequence[int]) -> list[PendingRecord]:
        """The messages ready to encode (`record.encode_batch`), message i at `queue_offsets[i]`."""
        return list(zip(self.queues, queue_offsets, self.born_timestamps, self.properties, self.bodies, strict=True))

    def take(self, indexes: Sequence[int]) -> ValidatedBatch:
        """The messages at `indexes`, in that order."""
        columns = (
            self.queues,
            self.born_timestamps,
            self.properties,
            self.bodies,
            self.tag_codes,
            self.keys,
            self.sizes,
        )
        return ValidatedBatch(*([column[i] for i in indexes] for column in columns))


def validate_batch(limits: StoreConfig, config: TopicConfig, messages: Sequence[Message]) -> ValidatedBatch:
    """Check a whole batch before anything is written (raising a `ClientError` that names the message at fault)."""
    if not isinstance(messages, Sequence) or not messages:
        raise InvalidBatch("a batch must hold at least one message")
    if len(messages) > limits.max_batch_messages:
        raise InvalidBatch(f"a batch holds at most {limits.max_batch_messages} messages, got {len(messages)}")
    born_default = now_ms()
    queues, max_size = config.queues, limits.max_message_bytes
    fixed = record_size(config.name.encode(), b"", b"")  # + properties + body
    total, rows = 0, []
    for index, message in enumerate(messages):
        if type(message) is not Message:
            raise InvalidArgument(f"message {index} is a {type(message).__name__}, not a Message")
        body, queue, born, keys, tag = message.body, message.queue, message.born_timestamp, message.keys, message.tag
        if type(body) is not bytes:
            if not isinstance(body, bytes | bytearray | memoryview):
                raise InvalidArgument(f"message {index}: body must be bytes, got {type(body).__name__}")
            body = bytes(body)
        if type(queue) is not int or not 0 <= queue < queues:
            raise QueueOutOfRange(config.name, queue, queues)
        props = b""
        if keys or tag is not None or message.properties:
            try:
                props = encode_properties(keys, tag, message.properties)
            except InvalidArgument as error:
                raise InvalidArgument(f"message {index}: {error}") from None
        size = len(body) + len(props)
        if size > max_size:
            raise MessageTooLarge(f"message {index} is {size} bytes (body and properties); the limit is {max_size}")
        if born is None:
            born = born_default
        elif type(born) is not int or born < 0:
            raise InvalidArgument(f"message {index}: born_timestamp must be a non-negative integer (ms)")
        total += fixed + size
        rows.append((queue, born, props, body, tag_hash(tag) if tag else 0, tuple(keys) if keys else (), fixed + size))
    if total > limits.max_batch_bytes:
        raise MessageTooLarge(f"the batch is {total} bytes encoded; the limit is {limits.max_batch_bytes}")
    return ValidatedBatch(*zip(*rows, strict=True))  # a row per message turned into a column per field
