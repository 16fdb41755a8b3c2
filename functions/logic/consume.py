"""Consume by offset, with long polling: an empty read waits up to `wait_ms` for a new message."""

from __future__ import annotations

from tidemq_store import GetResult, MessageStore


def consume(
    store: MessageStore, topic: str, queue: int, offset: int, max_messages: int, max_bytes: int,
    tag_filter: str | None, wait_ms: int,
) -> GetResult:  # fmt: skip
    result = store.get(topic, queue, offset, max_messages, max_bytes, tag_filter)
    if result.messages or wait_ms <= 0 or result.next_offset < result.max_offset:
        return result
    if store.wait_for_messages(topic, queue, result.next_offset, wait_ms / 1000):
        result = store.get(topic, queue, result.next_offset, max_messages, max_bytes, tag_filter)
    return result
