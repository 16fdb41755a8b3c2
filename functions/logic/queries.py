"""Message queries: by id, by key, and the offset for a point in time."""

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
