"""The embedded backend's timer messages (timer/api.py has the protocol): RocksDB with its WAL, `<home>/timers`, and a
mover thread that sleeps until the next one is due.

Three families; an id is a timer id's 12 bytes (record/ids.py: its due time first, big-endian), so the keys of
`pending` sort by due time and the timers due by now are one range read from the first key:

    pending   id  ->  scheduled_ms:u64 topic_length:u8 topic record      a timer not yet due: the record to put on
                                                                         `topic` when it is (timer/plan.py)
    outcomes  id  ->  outcome:u8 at_ms:u64 location:12 topic_length:u8 topic
                                                                         what became of a timer no longer pending
                                                                         (timer/api.py `Outcome`; `location`: where a
                                                                         delivered one's record is, else zeros)
    moving    b"m" -> position:u64 id*                                   the move in flight, if any (below)
    sends, sent_at                                                       the idempotency keys of puts kept here
                                                                         (send_records.py)

Integers are little-endian in values. A put with an idempotency key (tidemq_store/sends.py) writes its key's record
in the WriteBatch of its timers: the key is held exactly when the timers are kept, whatever crashes when. The
lookup and the write are made under `_scheduling`, so two racing sends of a key keep one set of timers; the records
past the window are deleted with the outcomes past theirs (`_prune`). Every write is one WriteBatch, its WAL synced
when the commit log's flush is SYNC, so an answered put, move or recall is on disk as the commit log's puts are.
Nothing of a pending timer is held in memory: the mover keeps the next due time and a floor below which `pending`
holds nothing, so its reads step over no deleted keys (10 million pending timers take disk, not memory; RocksDB's
memtables and block cache are bounded small).

The mover (one thread; `move_due` holds `_moving`, which a recall takes too, so a timer is moved or recalled, never
both): read the due timers (at most a put's worth), put those of one topic on it as one batch through the store's
own append, then delete them from `pending` and record their outcomes. The store's append writes the commit log
and its ConsumeQueue, and wakes the long polls (a consumer waiting on the queue gets the message at once); then the
mover's listeners are told (push delivery). It sleeps until the first key of `pending` is due, or a put brings an
earlier one. A timer whose topic is gone (or made again since it was sent) is dropped.

Exactly once, across crashes. The append and the deletion are two stores (the commit log, RocksDB), so the move is
two steps with an intent between: under the store's write lock, just before its append, the mover writes `moving`
(where the batch will start, and the ids in it), synced; after the append is acknowledged (durable), one WriteBatch
deletes the timers from `pending`, records their outcomes and deletes `moving`. When the store opens, after the
commit log's own recovery (which keeps a batch whole or drops it whole), a `moving` left behind is settled by
reading the log where it says: if the records there are the batch (each carrying its id as MESSAGE_ID, in order),
the append happened and the deletion is done now; if not (the log ends before, or holds another batch there), it
never happened and the timers stay pending, to be moved again. A crash before the intent leaves the timers pending
and nothing appended; between intent and append, the same, settled so; between the append and the deletion, the
batch appended once and its timers deleted at the settlement, never moved again; after the deletion, nothing left.
So every timer is appended exactly once, and duplicates are impossible rather than suppressed. (Under ASYNC flush
the commit log's tail is not fsync'd when the deletion is written: a power loss, not a process crash, may then
lose a moved batch, as it may lose any put acknowledged under ASYNC.)

A recall deletes the timer from `pending` and records `recalled`, under `_moving`: once it returns the timer
cannot be in a move, and no replay brings it back (`pending` is the only copy, and a recovery never re-adds one).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rocksdict import BlockBasedOptions, Cache, Options, ReadOptions, WriteBatch, WriteOptions

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    CorruptStore,
    MessageNotFound,
    StoreFailed,
    TimerDelivered,
    TimerNotFound,
    TopicNotFound,
)
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import decode_message, decode_records, message_id, timer_due_ms

from ..errors import StoreClosed
from ..model import PutResult
from ..rocks import Families
from ..sends import SendKey, earlier_results
from ..threads import background_thread
from ..timer.api import NOT_ON_ITS_QUEUE, Outcome, Recalled, TimerBatch, TimerIdTaken, TimerStore
from ..timer.plan import due_batch
from .send_records import SEND_FAMILIES, SendRecords

if TYPE_CHECKING:
    from .store import EmbeddedMessageStore

log = logging.getLogger("tidemq.timers")

FAMILIES = ("pending", "outcomes", "moving", *SEND_FAMILIES)
MOVING_KEY = b"m"
PENDING_HEAD = struct.Struct("<QB")  # scheduled_ms, topic_length
OUTCOME_HEAD = struct.Struct("<BQ12sB")  # outcome, at_ms, location, topic_length
POSITION = struct.Struct("<Q")
NO_LOCATION = bytes(12)
MOVE_MOST = 1000  # timers one move reads (the store's put takes up to TIDEMQ_MAX_BATCH_MESSAGES, 1000 by default)
PRUNE_EVERY_S = 60.0  # how often outcomes past TIDEMQ_TIMER_OUTCOME_RETENTION_MS are deleted
RETRY_AFTER_S = 1.0  # a move that failed (a full disk) is tried again after this long
WRITE_BUFFER_BYTES = 4 * 1024 * 1024  # memtables stay small: pending timers live on disk
BLOCK_CACHE_BYTES = 8 * 1024 * 1024


def _key(msg_id: str) -> bytes:
    return bytes.fromhex(msg_id)


def _due_bound(due_ms: int) -> bytes:
    """The smallest key of a timer due after `due_ms`: every timer due by then sorts before it."""
    return POSITION.pack(0) if due_ms < 0 else ((due_ms + 1) << 16).to_bytes(8, "big")


def _options(cache: Cache) -> Options:
    """Bytes keys and values, memtables of WRITE_BUFFER_BYTES (all of them at most twice that), and one block
    cache for every family that holds their index and filter blocks too: memory stays bounded however many timers
    are pending."""
    options = Options(raw_mode=True)
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    options.set_max_write_buffer_number(2)
    options.set_db_write_buffer_size(2 * WRITE_BUFFER_BYTES)
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options


class RocksTimers(TimerStore):
    """Timer messages of an `EmbeddedMessageStore` (see the module docstring); opened (and its move in flight
    settled) after the store's recovery, its mover started by `start`."""

    def __init__(self, store: EmbeddedMessageStore, path: Path, sync: bool) -> None:
        super().__init__()
        self.store = store
        cache = Cache(BLOCK_CACHE_BYTES)
        self._db = Families(path, FAMILIES, tuned=lambda: _options(cache))
        self._pending, self._outcomes, self._moving_cf = (self._db.views[name] for name in FAMILIES[:3])
        self._sends = SendRecords(self._db)
        self._handles = self._db.handles
        self._write = WriteOptions()
        self._write.sync = sync
        self._moving = threading.Lock()  # one move or recall at a time
        self._scheduling = threading.Lock()  # an id checked free and taken, with no other put between
        self._wake = threading.Condition()
        self._floor = 0  # `pending` holds no key below this one's due time
        self._low_water: int | None = None  # the earliest timer scheduled since a move began reading
        self._next_due: int | None = None  # the first key's due time as last read (None: unknown)
        self._puts = 0  # puts of timers so far (the mover's read of the next due time knows whether one came)
        self._stop = threading.Event()
        self._settle()
        self._mover = background_thread(self._run, "timer-mover")

    def start(self) -> None:
        self._mover.start()

    # ---- schedule --------------------------------------------------------------------------------

    def schedule(self, batch: TimerBatch) -> list[PutResult] | None:
        topic = batch.topic.encode()
        head = PENDING_HEAD.pack(batch.scheduled_ms, len(topic)) + topic
        write = WriteBatch(raw_mode=True)
        send = batch.send
        with self._scheduling:
            if send is not None:
                earlier = self.earlier(batch.topic, send)
                if earlier is not None:
                    return earlier
                self._sends.add(write, batch.topic, send.key, batch.sent(send))
            write.set_default_column_family(self._handles["pending"])
            for timer in batch.timers:
                key = _key(timer.msg_id)
                if self._pending.get(key) is not None or self._outcomes.get(key) is not None:
                    raise TimerIdTaken(timer.msg_id)
                write.put(key, head + timer.record)
            self._db.db.write(write, self._write)
        earliest = min(timer.due_ms for timer in batch.timers)
        with self._wake:
            self._puts += 1
            self._floor = min(self._floor, earliest)
            if self._low_water is not None:
                self._low_water = min(self._low_water, earliest)
            if self._next_due is None or earliest < self._next_due:
                self._next_due = earliest
                self._wake.notify_all()
        return None

    def earlier(self, topic: str, send: SendKey) -> list[PutResult] | None:
        """The results of the topic's put of `send`'s key kept here, if its record counts (sends.py)."""
        config = self.store.get_topic(topic)
        window = self.store.config.send_dedup_window_ms
        sent = self._sends.sent(topic, send.key)
        return earlier_results(topic, send, sent, clock.now_ms(), window, config.created_at)

    # ---- recall ----------------------------------------------------------------------------------

    def recall(self, topic: str, msg_id: str) -> Recalled:
        key, due = _key(msg_id), timer_due_ms(msg_id)
        with self._moving:
            value = self._pending.get(key)
            if value is not None:
                if _pending_topic(value) != topic:
                    raise TimerNotFound(f"topic {topic!r} has no timer message {msg_id}")
                write = WriteBatch(raw_mode=True)
                write.delete(key, self._handles["pending"])
                outcome = _outcome(Outcome.RECALLED, clock.now_ms(), NO_LOCATION, topic)
                write.put(key, outcome, self._handles["outcomes"])
                self._db.db.write(write, self._write)
                return Recalled(msg_id, topic, due)
            outcome = self._outcomes.get(key)
        if outcome is None or _outcome_topic(outcome) != topic:
            raise TimerNotFound(
                f"topic {topic!r} has no timer message {msg_id} (none was sent, or its outcome is no longer kept)"
            )
        kind, at_ms, _, _ = OUTCOME_HEAD.unpack_from(outcome)
        if kind == Outcome.RECALLED:
            return Recalled(msg_id, topic, due, again=True)
        if kind == Outcome.DELIVERED:
            raise TimerDelivered(f"timer message {msg_id} of topic {topic!r} was delivered at {at_ms}: too late")
        raise TimerNotFound(f"timer message {msg_id} was dropped: topic {topic!r} was deleted before it was due")

    # ---- lookup ----------------------------------------------------------------------------------

    def message(self, msg_id: str) -> StoredMessage:
        key = _key(msg_id)
        value = self._pending.get(key)
        if value is not None:
            scheduled_ms, length = PENDING_HEAD.unpack_from(value)
            message = decode_message(value, PENDING_HEAD.size + length)
            message.queue_offset, message.store_timestamp = NOT_ON_ITS_QUEUE, scheduled_ms
            return message
        outcome = self._outcomes.get(key)
        if outcome is not None:
            kind, _, location, _ = OUTCOME_HEAD.unpack_from(outcome)
            if kind == Outcome.DELIVERED:
                return self.store.message_by_id(location.hex())
        raise MessageNotFound(f"with id {msg_id}")

    # ---- the mover -------------------------------------------------------------------------------

    def move_due(self, topic: str | None = None) -> dict[str, int]:
        moved: dict[str, int] = {}
        while True:
            with self._moving:
                with self._wake:
                    self._low_water = clock.now_ms()  # a put from here on may be missed by the read: it lowers this
                now = clock.now_ms()
                due = list(self._due(now, topic))
                by_topic: dict[str, list[tuple[bytes, bytes]]] = {}
                for key, value in due:
                    by_topic.setdefault(_pending_topic(value), []).append((key, value))
                for name, timers in by_topic.items():
                    count = self._move(name, timers)
                    if count:
                        moved[name] = moved.get(name, 0) + count
                with self._wake:
                    if topic is None and len(due) < MOVE_MOST:  # all due by `now` is moved, but what came meanwhile
                        self._floor = min(max(self._floor, now), self._low_water)
                    self._low_water = None
            for name in by_topic:
                if moved.get(name):
                    self._moved(name, moved[name])
            if len(due) < MOVE_MOST:
                return moved

    def _due(self, now: int, topic: str | None) -> Iterator[tuple[bytes, bytes]]:
        bounds = ReadOptions()  # RocksDB keeps a pointer to the bounds: they outlive the iteration
        bounds.set_iterate_upper_bound(_due_bound(now))
        taken, start = 0, _due_bound(self._floor - 1)
        for key, value in self._pending.items(from_key=start, read_opt=bounds):
            if topic is not None and _pending_topic(value) != topic:
                continue
            yield key, value
            taken += 1
            if taken == MOVE_MOST:
                return

    def _move(self, topic: str, timers: list[tuple[bytes, bytes]]) -> int:
        """Put `timers` (all of `topic`) on their topic as one batch, exactly once (see the module docstring)."""
        config = self.store.meta.get_topic(topic)
        scheduled = [PENDING_HEAD.unpack_from(value)[0] for _, value in timers]
        if config is None or any(at < config.created_at for at in scheduled):
            self._finish(topic, timers, None, Outcome.DROPPED)
            log.warning("dropped %d timer message(s) of topic %s: it was deleted", len(timers), topic)
            return 0
        records = [_pending_record(value) for _, value in timers]
        ids = b"".join(key for key, _ in timers)

        def intent(position: int) -> None:
            self._moving_cf.put(MOVING_KEY, POSITION.pack(position) + ids, self._write)

        try:
            results = self.store.append_due(topic, due_batch(records), intent)
        except TopicNotFound:
            self._finish(topic, timers, None, Outcome.DROPPED)
            return 0
        self._finish(topic, timers, results, Outcome.DELIVERED)
        return len(results)

    def _finish(
        self, topic: str, timers: list[tuple[bytes, bytes]], results: list[PutResult] | None, kind: int
    ) -> None:
        """One write: the timers out of `pending`, their outcomes in, the intent gone."""
        write = WriteBatch(raw_mode=True)
        now = clock.now_ms()
        for index, (key, _) in enumerate(timers):
            location = bytes.fromhex(results[index].msg_id) if results is not None else NO_LOCATION
            write.delete(key, self._handles["pending"])
            write.put(key, _outcome(kind, now, location, topic), self._handles["outcomes"])
        write.delete(MOVING_KEY, self._handles["moving"])
        self._db.db.write(write, self._write)

    def _settle(self) -> None:
        """Settle a move a crash left in flight (see the module docstring)."""
        intent = self._moving_cf.get(MOVING_KEY)
        if intent is None:
            return
        (position,) = POSITION.unpack_from(intent)
        keys = [intent[at : at + 12] for at in range(POSITION.size, len(intent), 12)]
        values = [self._pending.get(key) for key in keys]
        if any(value is None for value in values):  # cannot be: the deletion takes the intent with it
            raise CorruptStore("the timer move in flight names timers no longer pending")
        timers = list(zip(keys, values, strict=True))
        sizes = [len(_pending_record(value)) for value in values]
        appended = self._appended(position, sizes, [key.hex() for key in keys])
        if appended is None:
            self._moving_cf.delete(MOVING_KEY, self._write)
            log.info("a timer move in flight at the crash had not happened: %d timer(s) stay pending", len(keys))
            return
        self._finish(_pending_topic(values[0]), timers, appended, Outcome.DELIVERED)
        log.info("a timer move in flight at the crash had happened: %d timer(s) delivered", len(keys))

    def _appended(self, position: int, sizes: list[int], ids: list[str]) -> list[PutResult] | None:
        """Where the records of timers `ids` are, if the commit log holds them from `position` in that order."""
        commitlog, total = self.store.commitlog, sum(sizes)
        if position < commitlog.min_position or position + total > commitlog.written_position:
            return None
        try:
            messages = decode_records(commitlog.read(position, total))
        except (CorruptStore, OSError):
            return None
        if [m.msg_id for m in messages] != ids:
            return None
        results, at = [], position
        for message, size in zip(messages, sizes, strict=True):
            location = message_id(at, size)
            results.append(PutResult(location, message.queue, message.queue_offset, message.store_timestamp))
            at += size
        return results

    def _run(self) -> None:
        """Move timers as they come due, sleeping until the next one is (or a put brings an earlier one)."""
        pruned = time.monotonic()
        while not self._stop.is_set():
            failed = False
            try:
                self.move_due()
                if time.monotonic() - pruned > PRUNE_EVERY_S:
                    self._prune()
                    pruned = time.monotonic()
                self._read_next_due()
            except (StoreClosed, StoreFailed):
                return
            except Exception:  # a full disk, say: the timers stay pending and the next round tries again
                log.exception("moving due timer messages failed; trying again in %.0f s", RETRY_AFTER_S)
                failed = True
            with self._wake:
                if self._stop.is_set():
                    return
                if failed or self._next_due is None:
                    self._wake.wait(RETRY_AFTER_S if failed else PRUNE_EVERY_S)
                elif self._next_due > clock.now_ms():
                    self._wake.wait(min(PRUNE_EVERY_S, (self._next_due - clock.now_ms()) / 1000))

    def _read_next_due(self) -> None:
        """Remember when the first pending timer is due (None: there is none), or a put since made sooner."""
        with self._wake:
            puts = self._puts
        first = next(iter(self._pending.keys(from_key=_due_bound(self._floor - 1))), None)
        found = None if first is None else int.from_bytes(first[:6], "big")
        with self._wake:
            if self._puts != puts and self._next_due is not None:  # it may have come after the read
                found = self._next_due if found is None else min(found, self._next_due)
            self._next_due = found

    def _prune(self) -> None:
        """Delete outcomes of timers due more than TIDEMQ_TIMER_OUTCOME_RETENTION_MS ago, and the idempotency keys
        past their window."""
        now = clock.now_ms()
        cutoff = now - self.store.config.timer_outcome_retention_ms
        if cutoff > 0:
            self._outcomes.delete_range(bytes(8), _due_bound(cutoff - 1))
        self._sends.forget(now - self.store.config.send_dedup_window_ms, self._write)

    def close(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        if self._mover.is_alive():
            self._mover.join()
        self._db.close()


def _pending_topic(value: bytes) -> str:
    _, length = PENDING_HEAD.unpack_from(value)
    return value[PENDING_HEAD.size : PENDING_HEAD.size + length].decode()


def _pending_record(value: bytes) -> bytes:
    _, length = PENDING_HEAD.unpack_from(value)
    return value[PENDING_HEAD.size + length :]


def _outcome(kind: int, at_ms: int, location: bytes, topic: str) -> bytes:
    name = topic.encode()
    return OUTCOME_HEAD.pack(kind, at_ms, location, len(name)) + name


def _outcome_topic(value: bytes) -> str:
    return value[OUTCOME_HEAD.size :].decode()
