"""Produce: route each message to a queue, then store the batch in one atomic put; recall a delay message.

After the put, the `PushNotifier` the caller gives is told the topic has new messages, and the messages' `stored`
events are recorded (trace.py).

Routing: an explicit queue wins; else a message group (a FIFO topic's messages each have one) or a sharding key
picks `crc32(key) % queues` (`key_queue`), so one group or key always lands in one queue and keeps its order; the
rest of a batch goes to one queue chosen round-robin per batch, so an unkeyed batch stays contiguous. The store
refuses a batch whose messages do not fit the topic's message type (tidemq_store/batch.py). On a DELAY topic each
message says when it is due (`delivery_time_ms` or `delay_ms`); one sent for later comes back with offset -1 and a
recall handle, which recalls it until then (tidemq_store/timer).

Idempotent sends: a batch the producer names (`send_key`: the HTTP API's Idempotency-Key header, a RocketMQ
SendMessage's message ids) is stored once for its name within the deduplication window; a send of the name again
answers the first send's results, whatever queue this routing chose this time (tidemq_store/sends.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tidemq_protocol.api.common import JSON_RESERVED_PROPERTIES
from tidemq_protocol.api.messages import MessageIn, ProduceResponse, PutView, RecallResponse
from tidemq_protocol.codec import ProduceFrame
from tidemq_protocol.errors import InvalidArgument, QueueOutOfRange
from tidemq_protocol.message import Message, key_queue
from tidemq_protocol.record import MESSAGE_GROUP, message_group_of
from tidemq_protocol.timer import delivery_properties
from tidemq_store import MessageStore, PutResult
from tidemq_store.sends import SendKey, check_send_key

from . import trace
from .notifier import PushNotifier

_round_robin = itertools.count()


def queue_for(frame: ProduceFrame, index: int, queues: int, batch_queue: int) -> int:
    """The queue of the message `frame` holds when it names none (see the module docstring)."""
    group = message_group_of(frame.message.properties)
    if group is not None and frame.sharding_key:
        raise InvalidArgument(f"message {index} has a message_group and a sharding_key: its group is its key")
    key = group if group is not None else frame.sharding_key
    return key_queue(key, queues) if key else batch_queue


def send_named(key: str | None) -> SendKey | None:
    """The send a producer named `key` (its Idempotency-Key, a RocketMQ message id), checked; None: unnamed."""
    return None if key is None else SendKey(check_send_key(key))


def produce_frames(
    store: MessageStore,
    topic: str,
    frames: Sequence[ProduceFrame],
    notifier: PushNotifier,
    send_key: str | None = None,
) -> list[PutResult]:
    """Route and store decoded messages (from JSON or the binary batch encoding), then tell `notifier`; a batch with
    `send_key` is stored once for it (tidemq_store/sends.py)."""
    config = store.get_topic(topic)
    queues = config.queues
    batch_queue = next(_round_robin) % queues
    messages = []
    for index, frame in enumerate(frames):
        message = frame.message
        if frame.queue is not None:
            if frame.queue >= queues:
                raise QueueOutOfRange(topic, frame.queue, queues)
            message.queue = frame.queue
        else:
            message.queue = queue_for(frame, index, queues, batch_queue)
        messages.append(message)
    results = store.put(topic, messages, send_named(send_key))
    trace.stored(store, config, results)
    notifier.messages_stored(topic)
    return results


def produce_records(
    store: MessageStore, topic: str, records: bytes, notifier: PushNotifier, send_key: str | None = None
) -> list[PutResult]:
    """Store records a producer encoded (tidemq_protocol/codec.py), a record without a queue going to the batch's
    round-robin queue, then tell `notifier`; `send_key` as `produce_frames` takes it."""
    config = store.get_topic(topic)
    results = store.put_records(topic, records, next(_round_robin) % config.queues, send_named(send_key))
    trace.stored(store, config, results)
    notifier.messages_stored(topic)
    return results


def json_properties(index: int, message: MessageIn) -> dict[str, str]:
    """A JSON message's properties as the record holds them: its message group and its delivery time among them."""
    reserved = next((name for name in JSON_RESERVED_PROPERTIES if name in message.properties), None)
    if reserved is not None:
        raise InvalidArgument(
            f"message {index}: property name {reserved!r} is reserved; use message_group, delivery_time_ms or delay_ms"
        )
    timing = delivery_properties(message.delivery_time_ms, message.delay_ms)
    if message.message_group is None and not timing:
        return message.properties
    grouped = {} if message.message_group is None else {MESSAGE_GROUP: message.message_group}
    return {**message.properties, **grouped, **timing}


def produce_json(
    store: MessageStore, topic: str, messages: list[MessageIn], notifier: PushNotifier, send_key: str | None = None
) -> ProduceResponse:
    frames = [
        ProduceFrame(Message(m.body_bytes(), 0, tuple(m.keys), m.tag, json_properties(i, m)), m.queue, m.sharding_key)
        for i, m in enumerate(messages)
    ]
    results = produce_frames(store, topic, frames, notifier, send_key)
    return ProduceResponse(
        messages=[
            PutView(
                msg_id=r.msg_id,
                queue=r.queue,
                offset=r.queue_offset,
                store_timestamp=r.store_timestamp,
                recall_handle=r.recall_handle,
            )
            for r in results
        ]
    )


def result_line(result: PutResult) -> str:
    """A put's result as the binary produce answers it: `msg_id queue offset`, and a recall handle after them for a
    delay message sent for later."""
    handle = f" {result.recall_handle}" if result.recall_handle is not None else ""
    return f"{result.msg_id} {result.queue} {result.queue_offset}{handle}\n"


def recall(store: MessageStore, topic: str, handle: str) -> RecallResponse:
    """Recall the delay message `handle` names (`MessageStore.recall`)."""
    recalled = store.recall(topic, handle)
    status = "already_recalled" if recalled.again else "recalled"
    return RecallResponse(msg_id=recalled.msg_id, due_ms=recalled.due_ms, status=status)
