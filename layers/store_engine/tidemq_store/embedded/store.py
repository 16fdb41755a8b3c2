"""`EmbeddedMessageStore`: the embedded backend, one CommitLog, a RocksDB ConsumeQueue (no WAL) and RocksDB metadata
(WAL) in one process.

Layout under `StoreConfig.home`:

    LOCK           flock'd by the one process that has the store open
    commitlog/     segment files (see commitlog.py, record format in tidemq_protocol.record)
    consumequeue/  RocksDB: ConsumeQueue, min/max offsets, key index (see consumequeue.py)
    metadata/      RocksDB: topics, groups, consumer offsets, users (see metadata.py)
    checkpoint     where ConsumeQueue replay starts (see consumequeue.Checkpoint)
    kv/            RocksDB: the KV namespaces' entries (see kv.py)
    timers/        RocksDB: timer messages not yet due, and the outcomes of those that were (see timers.py)
    transactions/  RocksDB: transactional messages, half messages and outcomes (see transactions.py)

Write path (one writer at a time, under `_write_lock`): validate the whole batch, assign queue
offsets, encode the records, append them with one write(), index them with one RocksDB write batch,
then (SYNC) wait for the group-committed fsync outside the lock. Readers see only acknowledged data.
A batch is all or nothing, over any number of queues: its records are one append ending in an
END_OF_BATCH record, and recovery keeps only whole batches. A failed fsync fails the commit log for good
(commitlog.py): puts raise `StoreFailed` and `check_health` reports it.

This module holds the data path: puts, reads (chosen from ConsumeQueue entries, reads.py), and what a
cold tier asks of its hot store (`HotStore`, hot.py). The class's other jobs each have a module, over the parts
they share (parts.py):

    admin.py        topics, groups and consumer offsets, users (under the same write lock)
    lookups.py      messages by id and by key
    retention.py    expiry, segment deletion and release, the background round (checkpoints and retention)
    recovery.py     checkpoints, and the replay of the log into the ConsumeQueue when the store opens
    timers.py       a DELAY topic's messages sent for later, and the mover that puts them on their topic when due
    transactions.py the transaction log: half messages, their commit or rollback, and check-back
    replication.py  a slave's log as a copy of its master's (RIP-31; replica.py owns the chunk format)
"""

from __future__ import annotations

import fcntl
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    CorruptStore,
    InvalidArgument,
    OffsetOutOfRange,
    StoreFailed,
    TopicNotFound,
)
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.record import (
    SEND_KEY,
    encode_record,
    flag_record,
)

from ..api import MessageStore
from ..batch import ValidatedBatch, validate_batch, validate_records
from ..config import FlushDiskType, StoreConfig
from ..cq_entry import CqEntries
from ..errors import StoreLocked
from ..health import Probe
from ..hot import HotStore, PutListener, QueueExtent, StoredBatch
from ..kv.api import KeyValueStore
from ..model import PutResult, QueueOffsets, TopicConfig, check_queue
from ..pop.api import PopLedger
from ..reads import ReadRequest, RunsRead, check_read
from ..selection import bytes_may_cut, likely_scan_end, scan_size, select_runs
from ..sends import SendKey, SentBatch, earlier_results, encode_send_mark, keyed
from ..threads import background_thread
from ..timer.api import TimerStore
from ..timer.plan import put_delayed
from .admin import MetadataOperations
from .commitlog import CommitLog
from .consumequeue import Checkpoint, ConsumeQueueStore
from .lookups import Lookups
from .metadata import MetadataStore
from .recovery import Recovery
from .replication import Replication
from .retention import Retention
from .transactions import RocksTransactionLog


class EmbeddedMessageStore(MetadataOperations, Lookups, Retention, Recovery, Replication, HotStore):
    """`MessageStore` over local files; one instance per process and home directory. Its jobs beside the data path
    are its bases', a module each (see the module docstring)."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        home = config.home
        home.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(home / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreLocked(f"{home} is in use by another process") from None
        self.commitlog = CommitLog(
            home / "commitlog",
            config.commitlog_segment_bytes,
            config.flush_disk_type,
            config.flush_interval_ms,
            config.commitlog_preallocate_bytes,
            config.disk_reserve_bytes,
        )
        self.cq = ConsumeQueueStore(home / "consumequeue")
        self.meta = MetadataStore(home / "metadata", config.metadata_sync)
        self._checkpoint = Checkpoint(home / "checkpoint")
        self._write_lock = threading.Lock()
        self._delayed_sends = threading.Lock()  # a keyed DELAY put's lookups and its write (`_store_delayed`)
        self._next_offsets: dict[tuple[str, int], int] = {}  # writer-owned cache of each queue's max offset
        self._last_store_timestamp = 0
        self._clean_lock = threading.Lock()
        self._arrivals = threading.Condition()  # notified after every acknowledged put (long polling)
        self._closed = False
        self._put_listeners: list[PutListener] = []
        self._release_policy = None
        self._segment_archive = None
        self.recover()
        self._stop = threading.Event()
        self._maintenance = background_thread(self._maintain, "store-maintenance")
        self._maintenance.start()
        from .timers import RocksTimers

        self._rocks_timers = RocksTimers(self, home / "timers", config.flush_disk_type is FlushDiskType.SYNC)
        self._timers = self._rocks_timers
        self._rocks_timers.start()

    # ---- put -------------------------------------------------------------------------------------

    def put(self, topic: str, messages: Sequence[Message], send: SendKey | None = None) -> list[PutResult]:
        config = self.get_topic(topic)
        return self._store(config, validate_batch(self.config, config, messages), send)

    def put_records(
        self, topic: str, records: bytes, default_queue: int = 0, send: SendKey | None = None
    ) -> list[PutResult]:
        config = self.get_topic(topic)
        return self._store(config, validate_records(self.config, config, records, default_queue), send)

    def _store(self, config: TopicConfig, batch: ValidatedBatch, send: SendKey | None) -> list[PutResult]:
        """Append a checked batch (once for its idempotency key: sends.py), or keep it until due (a DELAY topic's
        messages sent for later: timers.py)."""
        if config.message_type is MessageType.DELAY:
            return self._store_delayed(config, batch, keyed(send, batch))
        return self._append(config.name, batch, send=keyed(send, batch))

    def _store_delayed(self, config: TopicConfig, batch: ValidatedBatch, send: SendKey | None) -> list[PutResult]:
        """A DELAY topic's batch: appended, or kept as timers (timer/plan.py). With a key, once: the key's record is
        written either with the append (the ConsumeQueue's) or with the timers (the timers' RocksDB), so both are
        looked up first, under `_delayed_sends` (a resend whose messages are due by now where the first's were not
        is still answered the first's timers)."""

        def append(due: ValidatedBatch, key: SendKey | None) -> list[PutResult]:
            return self._append(config.name, due, send=key)

        if send is None:
            return put_delayed(self.timers, self.config, config, batch, append, clock.now_ms())
        with self._delayed_sends:
            earlier = self._appended_before(config, send) or self._rocks_timers.earlier(config.name, send)
            if earlier:
                return earlier
            return put_delayed(self.timers, self.config, config, batch, append, clock.now_ms(), send)

    def _appended_before(self, config: TopicConfig, send: SendKey) -> list[PutResult] | None:
        """The results of the topic's appended send of `send`'s key (sends.py), once that is durable."""
        sent = self.cq.sent(config.name, send.key)
        window = self.config.send_dedup_window_ms
        earlier = earlier_results(config.name, send, sent, clock.now_ms(), window, config.created_at)
        if earlier is not None and sent is not None:
            self._acknowledge(sent.durable_at, [])
        return earlier

    def append_batch(self, topic: str, batch: ValidatedBatch) -> list[PutResult]:
        """Append a batch checked already, as it is (the transaction log's committed messages: their type is the
        topic's, and their records name their ids)."""
        return self._append(topic, batch)

    def append_due(self, topic: str, batch: ValidatedBatch, intent: Callable[[int], None]) -> list[PutResult]:
        """Append the records of due timers (timers.py), calling `intent` with the position they will start at
        just before, under the write lock: nothing else is appended between the two."""
        return self._append(topic, batch, intent)

    def _append(
        self,
        topic: str,
        batch: ValidatedBatch,
        intent: Callable[[int], None] | None = None,
        send: SendKey | None = None,
    ) -> list[PutResult]:
        with self._write_lock:
            self._check_open()
            config = self.meta.get_topic(topic)
            if config is None:  # deleted while we validated
                raise TopicNotFound(topic)
            now = clock.now_ms()
            sent = None if send is None else self.cq.sent(topic, send.key)
            earlier = None
            if sent is not None and send is not None:
                window = self.config.send_dedup_window_ms
                earlier = earlier_results(topic, send, sent, now, window, config.created_at)
            if earlier is None:
                store_timestamp = self._last_store_timestamp = max(now, self._last_store_timestamp)
                stored, position, results = self._write(topic, batch, store_timestamp, intent, send)
        if earlier is not None and sent is not None:  # sent again: answered once the first send is durable
            self._acknowledge(sent.durable_at, [])
            return earlier
        self._acknowledge(position, [stored])
        return list(results) if results is not None else stored.put_results()

    def _write(
        self,
        topic: str,
        batch: ValidatedBatch,
        store_timestamp: int,
        intent: Callable[[int], None] | None,
        send: SendKey | None,
    ) -> tuple[StoredBatch, int, tuple[PutResult, ...] | None]:
        """Append and index a batch (the caller holds the write lock): its records, and, for a send with an
        idempotency key, a SEND_KEY record ending the batch; the batch as stored, the log's end after it, and (with
        a key) the put's results."""
        next_offsets: dict[int, int] = {}
        offsets, positions = [], []
        start = position = self.commitlog.written_position
        if intent is not None:
            intent(start)
        for queue, size in zip(batch.queues, batch.sizes, strict=True):
            offset = next_offsets.get(queue)
            if offset is None:
                offset = self._writer_max_offset(topic, queue)
            next_offsets[queue] = offset + 1
            offsets.append(offset)
            positions.append(position)
            position += size
        sent, results, mark = None, None, b""
        if send is not None:
            mark = encode_record(topic.encode(), 0, store_timestamp, b"", encode_send_mark(send))
        stored = StoredBatch(topic, store_timestamp, batch.queues, offsets, positions, batch.sizes, len(mark))
        if send is None:
            data = batch.stamped(offsets, start, store_timestamp)
        else:
            data = batch.with_record(mark).stamped([*offsets, 0], start, store_timestamp)
            flag_record(data, position - start, SEND_KEY)
            position += len(mark)
            results = tuple(stored.put_results())
            sent = (send.key, SentBatch(send.digest, store_timestamp, position, results))
        try:
            self.commitlog.append(data)
            self.cq.dispatch(stored, self.commitlog.segment_start(start), batch.tag_codes, batch.keys, sent)
        except BaseException:
            if self.commitlog.failure is None:
                self.commitlog.truncate(start)  # never leave log records the ConsumeQueue does not know
            raise
        for queue, offset in next_offsets.items():
            self._next_offsets[(topic, queue)] = offset
        return stored, position, results

    # ---- get -------------------------------------------------------------------------------------

    def read_queue(self, request: ReadRequest) -> RunsRead:
        """Choose what a read returns: runs of adjacent records in the commit log, from ConsumeQueue
        entries alone (tag codes filter here; bodies are not touched; a SQL92 filter is evaluated as they are read)."""
        topic, queue, offset = request.topic, request.queue, request.offset
        check_queue(self.get_topic(topic), queue)
        message_filter = check_read(request, self.config.max_get_messages)
        min_offset, max_offset = self.cq.min_offset(topic, queue), self.max_offset(topic, queue)
        if type(offset) is not int or not min_offset <= offset <= max_offset:
            raise OffsetOutOfRange(topic, queue, offset, min_offset, max_offset)
        scan_end = min(max_offset, offset + scan_size(request.max_messages, message_filter))
        readable = self.commitlog.readable_position
        end = scan_end if message_filter is not None else self._likely_end(topic, queue, offset, scan_end, request)
        while True:
            entries = self.cq.entries(topic, queue, offset, end)
            if len(entries) != end - offset:
                self._raced_with_cleaner(topic, queue, offset, max_offset)
            selection = select_runs(entries, offset, request.max_messages, request.max_bytes, message_filter, readable)
            if end == scan_end or selection.next_offset < end or selection.count == request.max_messages:
                return RunsRead(topic, queue, selection, self.commitlog.read, message_filter, min_offset, max_offset)
            end = scan_end  # the guess fell short (smaller records further on): the whole scan, as without it

    def _likely_end(self, topic: str, queue: int, offset: int, scan_end: int, request: ReadRequest) -> int:
        """Where an unfiltered read's scan of entries likely ends (`selection.likely_scan_end`)."""
        if not bytes_may_cut(topic, scan_end - offset, request.max_bytes):
            return scan_end
        first = self.cq.entry(topic, queue, offset)
        return likely_scan_end(offset, scan_end, request.max_bytes, None if first is None else first.size)

    def _raced_with_cleaner(self, topic: str, queue: int, offset: int, max_offset: int) -> None:
        min_offset = self.cq.min_offset(topic, queue)
        if offset < min_offset:
            raise OffsetOutOfRange(topic, queue, offset, min_offset, max_offset)
        raise CorruptStore(f"ConsumeQueue {topic}:{queue} is missing entries from offset {offset}")

    def wait_for_messages(self, topic: str, queue: int, offset: int, timeout_s: float) -> bool:
        check_queue(self.get_topic(topic), queue)
        deadline = time.monotonic() + timeout_s

        def arrived() -> bool:  # the message at `offset` readable (acknowledged), not just written
            if self._closed:
                return True
            if self.max_offset(topic, queue) <= offset:
                return False
            entry = self.cq.entry(topic, queue, offset)  # None: below the queue now; the read says so
            return entry is None or entry.end <= self.commitlog.readable_position

        with self._arrivals:
            while not arrived():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._arrivals.wait(remaining)
        return not self._closed

    # ---- what a cold tier asks (HotStore) ----------------------------------------------------------

    def min_offset(self, topic: str, queue: int) -> int:
        return self.cq.min_offset(topic, queue)

    def max_offset(self, topic: str, queue: int) -> int:
        cached = self._next_offsets.get((topic, queue))
        return cached if cached is not None else self.cq.max_offset(topic, queue)

    def readable_max_offset(self, topic: str, queue: int) -> int:
        max_offset = self.max_offset(topic, queue)
        last = self.cq.entry(topic, queue, max_offset - 1) if max_offset else None
        if last is not None and last.end > self.commitlog.readable_position:
            return max_offset - 1
        return max_offset

    def entries(self, topic: str, queue: int, start: int, end: int) -> CqEntries:
        return self.cq.entries(topic, queue, start, end)

    @property
    def written_position(self) -> int:
        return self.commitlog.written_position

    @property
    def first_position(self) -> int:
        return self.commitlog.min_position

    def queues(self) -> Iterator[QueueExtent]:
        return self.cq.queues()

    def add_put_listener(self, listener: PutListener) -> None:
        self._put_listeners.append(listener)

    # ---- offsets and queries ---------------------------------------------------------------------

    def queue_offsets(self, topic: str) -> list[QueueOffsets]:
        config = self.get_topic(topic)
        return [
            QueueOffsets(queue, self.cq.min_offset(topic, queue), self.max_offset(topic, queue))
            for queue in range(config.queues)
        ]

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        check_queue(self.get_topic(topic), queue)
        if not isinstance(timestamp_ms, int):
            raise InvalidArgument(f"timestamp must be an integer (ms since the epoch), got {timestamp_ms!r}")
        low, high = self.cq.min_offset(topic, queue), self.max_offset(topic, queue)
        return self.cq.first_offset(topic, queue, low, high, lambda e: e.store_timestamp >= timestamp_ms)

    # ---- queue bookkeeping -----------------------------------------------------------------------

    def _writer_max_offset(self, topic: str, queue: int) -> int:
        """Max offset for the writer (caller holds the write lock); only the writer fills the cache."""
        key = (topic, queue)
        offset = self._next_offsets.get(key)
        if offset is None:
            offset = self._next_offsets[key] = self.cq.max_offset(topic, queue)
        return offset

    # ---- lifecycle -------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the log, persist the ConsumeQueue and move the checkpoint."""
        self._check_open()
        self._write_checkpoint(clean=False)

    def check_health(self) -> None:
        if self.commitlog.failure is not None:
            raise StoreFailed(self.commitlog.failure)

    def probes(self) -> list[Probe]:
        return [self.commitlog.probe]

    def open_kv(self) -> KeyValueStore:
        return self.open_kv_over(self)

    def open_kv_over(self, store: MessageStore) -> KeyValueStore:
        from .kv import EmbeddedKeyValueStore

        return EmbeddedKeyValueStore(store, self.config.home / "kv", self.config.metadata_sync)

    def open_timers(self) -> TimerStore:
        return self._timers

    def open_pop_ledger(self) -> PopLedger:
        from ..pop.known import KnownLedgers
        from .pop import RocksPopLedger

        # this process alone writes it: what it knows is never stale, and a receive scans no RocksDB (pop/known.py)
        return KnownLedgers(RocksPopLedger(self.config.home / "pop", self.config.metadata_sync), math.inf)

    def open_transactions(self) -> RocksTransactionLog:
        return RocksTransactionLog(self, self.config.home / "transactions", self.config.metadata_sync)

    def close(self) -> None:
        if self._closed:
            return
        self._timers.close()  # its mover appends: it stops first
        self.close_transactions()
        self.close_kv()
        self.close_pop_ledger()
        self._stop.set()
        self._maintenance.join()
        if self.commitlog.failure is None:  # a failed store is recovered from its last good checkpoint
            self._write_checkpoint(clean=True)
        with self._write_lock:
            self._closed = True
        with self._arrivals:
            self._arrivals.notify_all()  # long polls return
        self.commitlog.close()
        self.cq.close()
        self.meta.close()
        os.close(self._lock_fd)


__all__ = ["EmbeddedMessageStore"]
