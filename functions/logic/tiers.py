"""The cold tier of a topic: where its messages are, and uploading now."""

from __future__ import annotations

from shared.settings import get_settings
from tidemq_protocol.api.topics import TierQueueView, TierStatus, TierUpload
from tidemq_store import MessageStore


def tier_status(store: MessageStore, topic: str) -> TierStatus:
    queues = [
        TierQueueView(**{name: getattr(s, name) for name in TierQueueView.model_fields})
        for s in store.tier_status(topic)
    ]
    return TierStatus(topic=topic, tier=store.tier_medium, level=get_settings().tier_level, queues=queues)


def upload_now(store: MessageStore, topic: str) -> TierUpload:
    return TierUpload(topic=topic, uploaded=store.upload_now(topic))
