"""Reading a queue whole, as a consumer does, and waiting for the tier: what the tier's tests compare."""

from __future__ import annotations

import time

from tidemq_store import MessageStore


def read_all(store: MessageStore, topic: str, queue: int, start: int = 0, tag: object = None) -> list:
    """Every message of the queue from `start`, as comparable tuples, reading as a consumer does."""
    found, offset = [], start
    while True:
        result = store.get(topic, queue, offset, max_messages=64, message_filter=tag)
        found += [
            (m.msg_id, m.queue_offset, m.body, m.keys, m.tag, m.properties, m.born_timestamp, m.store_timestamp)
            for m in result.messages
        ]
        if result.next_offset >= result.max_offset:
            return found
        offset = result.next_offset


def read_all_records(store: MessageStore, topic: str, queue: int) -> bytes:
    parts, offset = [], 0
    while True:
        batch = store.read_records(topic, queue, offset, max_messages=100)
        parts.append(batch.records)
        if batch.next_offset >= batch.max_offset:
            return b"".join(parts)
        offset = batch.next_offset


def wait_uploaded(store: MessageStore, topic: str, timeout_s: float = 30) -> None:
    """Wait for the dispatcher (no forcing) to have every acknowledged message in the tier."""
    deadline = time.monotonic() + timeout_s
    while any(status.upload_lag_messages for status in store.tier_status(topic)):
        assert time.monotonic() < deadline, store.tier_status(topic)
        time.sleep(0.05)
