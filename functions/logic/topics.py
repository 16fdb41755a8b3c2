"""Topic administration."""

from __future__ import annotations

from shared.settings import Settings
from tidemq_protocol.api.topics import QueueRange, TopicChange, TopicDescription, TopicList, TopicSpec, TopicView
from tidemq_protocol.kv import is_kv_topic
from tidemq_protocol.message import MessageType
from tidemq_store import MessageStore, TopicConfig
from tidemq_store.api import UNSET


def create_topic(store: MessageStore, spec: TopicSpec) -> TopicView:
    config = store.create_topic(TopicConfig(**spec.model_dump()))
    return TopicView(**config.model_dump())


def list_topics(store: MessageStore, after: str | None, limit: int) -> TopicList:
    """A page of topics, without KV namespaces' own (`%KV%<namespace>`: reached through /v1/kv)."""
    topics = store.list_topics(after=after, limit=limit)
    return TopicList(
        topics=[TopicView(**t.model_dump()) for t in topics if not is_kv_topic(t.name)],
        next_after=topics.next_after,
    )


def describe_topic(store: MessageStore, name: str, settings: Settings) -> TopicDescription:
    config = store.get_topic(name)
    ranges = [
        QueueRange(queue=q.queue, min_offset=q.min_offset, max_offset=q.max_offset) for q in store.queue_offsets(name)
    ]
    return TopicDescription(**config.model_dump(), queue_offsets=ranges, type_settings=type_settings(config, settings))


TYPE_SETTINGS = {
    MessageType.DELAY: ("timer_max_delay_ms",),
    MessageType.TRANSACTION: ("transaction_timeout_ms", "transaction_check_interval_ms", "transaction_check_max"),
}
"""The server's settings each message type runs by, as a topic's description shows them."""


def type_settings(config: TopicConfig, settings: Settings) -> dict[str, int]:
    return {name: getattr(settings, name) for name in TYPE_SETTINGS.get(config.message_type, ())}


def change_topic(store: MessageStore, name: str, change: TopicChange) -> TopicView:
    given = change.model_fields_set
    config = store.update_topic(
        name,
        retention_ms=change.retention_ms if "retention_ms" in given else UNSET,
        queues=change.queues,
        attributes=change.attributes,
    )
    return TopicView(**config.model_dump())


def delete_topic(store: MessageStore, name: str) -> None:
    store.delete_topic(name)
