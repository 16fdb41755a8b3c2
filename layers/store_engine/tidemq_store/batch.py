"""A put's batch, checked whole before anything is written: every backend validates with this."""

from __future__ import annotations

from collections.abc import Sequence

from .clock import now_ms
from .config import StoreConfig
from .errors import InvalidArgument, InvalidBatch, MessageTooLarge, QueueOutOfRange
from .model import Message, TopicConfig, tag_hash
from .record import encode_properties, record_size


def validate_batch(limits: StoreConfig, config: TopicConfig, messages: Sequence[Message]) -> list[tuple]:
    """Check a whole batch before anything is written.

    Returns (queue, born_timestamp, encoded properties, body, tag code, keys, record size) each.
    """
    if not isinstance(messages, Sequence) or not messages:
        raise InvalidBatch("a batch must hold at least one message")
    if len(messages) > limits.max_batch_messages:
        raise InvalidBatch(f"a batch holds at most {limits.max_batch_messages} messages, got {len(messages)}")
    born_default = now_ms()
    queues, max_size = config.queues, limits.max_message_bytes
    fixed = record_size(config.name.encode(), b"", b"")  # + properties + body
    total, pending = 0, []
    for index, message in enumerate(messages):
        if type(message) is not Message:
            raise InvalidArgument(f"message {index} is a {type(message).__name__}, not a Message")
        body, queue, born, keys, tag = (
            message.body,
            message.queue,
            message.born_timestamp,
            message.keys,
            message.tag,
        )
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
        pending.append(
            (queue, born, props, body, tag_hash(tag) if tag else 0, tuple(keys) if keys else (), fixed + size)
        )
    if total > limits.max_batch_bytes:
        raise MessageTooLarge(f"the batch is {total} bytes encoded; the limit is {limits.max_batch_bytes}")
    return pending
