"""The message trace's record format in `%TRACE%` (trace.py records and reads; this module owns the format).

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
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from tidemq_protocol.api.trace import TraceEvent, TraceEventKind
from tidemq_protocol.message import Message, StoredMessage
from tidemq_store.pop.api import HANDLE

from .trace_writer import Pending

FORMAT_VERSION = 1
BUCKET_OFFSETS = 256
"""Offsets of one queue whose records share a key (key 2): small enough that a bucket of messages sent, received and
acked one a flush (three records a message) fits one lookup of EVENTS_MOST; large enough that a flush keys few
(every key is an index entry the store writes, holding the GIL)."""
YIELD_EVERY = 8
"""Batches the writer encodes between offers of the GIL: the requests it would hold up are the ones being traced."""
KEYS_MOST = 256
"""Buckets one record is keyed by at most (the keys are a record's property: at most 32 KiB of them)."""

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


class Traced(NamedTuple):
    """The message a trace is of: where it is (or was) and its id."""

    msg_id: str
    topic: str
    queue: int
    queue_offset: int


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
