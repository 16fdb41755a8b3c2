"""What a put on a DELAY topic becomes, for every backend: messages to append now, or timers to keep until due.

Each message of the batch (checked whole by batch.py: each says when it is due) gets its due time (`timer.due_ms`:
a delay from now, or its delivery time, within TIDEMQ_TIMER_MAX_DELAY_MS), and is encoded again with that time as
TIMER_DELIVER_MS in place of what the producer gave. If every message is due already, the batch is appended at
once, as any put. Otherwise every message of it becomes a timer (`TimerBatch`), those due already included (the
mover puts them on the topic at once), so that the put stays all or nothing in one store: each gets a timer id
(record/ids.py) and carries it as MESSAGE_ID, the id it keeps once delivered. A batch appended at once keeps the ids
its messages carry (a RocketMQ client's message id, servers/grpc_proxy/messages.py). A put of timers holds at most
MAX_TIMERS_PER_PUT messages (the serverless backend stores it with one DynamoDB transaction).

A put with an idempotency key (tidemq_store/sends.py; its digest is the batch's as the producer sent it) is stored
once either way: appended at once, by `append` with the key; kept as timers, with its key's record in the timers'
own write (`TimerStore.schedule`), a resend answered the timers' ids and recall handles and storing nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from tidemq_protocol.errors import InvalidArgument, InvalidBatch, MessageTooLarge
from tidemq_protocol.limits import MAX_TIMERS_PER_PUT
from tidemq_protocol.message import StoredMessage, tag_hash
from tidemq_protocol.record import (
    MESSAGE_ID,
    TIMER_DELAY_MS,
    TIMER_DELIVER_MS,
    PropertiesView,
    decode_records,
    encode_properties,
    encode_record,
    new_timer_id,
    properties_at,
    record_starts,
    with_message_id,
)
from tidemq_protocol.timer import due_ms, recall_handle

from ..batch import ValidatedBatch
from ..config import StoreConfig
from ..model import PutResult, TopicConfig
from ..sends import SendKey
from .api import Timer, TimerBatch, TimerIdTaken, TimerStore

PLAN_ATTEMPTS = 3
"""Plans of one put, each with fresh ids, before a taken id (TimerIdTaken) is an error."""


def put_delayed(
    timers: TimerStore,
    limits: StoreConfig,
    config: TopicConfig,
    batch: ValidatedBatch,
    append: Callable[[ValidatedBatch, SendKey | None], list[PutResult]],
    now_ms: int,
    send: SendKey | None = None,
) -> list[PutResult]:
    """Store a checked batch of a DELAY topic (see the module docstring): appended with `append` if every message
    is due, else kept in `timers`, each result with its recall handle; once for `send` (its key, with the batch's
    digest), if given."""
    messages = decode_records(batch.records)
    dues = [due_ms(m.properties, now_ms, limits.timer_max_delay_ms, i) for i, m in enumerate(messages)]
    if all(due <= now_ms for due in dues):
        return append(_encoded(limits, config, messages, batch.queues, dues, _carried_ids(batch.records)), send)
    if len(messages) > MAX_TIMERS_PER_PUT:
        raise InvalidBatch(
            f"a put of messages due later holds at most {MAX_TIMERS_PER_PUT} of them, got {len(messages)}"
        )
    # stamped no earlier than the topic was made, or a move takes them for a deleted namesake's (embedded/admin.py
    # `topic_now` says when its `created_at` runs ahead of the clock)
    scheduled_ms = max(now_ms, config.created_at)
    for attempt in range(PLAN_ATTEMPTS):
        ids = [new_timer_id(due) for due in dues]
        planned = _encoded(limits, config, messages, batch.queues, dues, ids)
        timers_kept = [_timer(planned, i, ids[i], dues[i]) for i in range(len(ids))]
        kept = TimerBatch(config.name, scheduled_ms, timers_kept, send)
        try:
            earlier = timers.schedule(kept)
        except TimerIdTaken:
            if attempt == PLAN_ATTEMPTS - 1:
                raise
            continue
        if earlier is not None:
            return earlier
        return [replace(r, recall_handle=recall_handle(config.name, r.msg_id)) for r in kept.results()]
    raise AssertionError("unreachable")


def _carried_ids(records: bytes) -> list[str | None]:
    """The id each record carries (MESSAGE_ID: one a producer gave), None where the store is to give it one."""
    return [PropertiesView(records, *properties_at(records, start)).get(MESSAGE_ID) for start in record_starts(records)]


def _timer(batch: ValidatedBatch, index: int, msg_id: str, due: int) -> Timer:
    start = sum(batch.sizes[:index])
    return Timer(msg_id, due, batch.queues[index], bytes(batch.records[start : start + batch.sizes[index]]))


def _encoded(
    limits: StoreConfig,
    config: TopicConfig,
    messages: list[StoredMessage],
    queues: Sequence[int],
    dues: list[int],
    ids: Sequence[str | None],
) -> ValidatedBatch:
    """The messages encoded again with their due times and ids (a timer's, or the one it carried), checked against
    the limits."""
    topic, records, total = config.name.encode(), [], 0
    for index, message in enumerate(messages):
        properties = {name: value for name, value in message.properties.items() if name != TIMER_DELAY_MS}
        properties[TIMER_DELIVER_MS] = str(dues[index])
        try:
            encoded = encode_properties(message.keys, message.tag, properties)
            msg_id = ids[index]
            if msg_id is not None:
                encoded = with_message_id(encoded, msg_id)
        except InvalidArgument as error:
            raise InvalidArgument(f"message {index}: {error}") from None
        size = len(message.body) + len(encoded)
        if size > limits.max_message_bytes:
            raise MessageTooLarge(
                f"message {index} is {size} bytes (body and properties, its due time and id among them); the limit"
                f" is {limits.max_message_bytes}"
            )
        record = encode_record(topic, queues[index], message.born_timestamp, encoded, message.body)
        total += len(record)
        records.append(record)
    if total > limits.max_batch_bytes:
        raise MessageTooLarge(f"the batch is {total} bytes encoded; the limit is {limits.max_batch_bytes}")
    return batch_of(records, messages, queues)


def batch_of(records: list[bytes], messages: list[StoredMessage], queues: Sequence[int]) -> ValidatedBatch:
    """A ValidatedBatch of `records` (record i holding `messages[i]`, for queue `queues[i]`)."""
    return ValidatedBatch(
        b"".join(records),
        [len(record) for record in records],
        list(queues),
        [tag_hash(m.tag) for m in messages],
        [m.keys for m in messages],
    )


def due_batch(records: list[bytes]) -> ValidatedBatch:
    """The records of due timers as a batch to append (each to the queue its record names)."""
    messages = decode_records(b"".join(records))
    return batch_of(records, messages, [m.queue for m in messages])
