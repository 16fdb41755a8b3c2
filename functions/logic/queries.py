"""Message queries: by id, by key, and the offset for a point in time, each spanning the hot and the cold tier
(the store asks the cold tier's index for what the hot tier no longer holds: tidemq_store/tiered/lookup.py). The
HTTP API, the CLI (through it) and the console's message browser call these."""

from __future__ import annotations

from tidemq_protocol.api.messages import MessageList, MessageView, OffsetForTime
from tidemq_store import MessageStore


def message_by_id(store: MessageStore, msg_id: str) -> MessageView:
    return MessageView.of(store.message_by_id(msg_id))


def messages_by_key(store: MessageStore, topic: str, key: str, limit: int) -> MessageList:
    return MessageList(messages=[MessageView.of(m) for m in store.messages_by_key(topic, key, limit)])


def offset_for_time(store: MessageStore, topic: str, queue: int, timestamp: int) -> OffsetForTime:
    offset = store.offset_for_timestamp(topic, queue, timestamp)
    return OffsetForTime(topic=topic, queue=queue, timestamp=timestamp, offset=offset)
