"""The serverless backend's timer messages (timer/api.py has the protocol): the records on the shared directory, an
item per timer in DynamoDB, and no process of their own: due timers are moved on a schedule and whenever a consumer
of their topic asks.

    timers          topic | id  ->  file, position, length, scheduled_ms      (tables.py; by_file, by_id indexes)
    timer_outcomes  id          ->  topic, outcome, at_ms, location, purge_at

A put of timers appends their records to this process's segment file (one write and fsync, segments.py), then writes
their items in one TransactWriteItems, each on condition that its id is new: all or none, and durable before the
put is answered. A put with an idempotency key (tidemq_store/sends.py) writes its key's `sends` item in that
transaction, last (so at most MAX_TIMERS_PER_PUT timers and the key make DynamoDB's 100 items), on condition that
no item younger than the window holds the key: the timers are kept exactly when the key is recorded, and of two
racing sends of a key one transaction wins; the other answers the winner's timers (its appended records are
referenced by nothing, as a failed put's). The items are small (the records stay on the shared directory), so a put
of MAX_TIMERS_PER_PUT fits one transaction; maintenance keeps a segment file while a pending timer's item names it
(`holds_file`).

A move of one topic's due timers (`move_due`): one strongly consistent Query of the topic's items with ids up to
now (an id starts with its due time), at most MOVE_MOST; their records read back, appended as one batch to this
process's segment file (appender.py), and sequenced onto the topic's queues in one transaction that also deletes
each timer's item, on condition that it is still there, and writes its outcome (delivered, with where it is). So
every timer is put on its topic exactly once: the sequencing and the deletion are one write, which one mover or a
recall wins and every other loses (a lost move's appended records are referenced by nothing, as a failed put's; a
crash before the transaction leaves the timers pending, after it leaves them moved). Duplicates are impossible
rather than suppressed. A recall is one transaction too: the item deleted on condition it is there, the outcome
written.

When moves happen, and how late a timer is delivered:
- on a schedule: the maintenance function's `timers` job (every minute in AWS, an EventBridge rule; every
  TIDEMQ_TIMER_JOB_INTERVAL_S inside `make run`) moves every DELAY topic's due timers. With nobody reading a topic,
  a timer reaches its queue within that period plus the job's run: up to a minute late in AWS;
- whenever a consumer of the topic asks (a pull, a pop receive, a push delivery, each read of one of its queues):
  the reading process moves the topic's due timers first, at most every TIDEMQ_TIMER_POLL_MS (100 ms) per topic
  and for at most ASKED_MOST_S (a backlog goes on at the next reads), and a long poll waiting on a DELAY topic
  moves them every TIDEMQ_TIMER_POLL_MS while it waits. With a consumer polling, a timer is delivered within about
  that period plus a Query and a transaction (tens of ms in AWS).
A topic's timers are one partition's items (DynamoDB's 1,000 writes a second per partition bounds how many a topic
can send or move a second); a move takes at most MOVE_MOST, and goes on while more are due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from tidemq_protocol import clock
from tidemq_protocol.errors import MessageNotFound, TimerDelivered, TimerNotFound, TopicNotFound
from tidemq_protocol.message import MessageType, StoredMessage
from tidemq_protocol.record import decode_message, timer_due_ms

from ..config import StoreConfig
from ..model import PutResult, TopicConfig
from ..timer.api import NOT_ON_ITS_QUEUE, Outcome, Recalled, TimerBatch, TimerIdTaken, TimerStore
from ..timer.plan import due_batch
from .appender import Appender
from .kv.changes import purge_time
from .metadata import Metadata
from .queue_index import ItemChanged
from .segments import SegmentWriter, read_segment
from .sends import SendRecords
from .tables import Tables

log = logging.getLogger("tidemq.timers")

ASKED_MOST_S = 1.0
"""The longest a consumer's read moves due timers before it reads (a backlog is moved by later reads, and the job)."""
MOVE_MOST = 45
"""Timers one move takes: with its outcome each is two of a transaction's 100 items, beside the queues' own."""


def _due_bound(now_ms: int) -> str:
    """The least id of a timer due after `now_ms`."""
    return f"{now_ms + 1:012x}"


class DynamoTimers(TimerStore):
    """Timer messages of a `ServerlessMessageStore` (see the module docstring)."""

    def __init__(
        self,
        config: StoreConfig,
        tables: Tables,
        metadata: Metadata,
        writer: SegmentWriter,
        segments: Path,
        appender: Appender,
        located: Callable[[str], StoredMessage],
        sends: SendRecords,
    ) -> None:
        """`located`: the store's lookup of a message by where its record is (a delivered timer's); `sends`: the
        records of idempotent sends, a keyed put's written with its timers."""
        super().__init__()
        self.sends = sends
        self.config, self.tables, self.metadata = config, tables, metadata
        self.writer, self.segments, self.appender, self._located = writer, segments, appender, located
        self._asked: dict[str, float] = {}  # topic -> when a consumer here last had its due timers moved (monotonic)
        self._busy: dict[str, threading.Lock] = {}  # topic -> held while this process moves its due timers
        self._asking = threading.Lock()

    # ---- schedule --------------------------------------------------------------------------------

    def schedule(self, batch: TimerBatch) -> list[PutResult] | None:
        data = b"".join(timer.record for timer in batch.timers)
        appended = self.writer.append(lambda _: data)
        timers, at, send = self.tables.timers, appended.position, batch.send
        config = self.metadata.cached_topic(batch.topic) if send is not None else None
        try:
            with TransactWrite(connection=self.tables.connection) as transaction:
                for timer in batch.timers:
                    item = timers(
                        batch.topic,
                        timer.msg_id,
                        file=appended.file,
                        position=at,
                        length=len(timer.record),
                        scheduled_ms=batch.scheduled_ms,
                    )
                    transaction.save(item, condition=timers.id.does_not_exist())
                    at += len(timer.record)
                if send is not None and config is not None:  # the key's item: last, the 100th at most
                    self.sends.record(transaction, config, send.key, batch.sent(send))
        except TransactWriteError as error:
            reasons = [reason is not None and reason.code == "ConditionalCheckFailed" for reason in _reasons(error)]
            if any(reasons[: len(batch.timers)]):
                raise TimerIdTaken(batch.topic) from None
            if send is not None and config is not None and any(reasons):  # the key is held: its records go unused
                return self.sends.earlier(config, send)
            raise
        return None

    # ---- recall ----------------------------------------------------------------------------------

    def recall(self, topic: str, msg_id: str) -> Recalled:
        outcomes, due = self.tables.timer_outcomes, timer_due_ms(msg_id)
        try:
            with TransactWrite(connection=self.tables.connection) as transaction:
                self._settle(transaction, topic, msg_id, Outcome.RECALLED)
            return Recalled(msg_id, topic, due)
        except TransactWriteError as error:
            if not any(reason is not None and reason.code == "ConditionalCheckFailed" for reason in _reasons(error)):
                raise
        found = next(iter(outcomes.query(msg_id, consistent_read=True)), None)
        if found is None or found.topic != topic:
            raise TimerNotFound(
                f"topic {topic!r} has no timer message {msg_id} (none was sent, or its outcome is no longer kept)"
            )
        if found.outcome == Outcome.RECALLED:
            return Recalled(msg_id, topic, due, again=True)
        if found.outcome == Outcome.DELIVERED:
            raise TimerDelivered(f"timer message {msg_id} of topic {topic!r} was delivered at {found.at_ms}: too late")
        raise TimerNotFound(f"timer message {msg_id} was dropped: topic {topic!r} was deleted before it was due")

    def _purge(self, due_ms: int) -> datetime:
        """When DynamoDB may remove an outcome (TTL): TIDEMQ_TIMER_OUTCOME_RETENTION_MS past its due time."""
        return purge_time(due_ms + self.config.timer_outcome_retention_ms)

    # ---- lookup ----------------------------------------------------------------------------------

    def message(self, msg_id: str) -> StoredMessage:
        timers = self.tables.timers
        key = next(iter(timers.by_id.query(msg_id, limit=1)), None)
        item = next(iter(timers.query(key.topic, timers.id == msg_id, consistent_read=True)), None) if key else None
        if item is not None:
            message = decode_message(read_segment(self.segments, item.file, int(item.position), int(item.length)))
            message.queue_offset, message.store_timestamp = NOT_ON_ITS_QUEUE, int(item.scheduled_ms)
            return message
        found = next(iter(self.tables.timer_outcomes.query(msg_id, consistent_read=True)), None)
        if found is not None and found.outcome == Outcome.DELIVERED and found.location:
            return self._located(found.location)
        raise MessageNotFound(f"with id {msg_id}")

    # ---- moving ----------------------------------------------------------------------------------

    def move_due(self, topic: str | None = None) -> dict[str, int]:
        topics = [topic] if topic is not None else [c.name for c in self._delay_topics()]
        moved: dict[str, int] = {}
        for name in topics:
            with self._moving(name):
                count = self._move_topic(name, float("inf"))
            if count:
                moved[name] = count
        return moved

    def asked(self, topic: str) -> None:
        """A consumer of `topic` asks for messages: move its due timers, unless this process did within
        TIDEMQ_TIMER_POLL_MS or is doing it now, for at most ASKED_MOST_S (a read waits no longer; the next one goes
        on). A failure is logged: the read goes on, and the next one tries again."""
        now = time.monotonic()
        with self._asking:
            if now - self._asked.get(topic, -1e9) < self.config.timer_poll_ms / 1000:
                return
            self._asked[topic] = now
            busy = self._busy.setdefault(topic, threading.Lock())
        if not busy.acquire(blocking=False):
            return
        try:
            self._move_topic(topic, time.monotonic() + ASKED_MOST_S)
        except Exception:
            log.warning("moving the due timers of %s for a consumer failed", topic, exc_info=True)
        finally:
            busy.release()

    def _moving(self, topic: str) -> threading.Lock:
        """The lock of this process's moves of `topic` (a scheduled move waits for a consumer's to end)."""
        with self._asking:
            return self._busy.setdefault(topic, threading.Lock())

    def _delay_topics(self) -> Iterator[TopicConfig]:
        return (config for config in self.metadata.all_topics() if config.message_type is MessageType.DELAY)

    def _move_topic(self, topic: str, until: float) -> int:
        """Move `topic`'s due timers, MOVE_MOST at a time, until none is due or `until` (monotonic) has passed (see
        the module docstring); how many moved (the listeners told)."""
        timers, moved = self.tables.timers, 0
        while True:
            now = clock.now_ms()
            due = list(timers.query(topic, timers.id < _due_bound(now), consistent_read=True, limit=MOVE_MOST))
            if not due:
                break
            try:
                moved += self._move(topic, due)
            except ItemChanged:  # another mover (or a recall) took some of them: read again
                continue
            if len(due) < MOVE_MOST or time.monotonic() > until:
                break
        if moved:
            self._moved(topic, moved)
        return moved

    def _move(self, topic: str, due: list) -> int:
        try:
            config = self.metadata.cached_topic(topic, fresh=True)
        except TopicNotFound:
            config = None
        if config is None or any(int(item.scheduled_ms) < config.created_at for item in due):
            self._drop(topic, due)
            return 0
        records = [read_segment(self.segments, item.file, int(item.position), int(item.length)) for item in due]

        def deletions(locations: list[str]):
            def add(transaction: TransactWrite, _firsts: dict[int, int]) -> None:
                for item, location in zip(due, locations, strict=True):
                    self._settle(transaction, topic, item.id, Outcome.DELIVERED, location)

            return add

        results: list[PutResult] = self.appender.append(topic, due_batch(records), deletions)
        return len(results)

    def _drop(self, topic: str, due: list) -> None:
        """Drop timers whose topic is gone (or was made again since they were sent)."""
        for item in due:
            try:
                with TransactWrite(connection=self.tables.connection) as transaction:
                    self._settle(transaction, topic, item.id, Outcome.DROPPED)
            except TransactWriteError:
                continue  # moved or recalled meanwhile
        log.warning("dropped %d timer message(s) of topic %s: it was deleted", len(due), topic)

    def _settle(
        self, transaction: TransactWrite, topic: str, msg_id: str, outcome: int, location: str | None = None
    ) -> None:
        """Add to `transaction` the pending timer's item deleted, on condition it is there, and its outcome."""
        timers = self.tables.timers
        transaction.delete(timers(topic, msg_id), condition=timers.id.exists())
        purge_at = self._purge(timer_due_ms(msg_id))
        record = self.tables.timer_outcomes(
            msg_id, topic=topic, outcome=outcome, at_ms=clock.now_ms(), location=location, purge_at=purge_at
        )
        transaction.save(record)

    # ---- what the rest of the store asks ---------------------------------------------------------

    def forget_topic(self, topic: str) -> None:
        """Delete a deleted topic's pending timers (their files are then free to go)."""
        timers = self.tables.timers
        with timers.batch_write() as writer:
            for item in timers.query(topic, attributes_to_get=["topic", "id"]):
                writer.delete(item)

    def holds_file(self, file: str) -> bool:
        """Whether a pending timer's record is in segment file `file` (maintenance keeps it then)."""
        return next(iter(self.tables.timers.by_file.query(file, limit=1)), None) is not None


def _reasons(error: TransactWriteError) -> list:
    return list(error.cancellation_reasons or [])


__all__ = ["DynamoTimers"]
