"""Message trace, recorded by the broker: what happened to each message, kept in the system topic `%TRACE%`.

RocketMQ records send and consume spans in `RMQ_SYS_TRACE_TOPIC` only when the client enabled tracing, which is
why its users so often find traces empty. TideMQ records on the server, in the logic layer every protocol goes
through (HTTP handlers, the gRPC proxy, push delivery), always, unless `TIDEMQ_TRACE_ENABLED=false` or the
message's topic opts out with the attribute `trace.enabled=false` (within trace_writer.TOPIC_CACHE_S).

Events (tidemq_protocol.api.trace.TraceEventKind): stored (queue, offset, store time, the producer's user and
address), delivered and retried (per group: pop or push, with the attempt), acked, nacked, invisible_changed,
dead_lettered (with the letter's id), resent (with the new message's id). Not recorded: pulls by offset (they have
no group). Derived when a trace is read, from the store's state, not recorded (`derived_events`): tiered (moved to
the cold tier), expired, compacted. The records' format, their keys and how a trace is looked up: trace_records.py.

Cost and durability: a request hands its batch's queues and offsets (an array of ints; an ack its joined handles) to
the store's `TraceRecorder` (trace_writer.py: one append), and a flusher thread encodes and puts them every
TIDEMQ_TRACE_FLUSH_MS. Trace records are therefore less durable than
messages: a crash loses up to one flush interval of events, and in Lambda the buffer waits for the next invocation of
the same environment (and is lost if the environment is reaped). A `stored` event is never lost while its message
lives: a trace that has none is given one made from the message itself (without the producer). Reading a trace
flushes this process's buffer first, so a process reads its own events. Events are ordered by the time they were
recorded (ns since the epoch; across processes as far as their clocks agree).
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from array import array
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from shared.settings import get_settings
from tidemq_protocol.api.trace import MessageTrace, TraceEventKind
from tidemq_protocol.attributes import TopicPolicy
from tidemq_protocol.errors import MessageNotFound, OffsetOutOfRange, TopicNotFound
from tidemq_protocol.message import StoredMessage
from tidemq_store import MessageStore, PutResult, TopicConfig
from tidemq_store.pop.api import Settled
from tidemq_store.pop.receive import Popped

from .trace_records import (
    ADDRESS,
    ATTEMPT,
    BUCKET_OFFSETS,
    DERIVED,
    DESTINATION,
    MESSAGE_ID,
    METHOD,
    OFFSET,
    OPERATION,
    OPERATIONS,
    PARTITION,
    STORE_TIME,
    SYSTEM,
    TIER_MEDIUM,
    USER,
    Event,
    Traced,
    bucket_key,
    encode,
    events_of,
)
from .trace_writer import Pending, TraceRecorder

TRACE_TOPIC = "%TRACE%"
"""The system topic of trace records (`%DLQ%<group>`, `%KV%<namespace>` are its siblings)."""
EVENTS_MOST = 1000
"""Records of one bucket a trace reads at most (the newest; `MessageStore.messages_by_key`'s page limit)."""
TOPIC_ATTRIBUTES = {TopicPolicy.CLEANUP: "COMPACTION", TopicPolicy.TRACE: "false"}


# ---- who is producing -------------------------------------------------------------------------------

_actor: ContextVar[dict[str, str | int]] = ContextVar("tidemq_trace_actor", default={})  # noqa: B039 (never changed)


@contextlib.contextmanager
def acting_as(user: str, address: str | None) -> Iterator[None]:
    """Record `user` (from `address`) as the producer of what is stored in this context (the API's caller)."""
    token = _actor.set({USER: user} | ({ADDRESS: address} if address else {}))
    try:
        yield
    finally:
        _actor.reset(token)


clock = time.time_ns
"""When an event happened: ns since the epoch (events of one message are microseconds apart at least)."""


# ---- what the logic layer records (one append a batch) ----------------------------------------------


def traced(config: TopicConfig) -> bool:
    """Whether events of `config`'s messages are recorded: trace is on and the topic does not opt out."""
    return (
        get_settings().trace_enabled
        and config.attributes.get(TopicPolicy.TRACE) != "false"
        and config.name != TRACE_TOPIC
    )


def _add(store: MessageStore, kind: str, topic: str, group: str | None, items: Any, events: int, **common: Any) -> None:
    if not events:
        return
    found = recorder(store)
    if found.topic_traced(topic, traced):
        found.add(Pending(kind, clock(), topic, group, items, events, common))


def stored(store: MessageStore, config: TopicConfig, results: Sequence[PutResult]) -> None:
    """Messages a produce (or a resend) stored on `config`'s topic, by the caller `acting_as` says; a timer message
    (offset -1, not on its queue yet) is not recorded."""
    if results and traced(config):
        recorder(store).add(
            Pending("stored", clock(), config.name, None, stored_runs(results), len(results), _actor.get())
        )


def stored_runs(results: Sequence[PutResult]) -> array[int]:
    """A put's results as runs `(queue, first offset, last offset, store time)`: most puts are one run (one queue, one
    store time), told from the first and last result alone (a put's messages of one queue have consecutive offsets,
    so n results spanning n offsets of the first one's queue are all on it), so a produce pays no loop a message."""
    first, last = results[0], results[-1]
    if (
        last.queue_offset - first.queue_offset == len(results) - 1
        and first.queue == last.queue
        and first.store_timestamp == last.store_timestamp  # a put's store times never decrease
        and first.queue_offset >= 0
    ):
        return array("q", (first.queue, first.queue_offset, last.queue_offset, first.store_timestamp))
    return array("q", [v for r in results for v in (r.queue, r.queue_offset, r.queue_offset, r.store_timestamp)])


def delivered_by_pop(store: MessageStore, group: str, topic: str, popped: Sequence[Popped]) -> None:
    """Pop deliveries to `group`: attempt 1 is `delivered`, a later one `retried`."""
    items = array("q", [v for p in popped for v in (p.message.queue, p.message.queue_offset, p.attempt)])
    _add(store, "pop", topic, group, items, len(popped), **{METHOD: "pop"})


def delivered_by_push(
    store: MessageStore, group: str, topic: str, messages: Sequence[StoredMessage], attempt: int
) -> None:
    """A push delivery (a call of the group's target) of `messages`, its `attempt`th."""
    items = array("q", [v for m in messages for v in (m.queue, m.queue_offset)])
    _add(store, "push", topic, group, items, len(messages), **{METHOD: "push", ATTEMPT: attempt})


def acked(store: MessageStore, group: str, topic: str, handles: Sequence[str], settled: Sequence[Settled]) -> None:
    """Acks of `group`: those that settled a delivery are recorded (their handles, joined: one `str`)."""
    done = [handle for handle, result in zip(handles, settled, strict=True) if result is Settled.DONE]
    _add(store, TraceEventKind.ACKED, topic, group, "".join(done), len(done))


def settled(store: MessageStore, group: str, topic: str, event: TraceEventKind, handle: str, **more: int) -> None:
    """A delivery of `group` nacked or its invisible time changed, by the handle it had."""
    _add(store, event, topic, group, handle, 1, **more)


def dead_lettered(
    store: MessageStore, group: str, messages: Sequence[StoredMessage], letters: Sequence[PutResult], attempts: int
) -> None:
    """Messages put to `group`'s dead letters after `attempts` deliveries, as `letters`."""
    for topic in {message.topic for message in messages}:
        mine = [(m, letter) for m, letter in zip(messages, letters, strict=True) if m.topic == topic]
        _add(store, TraceEventKind.DEAD_LETTERED, topic, group, mine, len(mine), **{ATTEMPT: attempts})


def resent(store: MessageStore, group: str, origins: Sequence[tuple[str, int, int, str, str]]) -> None:
    """Dead letters of `group` resent: per letter its origin (topic, queue, offset, message id) and the new id."""
    for topic in {origin[0] for origin in origins}:
        mine = [origin for origin in origins if origin[0] == topic]
        _add(store, TraceEventKind.RESENT, topic, group, mine, len(mine))


# ---- the recorder of a store ------------------------------------------------------------------------

_recorders: weakref.WeakKeyDictionary[MessageStore, TraceRecorder] = weakref.WeakKeyDictionary()
_recorders_lock = threading.Lock()


def recorder(store: MessageStore) -> TraceRecorder:
    """The store's recorder, made at first use from the settings."""
    found = _recorders.get(store)
    if found is None:
        with _recorders_lock:
            found = _recorders.get(store)
            if found is None:
                settings = get_settings()
                topic = TopicConfig(
                    name=TRACE_TOPIC, queues=1, retention_ms=settings.trace_retention_ms, attributes=TOPIC_ATTRIBUTES
                )
                found = TraceRecorder(
                    store,
                    encode,
                    topic,
                    settings.trace_flush_ms,
                    settings.trace_buffer_events,
                    settings.max_batch_messages,
                    settings.max_batch_bytes // 2,  # the bodies' sum; keys and headers fit the rest
                )
                _recorders[store] = found
    return found


# ---- reading a trace --------------------------------------------------------------------------------


def message_trace(store: MessageStore, msg_id: str) -> MessageTrace:
    """The trace of the message `msg_id` names, oldest event first, then what the store's state shows of it now
    (`derived_events`). MessageNotFound if the store knows no such message, nor where it was. This process's waiting
    events are written first."""
    recorder(store).flush()
    try:
        message: StoredMessage | None = store.message_by_id(msg_id)
    except MessageNotFound as error:
        if error.gone_from is None:
            raise
        message, place = None, error.gone_from
        found = Traced(msg_id, place.topic, place.queue, place.offset)
    else:
        found = Traced(message.msg_id, message.topic, message.queue, message.queue_offset)
    topic, queue, offset = found.topic, found.queue, found.queue_offset
    try:
        records = store.messages_by_key(TRACE_TOPIC, bucket_key(topic, queue, offset // BUCKET_OFFSETS), EVENTS_MOST)
    except TopicNotFound:  # nothing was ever traced
        records = []
    unique = {event.identity: event for record in records for event in events_of(record, found)}
    events = _first_stored_only(sorted(unique.values(), key=lambda event: event.time_unix_nano))
    is_traced = _still_traced(store, topic)
    if message is not None and is_traced and not any(event.event is TraceEventKind.STORED for event in events):
        events.insert(0, _stored_from(message))
    derived = derived_events(store, found, gone=message is None) if is_traced else []
    return MessageTrace(
        msg_id=found.msg_id,
        topic=topic,
        events=[event.view() for event in events + derived],
        note=_note(topic, is_traced, len(events), gone=message is None),
    )


def _first_stored_only(events: list[Event]) -> list[Event]:
    """`events` with one `stored` event, the first: a send answered again (an idempotent send's retry) records its
    batch again, but stored it once (tidemq_store/sends.py)."""
    stored = [event for event in events if event.event is TraceEventKind.STORED]
    return [event for event in events if event.event is not TraceEventKind.STORED or event is stored[0]]


def derived_events(store: MessageStore, found: Traced, gone: bool) -> list[Event]:
    """What the store's state shows of the message now, as events of the read's time marked DERIVED (no job records
    them: the tier keeps no time a message, retention and compaction drop whole files): `tiered` if the cold tier's
    range holds its offset; if it is gone from its queue (`gone`), `compacted` if a read at its offset goes on past
    it (key compaction left an empty entry there), else `expired` unless the cold tier holds it."""
    now, events = clock(), []
    topic, queue, offset = found.topic, found.queue, found.queue_offset
    base = {SYSTEM: "tidemq", DESTINATION: topic, PARTITION: str(queue), OFFSET: offset, MESSAGE_ID: found.msg_id}
    try:
        tier = store.tier_status(topic)[queue]
        in_tier = tier.cold_min_offset is not None and tier.cold_min_offset <= offset < (tier.cold_max_offset or 0)
        if in_tier:
            medium = {TIER_MEDIUM: store.tier_medium} if store.tier_medium else {}
            events.append(Event("", TraceEventKind.TIERED, now, {**base, **medium, DERIVED: 1}))
        if gone and _passed_by_a_read(store, found):
            events.append(Event("", TraceEventKind.COMPACTED, now, {**base, DERIVED: 1}))
        elif gone and not in_tier:
            events.append(Event("", TraceEventKind.EXPIRED, now, {**base, DERIVED: 1}))
    except (TopicNotFound, IndexError):  # deleted meanwhile
        return []
    return events


def _passed_by_a_read(store: MessageStore, found: Traced) -> bool:
    """Whether a read at the message's offset finds a later message first (its entry emptied by key compaction)."""
    try:
        read = store.get(found.topic, found.queue, found.queue_offset, 1)
    except OffsetOutOfRange:
        return False
    return bool(read.messages) and read.messages[0].queue_offset > found.queue_offset


def _still_traced(store: MessageStore, topic: str) -> bool | None:
    """Whether the topic is traced now (None: it is gone)."""
    try:
        return traced(store.get_topic(topic))
    except TopicNotFound:
        return None


def _stored_from(message: StoredMessage) -> Event:
    """The `stored` event a message itself shows (its record was lost with a flush: see the module docstring)."""
    attributes = {
        SYSTEM: "tidemq",
        OPERATION: OPERATIONS[TraceEventKind.STORED],
        DESTINATION: message.topic,
        PARTITION: str(message.queue),
        OFFSET: message.queue_offset,
        MESSAGE_ID: message.msg_id,
        STORE_TIME: message.store_timestamp,
    }
    return Event("", TraceEventKind.STORED, message.store_timestamp * 1_000_000, attributes)


def _note(topic: str, is_traced: bool | None, events: int, gone: bool = False) -> str | None:
    """Why a trace is empty or short, if it may be."""
    if not get_settings().trace_enabled:
        return "trace is off on this server (TIDEMQ_TRACE_ENABLED=false): events are not recorded"
    if is_traced is None:
        return f"topic {topic!r} no longer exists"
    if not is_traced:
        return f"topic {topic!r} opts out of trace ({TopicPolicy.TRACE}=false): its events are not recorded"
    if gone and not events:
        return "the message is gone from its queue, and so are its trace records (their retention passed them)"
    if events <= 1:
        return "only the message's storing is recorded: no group has received it yet (or its records expired)"
    return None
