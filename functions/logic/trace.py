"""Message trace, recorded by the broker: what happened to each message, kept in the system topic `%TRACE%`.

RocketMQ records send and consume spans in `RMQ_SYS_TRACE_TOPIC` only when the client enabled tracing, which is
why its users so often find traces empty. TideMQ records on the server, in the logic layer every protocol goes
through (HTTP handlers, the gRPC proxy, push delivery), always, unless `TIDEMQ_TRACE_ENABLED=false` or the
message's topic opts out with the attribute `trace.enabled=false`.

Events (tidemq_protocol.api.trace.TraceEventKind): stored (queue, offset, store time, the producer's user and
address), delivered and retried (per group: pop or push, with the attempt), acked, nacked, invisible_changed,
dead_lettered (with the letter's id), resent (with the new message's id). Not recorded (yet): pulls by offset (they
have no group), expiry, key compaction and the move to the cold tier; a message's tier is its queue's
(`tidemq topic tier`).

Format: one message of `%TRACE%` (one queue, `cleanup.policy=COMPACTION`, retention TIDEMQ_TRACE_RETENTION_MS) per
event. Its tag is the event's kind; its body a JSON object, version 1:
    {"v": 1, "event": "<kind>", "time_unix_nano": <int>, "attributes": {"<name>": <str | int>, ...}}
with attribute names from OpenTelemetry's messaging conventions (`messaging.system`, `messaging.operation.type`,
`messaging.destination.name`, `messaging.destination.partition.id`, `messaging.consumer.group.name`,
`messaging.message.id`, `enduser.id`, `client.address`) and `tidemq.*` for the rest. Its keys:
  1. the event's identity, `<position>/<event>/<group>/<attempt or delivery>` (a settlement's delivery: its
     receipt's nonce): the Spark key compaction (which keeps the newest message of a record's first key) keeps one
     record of each event, so a record written twice is kept once while the history stays whole;
  2. the message's position, `<topic>@<queue>@<offset>`: what every later event knows (an ack knows its receipt
     handle, i.e. the queue and offset, not the id), and what a trace is looked up by;
  3. on `stored` only, the message id: a trace whose message is gone (retention) still finds its position.
A message id is resolved to its position by `MessageStore.message_by_id` (else by key 3), and the events by key 2:
two indexed lookups on either backend, sharing the store, the cold tier and the Spark jobs with every topic.

Cost and durability: events are buffered in memory per store (`TraceRecorder`) and written by a flusher thread in one
put per TIDEMQ_TRACE_FLUSH_MS (at most TIDEMQ_TRACE_BUFFER_EVENTS held; past that new events are dropped and
counted), so a produce or a receive pays for building a small record, never for a put. Trace records are therefore
less durable than messages: a crash loses up to one flush interval of events, and in Lambda the buffer waits for the
next invocation of the same environment (and is lost if the environment is reaped). A `stored` event is never lost
while its message lives: a trace that has none is given one made from the message itself (without the producer).
Reading a trace flushes this process's buffer first, so a process reads its own events. Events are ordered by
time (ns; strictly increasing within one process, across processes as their clocks agree).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from shared.settings import get_settings
from tidemq_protocol.api.trace import MessageTrace, TraceEvent, TraceEventKind
from tidemq_protocol.attributes import TopicPolicy
from tidemq_protocol.errors import MessageNotFound, TopicExists, TopicNotFound
from tidemq_protocol.message import Message, StoredMessage
from tidemq_store import MessageStore, PutResult, TopicConfig
from tidemq_store.errors import StoreClosed
from tidemq_store.pop.api import Receipt

TRACE_TOPIC = "%TRACE%"
"""The system topic of trace records (`%DLQ%<group>`, `%KV%<namespace>` are its siblings)."""
FORMAT_VERSION = 1
EVENTS_MOST = 1000
"""Events one trace shows at most (the newest; `MessageStore.messages_by_key`'s page limit)."""
TOPIC_ATTRIBUTES = {TopicPolicy.CLEANUP: "COMPACTION", TopicPolicy.TRACE: "false"}

# OpenTelemetry's messaging attribute names (semantic conventions 1.x) and TideMQ's own.
SYSTEM, OPERATION, DESTINATION = "messaging.system", "messaging.operation.type", "messaging.destination.name"
PARTITION, GROUP = "messaging.destination.partition.id", "messaging.consumer.group.name"
MESSAGE_ID = "messaging.message.id"
USER, ADDRESS = "enduser.id", "client.address"
OFFSET, STORE_TIME, ATTEMPT = "tidemq.queue.offset", "tidemq.store.timestamp_ms", "tidemq.delivery.attempt"
METHOD, INVISIBLE_UNTIL = "tidemq.delivery.method", "tidemq.invisible_until_ms"
DELIVERY = "tidemq.delivery.id"  # which delivery a settlement settled (its receipt's nonce, in hex)
DEAD_LETTER_ID, RESENT_ID, REASON = "tidemq.dead_letter.message.id", "tidemq.resent.message.id", "tidemq.reason"

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

log = logging.getLogger("tidemq.trace")


# ---- who is producing -------------------------------------------------------------------------------

_actor: ContextVar[tuple[str, str | None] | None] = ContextVar("tidemq_trace_actor", default=None)


@contextlib.contextmanager
def acting_as(user: str, address: str | None) -> Iterator[None]:
    """Record `user` (from `address`) as the producer of what is stored in this context (the API's caller)."""
    token = _actor.set((user, address))
    try:
        yield
    finally:
        _actor.reset(token)


# ---- the record format ------------------------------------------------------------------------------


def position_key(topic: str, queue: int, offset: int) -> str:
    """The key every event of the message at `topic`:`queue`:`offset` carries (key 2, see the module docstring)."""
    return f"{topic}@{queue}@{offset}"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One event of one message, as `%TRACE%` keeps it."""

    event: TraceEventKind
    time_unix_nano: int
    topic: str
    queue: int
    offset: int
    attributes: dict[str, str | int]

    @property
    def identity(self) -> str:
        group, which = self.attributes.get(GROUP, ""), self.attributes.get(ATTEMPT, self.attributes.get(DELIVERY, 0))
        return f"{position_key(self.topic, self.queue, self.offset)}/{self.event}/{group}/{which}"

    def message(self) -> Message:
        """The `%TRACE%` message holding this record."""
        keys = (self.identity, position_key(self.topic, self.queue, self.offset))
        if self.event is TraceEventKind.STORED:
            keys += (str(self.attributes[MESSAGE_ID]),)
        body = {"v": FORMAT_VERSION, "event": self.event, "time_unix_nano": self.time_unix_nano}
        return Message(json.dumps({**body, "attributes": self.attributes}).encode(), 0, keys, str(self.event))

    def view(self) -> TraceEvent:
        return TraceEvent.model_construct(
            event=self.event, time_unix_nano=self.time_unix_nano, attributes=self.attributes
        )


def decode_record(message: StoredMessage) -> TraceRecord | None:
    """The record a `%TRACE%` message holds (None: not one this version reads)."""
    try:
        body = json.loads(message.body)
        if body.get("v") != FORMAT_VERSION:
            return None
        attributes = body["attributes"]
        return TraceRecord(
            TraceEventKind(body["event"]),
            int(body["time_unix_nano"]),
            attributes[DESTINATION],
            int(attributes[PARTITION]),
            int(attributes[OFFSET]),
            attributes,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class _Clock:
    """Nanoseconds since the epoch, strictly increasing in this process (events recorded in one order sort so)."""

    def __init__(self) -> None:
        self._lock, self._last = threading.Lock(), 0

    def __call__(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return self._last


clock = _Clock()


# ---- the buffered writer ----------------------------------------------------------------------------


class TraceRecorder:
    """A store's trace records waiting to be put, and the flusher thread that puts them (see the module docstring).
    The thread runs only while records wait, so a closed store leaves none behind."""

    def __init__(self, store: MessageStore, flush_ms: int, buffer_events: int, retention_ms: int) -> None:
        self.store, self.flush_s, self.buffer_events = store, flush_ms / 1000, buffer_events
        self.retention_ms = retention_ms
        self._waiting: list[Message] = []
        self._lock, self._putting = threading.Lock(), threading.Lock()
        self._flusher: threading.Thread | None = None
        self.dropped = 0

    def add(self, records: Iterable[TraceRecord]) -> None:
        messages = [record.message() for record in records]
        with self._lock:
            room = self.buffer_events - len(self._waiting)
            if room < len(messages):
                self.dropped += len(messages) - max(room, 0)
                messages = messages[: max(room, 0)]
            self._waiting += messages
            if self._flusher is None and self._waiting:
                self._flusher = threading.Thread(target=self._flush_while_waiting, name="trace-flush", daemon=True)
                self._flusher.start()

    def _flush_while_waiting(self) -> None:
        while True:
            time.sleep(self.flush_s)
            self.flush()
            with self._lock:
                if not self._waiting:
                    self._flusher = None
                    return

    def flush(self) -> None:
        """Put every record waiting now, in one put (dropped, and logged, if the put fails)."""
        with self._putting:
            with self._lock:
                messages, self._waiting = self._waiting, []
            if not messages:
                return
            try:
                self._put(messages)
            except StoreClosed:
                pass
            except Exception:  # trace is weaker than messages: it never fails what it records
                log.exception("dropped %d trace records", len(messages))

    def _put(self, messages: list[Message]) -> None:
        try:
            self.store.put(TRACE_TOPIC, messages)
        except TopicNotFound:
            retention = self.retention_ms
            config = TopicConfig(name=TRACE_TOPIC, queues=1, retention_ms=retention, attributes=TOPIC_ATTRIBUTES)
            with contextlib.suppress(TopicExists):
                self.store.create_topic(config)
            self.store.put(TRACE_TOPIC, messages)


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
                found = TraceRecorder(
                    store, settings.trace_flush_ms, settings.trace_buffer_events, settings.trace_retention_ms
                )
                _recorders[store] = found
    return found


def traced(config: TopicConfig) -> bool:
    """Whether events of `config`'s messages are recorded: trace is on and the topic does not opt out."""
    return (
        get_settings().trace_enabled
        and config.attributes.get(TopicPolicy.TRACE) != "false"
        and config.name != TRACE_TOPIC
    )


def _topic_traced(store: MessageStore, topic: str) -> bool:
    try:
        return traced(store.cached_topic(topic))
    except TopicNotFound:
        return False


def _attributes(event: TraceEventKind, topic: str, queue: int, offset: int, **more: str | int) -> dict[str, str | int]:
    return {
        SYSTEM: "tidemq",
        OPERATION: OPERATIONS[event],
        DESTINATION: topic,
        PARTITION: str(queue),
        OFFSET: offset,
        **more,
    }


def _record(event: TraceEventKind, topic: str, queue: int, offset: int, **more: str | int) -> TraceRecord:
    return TraceRecord(event, clock(), topic, queue, offset, _attributes(event, topic, queue, offset, **more))


# ---- what the logic layer records -------------------------------------------------------------------


def stored(store: MessageStore, config: TopicConfig, results: Sequence[PutResult]) -> None:
    """Messages a produce (or a resend) stored on `config`'s topic; a timer message (offset -1, not on its queue yet)
    is not recorded."""
    if not traced(config):
        return
    actor = _actor.get()
    who: dict[str, str | int] = {} if actor is None else {USER: actor[0]} | ({ADDRESS: actor[1]} if actor[1] else {})
    store_records = [
        _record(
            TraceEventKind.STORED,
            config.name,
            result.queue,
            result.queue_offset,
            **{MESSAGE_ID: result.msg_id, STORE_TIME: result.store_timestamp, **who},
        )
        for result in results
        if result.queue_offset >= 0
    ]
    recorder(store).add(store_records)


def delivered(
    store: MessageStore, group: str, topic: str, deliveries: Sequence[tuple[StoredMessage, int]], method: str
) -> None:
    """Deliveries of messages to `group` (`method`: pop or push), each with its attempt: attempt 1 is `delivered`,
    a later one `retried`."""
    if not deliveries or not _topic_traced(store, topic):
        return
    recorder(store).add(
        _record(
            TraceEventKind.DELIVERED if attempt <= 1 else TraceEventKind.RETRIED,
            topic,
            message.queue,
            message.queue_offset,
            **{MESSAGE_ID: message.msg_id, GROUP: group, ATTEMPT: attempt, METHOD: method},
        )
        for message, attempt in deliveries
    )


def settled(
    store: MessageStore,
    group: str,
    topic: str,
    event: TraceEventKind,
    receipts: Sequence[Receipt],
    **more: int,
) -> None:
    """Deliveries of `group` settled (acked, nacked, their invisible time changed), by their receipts."""
    if not receipts or not _topic_traced(store, topic):
        return
    recorder(store).add(
        _record(event, topic, r.queue, r.offset, **{GROUP: group, DELIVERY: f"{r.nonce:x}", **more}) for r in receipts
    )


def dead_lettered(
    store: MessageStore, group: str, messages: Sequence[StoredMessage], letters: Sequence[PutResult], attempts: int
) -> None:
    """Messages put to `group`'s dead letters after `attempts` deliveries, as `letters`."""
    traced_topics = {topic for topic in {m.topic for m in messages} if _topic_traced(store, topic)}
    recorder(store).add(
        _record(
            TraceEventKind.DEAD_LETTERED,
            message.topic,
            message.queue,
            message.queue_offset,
            **{MESSAGE_ID: message.msg_id, GROUP: group, ATTEMPT: attempts, DEAD_LETTER_ID: letter.msg_id},
        )
        for message, letter in zip(messages, letters, strict=True)
        if message.topic in traced_topics
    )


def resent(store: MessageStore, group: str, origins: Sequence[tuple[str, int, int, str, str]]) -> None:
    """Dead letters of `group` resent: per letter its origin (topic, queue, offset, message id) and the new id."""
    recorder(store).add(
        _record(TraceEventKind.RESENT, topic, queue, offset, **{MESSAGE_ID: origin_id, GROUP: group, RESENT_ID: new_id})
        for topic, queue, offset, origin_id, new_id in origins
        if _topic_traced(store, topic)
    )


# ---- reading a trace --------------------------------------------------------------------------------


def message_trace(store: MessageStore, msg_id: str) -> MessageTrace:
    """The trace of the message `msg_id` names, oldest event first (MessageNotFound if neither the message nor a
    record of it is found). This process's waiting records are put first."""
    recorder(store).flush()
    try:
        message: StoredMessage | None = store.message_by_id(msg_id)
    except MessageNotFound:
        message = None
    if message is not None:
        topic, queue, offset = message.topic, message.queue, message.queue_offset
    else:
        found = [r for r in _records(store, msg_id) if r.event is TraceEventKind.STORED]
        if not found:
            raise MessageNotFound(f"no message or trace record with id {msg_id}")
        topic, queue, offset = found[0].topic, found[0].queue, found[0].offset
    position = position_key(topic, queue, offset)
    mine = [record for record in _records(store, position) if (record.topic, record.queue) == (topic, queue)]
    unique = {record.identity: record for record in mine}
    records = sorted(unique.values(), key=lambda record: record.time_unix_nano)
    has_stored = any(record.event is TraceEventKind.STORED for record in records)
    if message is not None and not has_stored and _topic_traced(store, topic):
        records.insert(0, _stored_from(message))
    return MessageTrace(
        msg_id=message.msg_id if message is not None else msg_id,
        topic=topic,
        events=[record.view() for record in records],
        note=_note(store, topic, message, records),
    )


def _records(store: MessageStore, key: str) -> list[TraceRecord]:
    try:
        messages = store.messages_by_key(TRACE_TOPIC, key, EVENTS_MOST)
    except TopicNotFound:  # nothing was ever traced
        return []
    return [record for m in messages if (record := decode_record(m)) is not None]


def _stored_from(message: StoredMessage) -> TraceRecord:
    """The `stored` event a message itself shows (its record was lost with a flush: see the module docstring)."""
    more = {MESSAGE_ID: message.msg_id, STORE_TIME: message.store_timestamp}
    return TraceRecord(
        TraceEventKind.STORED,
        message.store_timestamp * 1_000_000,
        message.topic,
        message.queue,
        message.queue_offset,
        _attributes(TraceEventKind.STORED, message.topic, message.queue, message.queue_offset, **more),
    )


def _note(store: MessageStore, topic: str, message: StoredMessage | None, records: list[TraceRecord]) -> str | None:
    """Why a trace is empty or short, if it may be."""
    if not get_settings().trace_enabled:
        return "trace is off on this server (TIDEMQ_TRACE_ENABLED=false): events are not recorded"
    try:
        config = store.cached_topic(topic)
    except TopicNotFound:
        return f"topic {topic!r} no longer exists"
    if not traced(config):
        return f"topic {topic!r} opts out of trace ({TopicPolicy.TRACE}=false): its events are not recorded"
    if message is None:
        return "the message itself is gone (retention): its trace records are shown"
    if len(records) <= 1:
        return "only the message's storing is recorded: no group has received it yet (or its records expired)"
    return None
