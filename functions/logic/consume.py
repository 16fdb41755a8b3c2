"""Consume by offset, with long polling: an empty read waits up to `wait_ms` for a new message. A read's filter
(a tag or SQL92 filter: `tidemq_protocol.filter.subscription_filter`) is parsed by the caller, once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tidemq_protocol.filter import MessageFilter
from tidemq_store import GetResult, MessageStore, RecordBatch

R = TypeVar("R", GetResult, RecordBatch)


def _long_poll(store: MessageStore, read: Callable[[int], R], topic: str, queue: int, offset: int, wait_ms: int) -> R:
    result = read(offset)
    empty = (result.count if isinstance(result, RecordBatch) else len(result.messages)) == 0
    if not empty or wait_ms <= 0 or result.next_offset < result.max_offset:
        return result
    if store.wait_for_messages(topic, queue, result.next_offset, wait_ms / 1000):
        result = read(result.next_offset)
    return result


def consume(
    store: MessageStore,
    topic: str,
    queue: int,
    offset: int,
    max_messages: int,
    max_bytes: int,
    message_filter: MessageFilter | None,
    wait_ms: int,
) -> GetResult:
    """Decoded messages, for the JSON API."""
    return _long_poll(
        store,
        lambda start: store.get(topic, queue, start, max_messages, max_bytes, message_filter),
        topic,
        queue,
        offset,
        wait_ms,
    )


def consume_records(
    store: MessageStore,
    topic: str,
    queue: int,
    offset: int,
    max_messages: int,
    max_bytes: int,
    message_filter: MessageFilter | None,
    wait_ms: int,
) -> RecordBatch:
    """Records as stored, for the binary batch API."""
    return _long_poll(
        store,
        lambda start: store.read_records(topic, queue, start, max_messages, max_bytes, message_filter),
        topic,
        queue,
        offset,
        wait_ms,
    )
