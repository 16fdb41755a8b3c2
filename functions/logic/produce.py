"""Produce: route each message to a queue, then store the batch in one atomic put.

After the put, the `PushNotifier` the caller gives is told the topic has new messages.

Routing: an explicit queue wins; else a sharding key picks `crc32(key) % queues`, so one key always
lands in one queue and keeps its order; the rest of a batch goes to one queue chosen round-robin
per batch, so an unkeyed batch stays contiguous.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence

from tidemq_protocol.api.messages import MessageIn, ProduceResponse, PutView
from tidemq_protocol.codec import ProduceFrame
from tidemq_protocol.errors import QueueOutOfRange
from tidemq_protocol.message import Message
from tidemq_store import MessageStore, PutResult

from .notifier import PushNotifier

_round_robin = itertools.count()


def queue_for(sharding_key: str | None, queues: int, batch_queue: int) -> int:
    return zlib.crc32(sharding_key.encode()) % queues if sharding_key else batch_queue


def produce_frames(
    store: MessageStore, topic: str, frames: Sequence[ProduceFrame], notifier: PushNotifier
) -> list[PutResult]:
    """Route and store decoded messages (from JSON or the binary batch encoding), then tell `notifier`."""
    queues = store.get_topic(topic).queues
    batch_queue = next(_round_robin) % queues
    messages = []
    for frame in frames:
        message = frame.message
        if frame.queue is not None:
            if frame.queue >= queues:
                raise QueueOutOfRange(topic, frame.queue, queues)
            message.queue = frame.queue
        else:
            message.queue = queue_for(frame.sharding_key, queues, batch_queue)
        messages.append(message)
    results = store.put(topic, messages)
    notifier.messages_stored(topic)
    return results


def produce_records(store: MessageStore, topic: str, records: bytes, notifier: PushNotifier) -> list[PutResult]:
    """Store records a producer encoded (tidemq_protocol/codec.py), a record without a queue going to the batch's
    round-robin queue, then tell `notifier`."""
    batch_queue = next(_round_robin) % store.get_topic(topic).queues
    results = store.put_records(topic, records, batch_queue)
    notifier.messages_stored(topic)
    return results


def produce_json(store: MessageStore, topic: str, messages: list[MessageIn], notifier: PushNotifier) -> ProduceResponse:
    frames = [
        ProduceFrame(Message(m.body_bytes(), 0, tuple(m.keys), m.tag, m.properties), m.queue, m.sharding_key)
        for m in messages
    ]
    results = produce_frames(store, topic, frames, notifier)
    return ProduceResponse(
        messages=[
            PutView(msg_id=r.msg_id, queue=r.queue, offset=r.queue_offset, store_timestamp=r.store_timestamp)
            for r in results
        ]
    )
