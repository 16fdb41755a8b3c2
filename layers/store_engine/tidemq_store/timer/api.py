"""`TimerStore`: the timer messages of a store that are not due yet, the one API every backend serves (embedded:
embedded/timers.py, RocksDB; serverless: serverless/timers.py, DynamoDB).

A put on a DELAY topic of messages due later (plan.py) gives each a timer id (record/ids.py: its due time first)
and stores the batch here, durably and all or nothing, in place of the topic's queues: no consumer can see a
timer message, by any way of reading, before it is due. When it is due, the backend's mover puts it on its topic
(`move_due`) as the record planned at the send: the message with its due time (TIMER_DELIVER_MS) and its id
(MESSAGE_ID), which every reader reports as its id, so it keeps the id it was sent with. A timer is moved exactly
once, whatever crashes when (each store says why), and never before it is due. A recall before that removes it
(RocketMQ 5.3's RecallMessage): it is never delivered.

Compared with RocketMQ 5's TimerMessageStore: RocketMQ writes a timer message to its commit log under the system
topic `rmq_sys_wheel_timer`, appends (delay time, commit-log position) to a timer log, and links it into a timing
wheel of one slot per precision step (1 s by default) held in a memory-mapped file; a dequeue thread walks the wheel
slot by slot, reads each message back from the commit log and puts it again on its real topic (a new commit-log
record, the client's message id in MESSAGE_ID), and a message further ahead than the wheel (2 days) is "rolled":
put into the timer topic again, on and on. 5.3's RocksDB timeline keeps the same (delay slot, commit-log position)
records in RocksDB. Here the timer's record itself lives in the timer store, keyed by its id, which starts with its
due time: the due timers are a range read from the start, nothing is rolled (commit-log retention never reaches a
pending timer), the precision is the millisecond, and the mover sleeps until the next due time instead of ticking.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from tidemq_protocol.message import StoredMessage

from ..model import PutResult
from ..sends import SendKey, SentBatch

MovedListener = Callable[[str, int], None]
"""Told (topic, how many) after the mover put due timers on a topic (push delivery is set going with it)."""


class TimerIdTaken(Exception):
    """A timer id planned for a put is taken already (47 random bits per due millisecond: next to never); nothing
    was stored, and the put is planned again with fresh ids."""


@dataclass(slots=True, frozen=True)
class Timer:
    """One timer message: its id, when it is due, its queue, and the record to put on its topic then (a version 2
    record as a producer encodes it: the message with TIMER_DELIVER_MS and MESSAGE_ID, plan.py)."""

    msg_id: str
    due_ms: int
    queue: int
    record: bytes


NOT_ON_ITS_QUEUE = -1
"""The queue offset a put reports for a timer message: it has none until it is delivered."""


@dataclass(slots=True, frozen=True)
class TimerBatch:
    """The timer messages of one put, to `topic`, stored at `scheduled_ms`; `send`: the put's idempotency key, with
    its digest (tidemq_store/sends.py), recorded with the timers."""

    topic: str
    scheduled_ms: int
    timers: list[Timer]
    send: SendKey | None = None

    def results(self) -> list[PutResult]:
        """What the put answers, but the recall handles: each timer's id and queue, no offset yet."""
        return [PutResult(t.msg_id, t.queue, NOT_ON_ITS_QUEUE, self.scheduled_ms) for t in self.timers]

    def sent(self, send: SendKey) -> SentBatch:
        """The record of the put under `send`, kept with its timers."""
        return SentBatch(send.digest, self.scheduled_ms, 0, tuple(self.results()))


@dataclass(slots=True, frozen=True)
class Recalled:
    """A recalled timer message: it will never be delivered (`again`: recalled before, by a recall sent again)."""

    msg_id: str
    topic: str
    due_ms: int
    again: bool = False


class Outcome:
    """What became of a timer that is no longer pending, kept `TIDEMQ_TIMER_OUTCOME_RETENTION_MS` past its due time so
    that a recall of it is answered as such."""

    DELIVERED = 1
    RECALLED = 2
    DROPPED = 3  # its topic was deleted (or made again) before it was due


class TimerStore(ABC):
    """The pending timer messages of one store (see the module docstring)."""

    def __init__(self) -> None:
        self._moved_listeners: list[MovedListener] = []

    @abstractmethod
    def schedule(self, batch: TimerBatch) -> list[PutResult] | None:
        """Store a put's timers, all or none, durably before returning (TimerIdTaken: an id is in use; nothing
        was stored). With `batch.send`, the key's record too, in the same write: None when stored; if the topic
        holds the key already (sends.py `earlier_results`), nothing is stored and the earlier send's results are
        answered (SendConflict if it was sent with other messages)."""

    @abstractmethod
    def recall(self, topic: str, msg_id: str) -> Recalled:
        """Remove the pending timer `msg_id` of `topic` so that it is never delivered. TimerDelivered if it was
        delivered already, TimerNotFound if the topic has no such timer (or had, too long ago to say); a recall of
        one recalled before answers as the first did."""

    @abstractmethod
    def move_due(self, topic: str | None = None) -> dict[str, int]:
        """Put every timer due by now on its topic (of `topic`, or of every topic): how many went to each topic."""

    @abstractmethod
    def message(self, msg_id: str) -> StoredMessage:
        """The timer message `msg_id`: as it will be delivered while it is pending (queue_offset -1, its store
        timestamp when it was sent), as it is on its topic once delivered; MessageNotFound otherwise."""

    def asked(self, topic: str) -> None:  # noqa: B027 (the embedded mover needs no asking)
        """A consumer of `topic` asks for messages: a backend whose timers move only when something asks (the
        serverless one) moves the topic's due timers now, at most every TIDEMQ_TIMER_POLL_MS."""

    def add_moved_listener(self, listener: MovedListener) -> None:
        """Call `listener` after every move of due timers to a topic (in the mover's thread: it must be quick)."""
        self._moved_listeners.append(listener)

    def _moved(self, topic: str, count: int) -> None:
        for listener in self._moved_listeners:
            listener(topic, count)

    def close(self) -> None:  # noqa: B027 (a store with nothing to release keeps the default)
        """Stop the mover, if the backend has one, and release what the store holds."""
