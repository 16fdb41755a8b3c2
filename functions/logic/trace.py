"""Message trace, recorded by the broker: what happened to each message, kept in the system topic `%TRACE%`.

RocketMQ records send and consume spans in `RMQ_SYS_TRACE_TOPIC` only when the client enabled tracing, which is
why its users so often find traces empty. TideMQ records on the server, in the logic layer every protocol goes
through (HTTP handlers, the gRPC proxy, push delivery), always, unless `TIDEMQ_TRACE_ENABLED=false` or the
message's topic opts out with the attribute `trace.enabled=false` (within trace_writer.TOPIC_CACHE_S).

Events (tidemq_protocol.api.trace.TraceEventKind): stored (queue, offset, store time, the producer's user and
address), delivered and retried (per group: pop or push, with the attempt), acked, nacked, invisible_changed,
dead_lettered (with the letter's id), resent (with the new message's id). Not recorded: pulls by offset (they have
no group). Derived when a trace is read, from the store's state, not recorded (`derived_events`): tiered (moved to
the cold tier), expired, compacted.

Format: `%TRACE%` (one queue, `cleanup.policy=COMPACTION`, retention TIDEMQ_TRACE_RETENTION_MS) holds **runs**: the
messages of one batch at consecutive offsets of one queue with the same values are one run. A flush writes the runs
of one kind of batch, event, topic, group and shared attributes as one record (cut at KEYS_MOST buckets), so a flush
of thousands of events is a few records, and the writer's work is a short loop a message (bench/trace.py measures
what it costs). Its tag is the event's kind; its body a JSON object, version 1:
    {"v": 1, "event": "<kind>",
     "attributes": {"<name>": <str | int>, ...},     # what every event of the record shares
     "fields": ["<name>", ...],                      # the names of each run's own values
     "runs": [[<queue>, <first offset>, <last offset>, <time_unix_nano>, <value>, ...], ...]}
An event of one message is the record's `attributes`, its run's time and `fields`, its queue
(`messaging.destination.partition.id`), offset (`tidemq.queue.offset`) and id (`messaging.message.id`, from the
message looked up). Attribute names are OpenTelemetry's messaging conventions' (`messaging.system`,
`messaging.operation.type`, `messaging.destination.name`, `messaging.destination.partition.id`,
`messaging.consumer.group.name`, `messaging.message.id`, `enduser.id`, `client.address`), `tidemq.*` where they have
none. Its keys:
  1. the record's identity, `<topic>/<event>/<group>/<first run's time>/<part>`: the Spark key compaction keeps the
     newest message of a record's first key, so it keeps every record (each is its own) and drops one written twice;
  2. then every **bucket** its runs touch, `<topic>@<queue>@<offset // BUCKET_OFFSETS>`: what a trace is looked up by.
A message id is resolved to its topic, queue and offset by `MessageStore.message_by_id`, then its bucket's records by
key 2 (at most EVENTS_MOST records a bucket are read): two indexed lookups on either backend, sharing the store, the
cold tier and the Spark jobs with every topic. So a trace is found while its message is.

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

import base64
import contextlib
import json
import threading
import time
import weakref
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple

from shared.settings import get_settings
from tidemq_protocol.api.trace import MessageTrace, TraceEvent, TraceEventKind
from tidemq_protocol.attributes import TopicPolicy
from tidemq_protocol.errors import MessageNotFound, OffsetOutOfRange, TopicNotFound
from tidemq_protocol.message import Message, StoredMessage
from tidemq_store import MessageStore, PutResult, TopicConfig
from tidemq_store.pop.api import HANDLE, Settled
from tidemq_store.pop.receive import Popped

from .trace_writer import Pending, TraceRecorder

TRACE_TOPIC = "%TRACE%"
"""The system topic of trace records (`%DLQ%<group>`, `%KV%<namespace>` are its siblings)."""
FORMAT_VERSION = 1
BUCKET_OFFSETS = 256
"""Offsets of one queue whose records share a key (key 2): small enough that a bucket of messages sent, received and
acked one a flush (three records a message) fits one lookup of EVENTS_MOST; large enough that a flush keys few
(every key is an index entry the store writes, holding the GIL)."""
YIELD_EVERY = 8
"""Batches the writer encodes between offers of the GIL: the requests it would hold up are the ones being traced."""
KEYS_MOST = 256
"""Buckets one record is keyed by at most (the keys are a record's property: at most 32 KiB of them)."""
EVENTS_MOST = 1000
"""Records of one bucket a trace reads at most (the newest; `MessageStore.messages_by_key`'s page limit)."""
TOPIC_ATTRIBUTES = {TopicPolicy.CLEANUP: "COMPACTION", TopicPolicy.TRACE: "false"}

# OpenTelemetry's messaging attribute names (semantic conventions 1.x) and TideMQ's own.
SYSTEM, OPERATION, DESTINATION = "messaging.system", "messaging.operation.type", "messaging.destination.name"
PARTITION, GROUP = "messaging.destination.partition.id", "messaging.consumer.group.name"
MESSAGE_ID = "messaging.message.id"
USER, ADDRESS = "enduser.id", "client.address"
OFFSET, STORE_TIME, ATTEMPT = "tidemq.queue.offset", "tidemq.store.timestamp_ms", "tidemq.delivery.attempt"
METHOD, INVISIBLE_UNTIL = "tidemq.delivery.method", "tidemq.invisible_until_ms"
DEAD_LETTER_ID, RESENT_ID = "tidemq.dead_letter.message.id", "tidemq.resent.message.id"
TIER_MEDIUM, DERIVED = "tidemq.tier.medium", "tidemq.trace.derived"

OPERATIONS = {
    TraceEventKind.STORED: "send",
    TraceEventKind.DELIVERED: "receive",
    TraceEventKind.RETRIED: "receive",
    TraceEventKind.ACKED: "settle",
    TraceEventKind.NACKED: "settle",
    TraceEventKind.INVISIBLE_CHANGED: "settle",
    TraceEventKind.DEAD_LETTERED: "send",
    TraceEventKind.RESENT: "send",
}
"""`messaging.operation.type` of each event, as the conventions define them (send, receive, settle)."""


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


# ---- the record format: rows of what waits, records of rows ---------------------------------------

Row = tuple[TraceEventKind, int, int, int, tuple[Any, ...]]  # (event, queue, first, last offset, `fields`' values)


def _rows(pending: Pending) -> tuple[list[str], Iterable[Row]]:
    """The fields and rows of one batch's events, one row a message, or a run of them (see the module docstring)."""
    kind, items = pending.kind, pending.items
    if kind == "stored":
        stored, numbers = TraceEventKind.STORED, iter(items)  # runs (queue, first, last, store time): `stored_runs`
        quads = zip(numbers, numbers, numbers, numbers, strict=True)
        return [STORE_TIME], ((stored, queue, first, last, (at,)) for queue, first, last, at in quads if first >= 0)
    if kind == "pop":
        delivered, retried, numbers = TraceEventKind.DELIVERED, TraceEventKind.RETRIED, iter(items)
        triples = zip(numbers, numbers, numbers, strict=True)  # (queue, offset, attempt) a message
        return [ATTEMPT], ((delivered if n <= 1 else retried, q, f, last, (n,)) for q, f, last, n in _merged(triples))
    if kind == "push":
        event = TraceEventKind.DELIVERED if pending.common[ATTEMPT] <= 1 else TraceEventKind.RETRIED
        numbers = iter(items)
        return [], ((event, queue, offset, offset, ()) for queue, offset in zip(numbers, numbers, strict=True))
    if kind == TraceEventKind.DEAD_LETTERED:
        lettered = TraceEventKind.DEAD_LETTERED
        return [DEAD_LETTER_ID], (
            (lettered, m.queue, m.queue_offset, m.queue_offset, (letter.msg_id,)) for m, letter in items
        )
    if kind == TraceEventKind.RESENT:
        resent = TraceEventKind.RESENT
        return [RESENT_ID], ((resent, queue, offset, offset, (new_id,)) for _, queue, offset, _, new_id in items)
    # settlements (acked, nacked, invisible_changed) of handles that settled a delivery, so each is a receipt's 28
    # characters (pop/api.py HANDLE): decoded in one call rather than one `Receipt.of` each
    event = TraceEventKind(kind)
    receipts = ((queue, offset, 0) for _, queue, offset, _ in HANDLE.iter_unpack(base64.urlsafe_b64decode(items)))
    return [], ((event, queue, first, last, ()) for queue, first, last, _ in _merged(receipts))


def _merged(triples: Iterable[tuple[int, int, int]]) -> Iterator[tuple[int, int, int, int]]:
    """`(queue, offset, value)` a message as runs `(queue, first, last, value)` of consecutive offsets with one value:
    the flusher's loop a message, kept to a few comparisons (a receive's deliveries are mostly one run)."""
    queue = first = last = value = -1
    for q, offset, v in triples:
        if offset == last + 1 and q == queue and v == value:
            last = offset
            continue
        if first >= 0:
            yield queue, first, last, value
        queue, first, last, value = q, offset, offset, v
    if first >= 0:
        yield queue, first, last, value


@dataclass(slots=True)
class _Record:
    """A record being built: runs `[queue, first, last, time_unix_nano, value...]` of one kind of batch, event,
    topic, group and shared attributes."""

    pending: Pending
    event: TraceEventKind
    fields: list[str]
    runs: list[list[Any]]


def encode(waiting: list[Pending]) -> list[Message]:
    """The `%TRACE%` messages of what waits: each run of consecutive offsets of one batch with the same values is
    one run, and the runs of one kind of batch, event, topic, group and shared attributes share records, each
    keyed by every bucket its runs touch (at most KEYS_MOST; see the module docstring)."""
    records: dict[tuple[Any, ...], _Record] = {}
    for index, pending in enumerate(waiting):
        if index % YIELD_EVERY == YIELD_EVERY - 1:
            time.sleep(0)  # let a request thread back from its I/O take the GIL now rather than after 5 ms
        fields, rows = _rows(pending)
        at, shared, time_unix_nano = None, tuple(sorted(pending.common.items())), pending.time_unix_nano
        run, values_of_run, record = [-1, -2, -2], None, None
        for event, queue, offset, last, values in rows:
            if event is at and queue == run[0] and offset == run[2] + 1 and values == values_of_run:
                run[2] = last
                continue
            if event is not at:
                key = (pending.kind, event, pending.topic, pending.group, shared)
                record = records.get(key)
                if record is None:
                    record = records[key] = _Record(pending, event, fields, [])
                at = event
            run, values_of_run = [queue, offset, last, time_unix_nano, *values], values
            assert record is not None
            record.runs.append(run)
    return [message for record in records.values() for message in _messages(record)]


def _messages(record: _Record) -> list[Message]:
    """`record`'s messages: its runs cut so that each message has at most KEYS_MOST buckets."""
    messages, runs, buckets = [], [], set()
    for run in record.runs:
        queue = run[0]
        mine = {(queue, bucket) for bucket in range(run[1] // BUCKET_OFFSETS, run[2] // BUCKET_OFFSETS + 1)}
        if runs and len(buckets | mine) > KEYS_MOST:
            messages.append(_message(record, runs, buckets, len(messages)))
            runs, buckets = [], set()
        runs.append(run)
        buckets |= mine
    if runs:
        messages.append(_message(record, runs, buckets, len(messages)))
    return messages


def _message(record: _Record, runs: list[list[Any]], buckets: set[tuple[int, int]], part: int) -> Message:
    pending, event = record.pending, record.event
    attributes = {
        SYSTEM: "tidemq",
        OPERATION: OPERATIONS[event],
        DESTINATION: pending.topic,
        **({} if pending.group is None else {GROUP: pending.group}),
        **pending.common,
    }
    body = {"v": FORMAT_VERSION, "event": event, "attributes": attributes, "fields": record.fields, "runs": runs}
    identity = f"{pending.topic}/{event}/{pending.group or ''}/{runs[0][3]}/{part}"
    keys = (identity, *(bucket_key(pending.topic, queue, bucket) for queue, bucket in sorted(buckets)))
    return Message(json.dumps(body, separators=(",", ":")).encode(), 0, keys, str(event))


def bucket_key(topic: str, queue: int, bucket: int) -> str:
    """The key of the records with events of `topic`:`queue`'s offsets [bucket, bucket + 1) * BUCKET_OFFSETS."""
    return f"{topic}@{queue}@{bucket}"


@dataclass(frozen=True, slots=True)
class Event:
    """One message's event, as read back from a record."""

    identity: str
    event: TraceEventKind
    time_unix_nano: int
    attributes: dict[str, Any]

    def view(self) -> TraceEvent:
        return TraceEvent.model_construct(
            event=self.event, time_unix_nano=self.time_unix_nano, attributes=self.attributes
        )


def events_of(message: StoredMessage, found: Traced) -> list[Event]:
    """The events of the message `found` one `%TRACE%` message holds (none if it holds no record this version
    reads)."""
    try:
        body = json.loads(message.body)
        if body.get("v") != FORMAT_VERSION or body["attributes"][DESTINATION] != found.topic:
            return []
        event, fields, queue, offset = TraceEventKind(body["event"]), body["fields"], found.queue, found.queue_offset
        mine = {**body["attributes"], PARTITION: str(queue), OFFSET: offset, MESSAGE_ID: found.msg_id}
        return [
            Event(f"{message.keys[0]}#{index}", event, run[3], {**mine, **dict(zip(fields, run[4:], strict=True))})
            for index, run in enumerate(body["runs"])
            if run[0] == queue and run[1] <= offset <= run[2]
        ]
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        return []


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


class Traced(NamedTuple):
    """The message a trace is of: where it is (or was) and its id."""

    msg_id: str
    topic: str
    queue: int
    queue_offset: int


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
