"""The embedded backend: one CommitLog, a RocksDB ConsumeQueue (no WAL) and RocksDB metadata (WAL).

Layout under `StoreConfig.home`:

    LOCK           flock'd by the one process that has the store open
    commitlog/     segment files (see commitlog.py, record format in record.py)
    consumequeue/  RocksDB: ConsumeQueue, min/max offsets, key index (see consumequeue.py)
    metadata/      RocksDB: topics, groups, consumer offsets (see metadata.py)
    checkpoint     where ConsumeQueue replay starts (see consumequeue.Checkpoint)

Write path (one writer at a time, under `_write_lock`): validate the whole batch, assign queue
offsets, encode the records, append them with one write(), index them with one RocksDB write batch,
then (SYNC) wait for the group-committed fsync outside the lock. Readers see only acknowledged data.
A batch is all or nothing, over any number of queues: its records are one append ending in an
END_OF_BATCH record, and recovery keeps only whole batches (record.py). Changes of metadata (topics, groups,
commits) take the same lock, so a group deleted stays deleted and a compare-and-set commit checks and writes
as one step.

Background work (one thread): a checkpoint every `checkpoint_interval_s`, retention every
`clean_interval_s`. An error there is logged and the next round tries again. A failed fsync is different:
the commit log fails (commitlog.py), puts raise `StoreFailed` and `check_health` reports it.

The store is a `HotStore` (hot.py): a cold tier can be put over it.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    CorruptStore,
    GroupExists,
    GroupNotFound,
    InvalidArgument,
    MessageNotFound,
    OffsetConflict,
    OffsetOutOfRange,
    ReplicaDiverged,
    StoreFailed,
    TopicExists,
    TopicNotFound,
    UserExists,
    UserNotFound,
)
from tidemq_protocol.message import Message, StoredMessage, tag_hash
from tidemq_protocol.names import check_name
from tidemq_protocol.record import (
    RecordHeader,
    decode_message,
    message_id,
    parse_message_id,
    read_by_id,
    scan_batches,
)

from ..acl import UserRecord
from ..api import UNSET, CleanReport, MessageStore, updated_topic
from ..batch import ValidatedBatch, validate_batch, validate_records
from ..config import StoreConfig
from ..cq_entry import CqEntries, CqEntry
from ..errors import StoreClosed, StoreLocked
from ..hot import HotStore, PutListener, QueueExtent, ReleasePolicy, StoredBatch
from ..kv.api import KeyValueStore
from ..model import (
    GroupConfig,
    Page,
    PutResult,
    QueueOffsets,
    TopicConfig,
    check_page_limit,
    check_queue,
    validated,
)
from ..reads import ReadRequest, RunsRead, check_read
from ..selection import scan_size, select_runs
from ..threads import background_thread
from .commitlog import CommitLog, SegmentRange
from .consumequeue import Checkpoint, CheckpointState, ConsumeQueueStore
from .metadata import FOREVER, MetadataStore
from .replica import ReplicaChunk

log = logging.getLogger("tidemq.store")


class EmbeddedMessageStore(HotStore):
    """`MessageStore` over local files; one instance per process and home directory."""

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
            home / "commitlog", config.commitlog_segment_bytes, config.flush_disk_type, config.flush_interval_ms
        )
        self.cq = ConsumeQueueStore(home / "consumequeue")
        self.meta = MetadataStore(home / "metadata", config.metadata_sync)
        self._checkpoint = Checkpoint(home / "checkpoint")
        self._write_lock = threading.Lock()
        self._next_offsets: dict[tuple[str, int], int] = {}  # writer-owned cache of each queue's max offset
        self._last_store_timestamp = 0
        self._clean_lock = threading.Lock()
        self._arrivals = threading.Condition()  # notified after every acknowledged put (long polling)
        self._closed = False
        self._put_listeners: list[PutListener] = []
        self._release_policy: ReleasePolicy | None = None
        self.recover()
        self._stop = threading.Event()
        self._maintenance = background_thread(self._maintain, "store-maintenance")
        self._maintenance.start()

    # ---- topics ----------------------------------------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        check_name("topic", config.name)
        with self._write_lock:
            self._check_open()
            if self.meta.get_topic(config.name) is not None:
                raise TopicExists(config.name)
            created_at = max(clock.now_ms(), self._last_store_timestamp + 1)
            config = validated(TopicConfig, {**config.model_dump(), "created_at": created_at})
            self.meta.put_topic(config)
        return config

    def get_topic(self, name: str) -> TopicConfig:
        config = self.meta.get_topic(check_name("topic", name))
        if config is None:
            raise TopicNotFound(name)
        return config

    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        return self.meta.list_topics(after, check_page_limit(limit), self.config.max_page_bytes)

    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        with self._write_lock:
            self._check_open()
            current = self.get_topic(name)
            updated = updated_topic(current, retention_ms, queues, attributes)
            self.meta.put_topic(updated, previous=current)
        return updated

    def delete_topic(self, name: str) -> None:
        with self._write_lock:
            self._check_open()
            config = self.get_topic(name)
            self.meta.delete_topic(config)
            self.cq.drop_topic(name)
            self.cq.flush()  # the ConsumeQueue has no WAL: make the drop durable before anyone reuses the name
            for key in [key for key in self._next_offsets if key[0] == name]:
                del self._next_offsets[key]

    # ---- groups and consumer offsets -------------------------------------------------------------

    def create_group(self, config: GroupConfig) -> GroupConfig:
        check_name("group", config.name)
        with self._write_lock:
            self._check_open()
            if self.meta.get_group(config.name) is not None:
                raise GroupExists(config.name)
            config = validated(GroupConfig, {**config.model_dump(), "created_at": clock.now_ms()})
            self.meta.put_group(config)
        return config

    def get_group(self, name: str) -> GroupConfig:
        config = self.meta.get_group(check_name("group", name))
        if config is None:
            raise GroupNotFound(name)
        return config

    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        return self.meta.list_groups(after, check_page_limit(limit), self.config.max_page_bytes)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        with self._write_lock:
            self._check_open()
            current = self.get_group(config.name)
            config = validated(GroupConfig, {**config.model_dump(), "created_at": current.created_at})
            self.meta.put_group(config)
        return config

    def delete_group(self, name: str) -> None:
        with self._write_lock:  # serialized with update_group and commit_offsets: nothing brings the group back
            self._check_open()
            self.get_group(name)
            self.meta.delete_group(name)

    def commit_offsets(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        with self._write_lock:  # the group's existence and `expected` hold until the write is made
            self._check_open()
            self.get_group(group)
            config = self.get_topic(topic)
            for queue, offset in offsets.items():
                check_queue(config, queue)
                max_offset = self.max_offset(topic, queue)
                if not isinstance(offset, int) or not 0 <= offset <= max_offset:
                    raise OffsetOutOfRange(topic, queue, offset, self.cq.min_offset(topic, queue), max_offset)
            if expected:
                committed = self.meta.committed_offsets(group, topic)
                for queue, offset in expected.items():
                    if committed.get(queue) != offset:
                        raise OffsetConflict(group, topic, queue, offset, committed.get(queue))
            self.meta.commit_offsets(group, topic, dict(offsets))

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        self.get_group(group)
        self.get_topic(topic)
        return self.meta.committed_offsets(group, topic)

    def group_topics(self, group: str) -> list[str]:
        self.get_group(group)
        return self.meta.group_topics(group)

    # ---- users -----------------------------------------------------------------------------------

    def create_user(self, user: UserRecord) -> UserRecord:
        with self._write_lock:
            self._check_open()
            if self.meta.get_user(user.name) is not None:
                raise UserExists(user.name)
            user = validated(UserRecord, {**user.model_dump(), "created_at": clock.now_ms()})
            self.meta.put_user(user)
        return user

    def get_user(self, name: str) -> UserRecord:
        user = self.meta.get_user(name) if isinstance(name, str) else None
        if user is None:
            raise UserNotFound(name)
        return user

    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        return self.meta.list_users(after, check_page_limit(limit), self.config.max_page_bytes)

    def update_user(self, user: UserRecord) -> UserRecord:
        with self._write_lock:
            self._check_open()
            current = self.get_user(user.name)
            user = validated(UserRecord, {**user.model_dump(), "created_at": current.created_at})
            self.meta.put_user(user)
        return user

    def delete_user(self, name: str) -> None:
        with self._write_lock:
            self._check_open()
            self.get_user(name)
            self.meta.delete_user(name)

    # ---- put -------------------------------------------------------------------------------------

    def put(self, topic: str, messages: Sequence[Message]) -> list[PutResult]:
        return self._append(topic, validate_batch(self.config, self.get_topic(topic), messages))

    def put_records(self, topic: str, records: bytes, default_queue: int = 0) -> list[PutResult]:
        return self._append(topic, validate_records(self.config, self.get_topic(topic), records, default_queue))

    def _append(self, topic: str, batch: ValidatedBatch) -> list[PutResult]:
        with self._write_lock:
            self._check_open()
            if self.meta.get_topic(topic) is None:  # deleted while we validated
                raise TopicNotFound(topic)
            store_timestamp = self._last_store_timestamp = max(clock.now_ms(), self._last_store_timestamp)
            next_offsets: dict[int, int] = {}
            offsets, positions = [], []
            start = position = self.commitlog.written_position
            for queue, size in zip(batch.queues, batch.sizes, strict=True):
                offset = next_offsets.get(queue)
                if offset is None:
                    offset = self._writer_max_offset(topic, queue)
                next_offsets[queue] = offset + 1
                offsets.append(offset)
                positions.append(position)
                position += size
            stored = StoredBatch(topic, store_timestamp, batch.queues, offsets, positions, batch.sizes)
            data = batch.stamped(offsets, start, store_timestamp)
            try:
                self.commitlog.append(data)
                self.cq.dispatch(stored, self.commitlog.segment_start(start), batch.tag_codes, batch.keys)
            except BaseException:
                if self.commitlog.failure is None:
                    self.commitlog.truncate(start)  # never leave log records the ConsumeQueue does not know
                raise
            for queue, offset in next_offsets.items():
                self._next_offsets[(topic, queue)] = offset
        if self.commitlog.sync:
            self.commitlog.wait_durable(position)
        with self._arrivals:
            self._arrivals.notify_all()
        for listener in self._put_listeners:
            listener(stored)
        return [
            PutResult(message_id(physical, size), queue, offset, store_timestamp)
            for queue, offset, physical, size in zip(batch.queues, offsets, positions, batch.sizes, strict=True)
        ]

    # ---- get -------------------------------------------------------------------------------------

    def read_queue(self, request: ReadRequest) -> RunsRead:
        """Choose what a read returns: runs of adjacent records in the commit log, from ConsumeQueue
        entries alone (tag codes filter here; bodies are not touched)."""
        topic, queue, offset = request.topic, request.queue, request.offset
        check_queue(self.get_topic(topic), queue)
        tag_filter = check_read(request, self.config.max_get_messages)
        min_offset, max_offset = self.cq.min_offset(topic, queue), self.max_offset(topic, queue)
        if type(offset) is not int or not min_offset <= offset <= max_offset:
            raise OffsetOutOfRange(topic, queue, offset, min_offset, max_offset)
        scan_end = min(max_offset, offset + scan_size(request.max_messages, tag_filter))
        entries = self.cq.entries(topic, queue, offset, scan_end)
        if len(entries) != scan_end - offset:
            self._raced_with_cleaner(topic, queue, offset, max_offset)
        readable = self.commitlog.readable_position
        selection = select_runs(entries, offset, request.max_messages, request.max_bytes, tag_filter, readable)
        return RunsRead(topic, queue, selection, self.commitlog.read, tag_filter, min_offset, max_offset)

    def _raced_with_cleaner(self, topic: str, queue: int, offset: int, max_offset: int) -> None:
        min_offset = self.cq.min_offset(topic, queue)
        if offset < min_offset:
            raise OffsetOutOfRange(topic, queue, offset, min_offset, max_offset)
        raise CorruptStore(f"ConsumeQueue {topic}:{queue} is missing entries from offset {offset}")

    def wait_for_messages(self, topic: str, queue: int, offset: int, timeout_s: float) -> bool:
        check_queue(self.get_topic(topic), queue)
        deadline = time.monotonic() + timeout_s

        def arrived() -> bool:
            return self.readable_max_offset(topic, queue) > offset or self._closed

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

    def queues(self) -> Iterator[QueueExtent]:
        return self.cq.queues()

    def add_put_listener(self, listener: PutListener) -> None:
        self._put_listeners.append(listener)

    def set_release_policy(self, policy: ReleasePolicy) -> None:
        self._release_policy = policy

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
        return self._first_offset(topic, queue, low, high, lambda e: e.store_timestamp >= timestamp_ms)

    def _first_offset(self, topic: str, queue: int, low: int, high: int, predicate: Callable[[CqEntry], bool]) -> int:
        """The first offset in [low, high) whose entry satisfies a predicate monotonic in offset (else high)."""
        while low < high:
            middle = (low + high) // 2
            entry = self.cq.entry(topic, queue, middle)
            if entry is not None and predicate(entry):
                high = middle
            else:
                low = middle + 1
        return low

    def message_by_id(self, msg_id: str) -> StoredMessage:
        position, size = parse_message_id(msg_id)
        if position < self.commitlog.min_position or position + size > self.commitlog.readable_position:
            raise MessageNotFound(f"with id {msg_id}")
        message = read_by_id(msg_id, self.config.max_message_bytes, self.commitlog.read)
        if not self._is_live(message):
            raise MessageNotFound(f"with id {msg_id}")
        return message

    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        self.get_topic(topic)
        if not isinstance(key, str) or not key:
            raise InvalidArgument("key must be a non-empty string")
        limit = check_page_limit(limit)
        readable = self.commitlog.readable_position
        starts = [segment.start for segment in self.commitlog.segments()]
        found = [(p, s) for p, s in self.cq.key_lookup(starts, topic, key) if p + s <= readable]
        messages = []
        for position, size in reversed(found):
            message = self._read_at(position, size)
            if message is not None and message.topic == topic and key in message.keys:
                messages.append(message)
                if len(messages) == limit:
                    break
        return messages[::-1]

    def _read_at(self, position: int, size: int) -> StoredMessage | None:
        """The live message stored at `position`, or None if it is damaged, expired or of a deleted topic."""
        try:
            message = decode_message(self.commitlog.read(position, size))
        except CorruptStore:
            return None
        return message if self._is_live(message) else None

    def _is_live(self, message: StoredMessage) -> bool:
        """Whether a message read from the log is still there to read: its topic (not a deleted one of the same
        name) holds it, and retention has not passed it."""
        config = self.meta.get_topic(message.topic)
        if config is None or message.store_timestamp < config.created_at:
            return False
        return message.queue_offset >= self.cq.min_offset(message.topic, message.queue)

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

    def _write_checkpoint(self, clean: bool) -> None:
        with self._write_lock:
            position, store_timestamp = self.commitlog.written_position, self._last_store_timestamp
        self.commitlog.wait_durable(position)
        self.cq.flush()
        self._checkpoint.write(CheckpointState(position, clean, store_timestamp))

    def recover(self) -> None:
        """Replay the log from the checkpoint into the ConsumeQueue, cut a torn tail, repair maxima."""
        checkpoint = self._checkpoint.read()
        self._last_store_timestamp = checkpoint.store_timestamp
        commitlog = self.commitlog
        end = start = max(min(checkpoint.position, commitlog.written_position), commitlog.min_position)
        for batch in commitlog.iter_batches(start):
            self._dispatch_logged(batch)
            end = batch[-1].physical_offset + batch[-1].size
        if end < commitlog.written_position:
            commitlog.truncate(end)
        if not checkpoint.clean:
            self._repair_maxima(end)
        self._next_offsets.clear()
        self.cq.flush()
        self._checkpoint.write(CheckpointState(end, False, self._last_store_timestamp))
        if not checkpoint.clean:
            self.clean_expired()

    def _dispatch_logged(self, batch: list[RecordHeader]) -> StoredBatch | None:
        """Index one batch read back from the log (recovery, a slave's replica), as `_append` indexed it when it
        was written; None if its topic is gone (deleted, or made again since)."""
        first = batch[0]
        self._last_store_timestamp = max(self._last_store_timestamp, first.store_timestamp)
        config = self.meta.get_topic(first.topic)
        if config is None or first.store_timestamp < config.created_at:
            return None
        stored = StoredBatch(
            first.topic,
            first.store_timestamp,
            [r.queue for r in batch],
            [r.queue_offset for r in batch],
            [r.physical_offset for r in batch],
            [r.size for r in batch],
        )
        tag_codes, keys = [tag_hash(r.tag) for r in batch], [r.keys for r in batch]
        self.cq.dispatch(stored, self.commitlog.segment_start(first.physical_offset), tag_codes, keys)
        return stored

    # ---- replication: a slave broker's log is a copy of its master's (RIP-31, embedded/replica.py) ------

    def read_replica(self, position: int, max_bytes: int) -> ReplicaChunk:
        """The whole batches of this log from `position` (where the slave's log ends), at most `max_bytes` unless
        one batch is larger, within one segment; no data when the slave has everything. Below this log's first
        segment, the chunk starts at that segment (an empty slave starts there)."""
        self._check_open()
        log = self.commitlog
        written = log.written_position
        if type(position) is not int or position < 0 or position > written:
            raise ReplicaDiverged(f"the slave's log ends at {position!r}, past the end of the master's at {written}")
        position = max(position, log.min_position)
        segment_start = log.segment_start(position)
        if position == written:
            return ReplicaChunk(position, segment_start, written, b"")
        segment_end = next((s.end for s in log.segments() if s.start == segment_start), written)
        available = min(segment_end, written) - position
        window = min(max(max_bytes, 1), available)
        while True:
            data = log.read(position, window)
            batches = list(scan_batches(data, position))
            if batches:
                break
            if window == available:
                raise ReplicaDiverged(f"position {position} is not where a batch starts in the master's log")
            window = min(window * 2, available)
        end = batches[-1][-1].physical_offset + batches[-1][-1].size
        topics = {}
        for name in dict.fromkeys(header.topic for batch in batches for header in batch):
            config = self.meta.get_topic(name)
            if config is not None:
                topics[name] = config
        return ReplicaChunk(position, segment_start, written, data[: end - position], tuple(topics.values()))

    def apply_replica(self, chunk: ReplicaChunk) -> int:
        """Write a master's chunk to this log where the master wrote it, index it as the master did, and make it
        durable as this store's flush type says; return where this log now ends (the next chunk's position)."""
        stored: list[StoredBatch] = []
        with self._write_lock:
            self._check_open()
            for config in chunk.topics:
                current = self.meta.get_topic(config.name)
                if current != config:
                    self.meta.put_topic(config, previous=current)
            if not chunk.data:
                return self.commitlog.written_position
            batches = list(scan_batches(chunk.data, chunk.position))
            if not batches or batches[-1][-1].physical_offset + batches[-1][-1].size != chunk.end:
                raise ReplicaDiverged(f"the chunk at {chunk.position} does not hold whole batches")
            self.commitlog.append_replica(chunk.data, chunk.position, chunk.segment_start)
            try:
                for batch in batches:
                    batch_stored = self._dispatch_logged(batch)
                    if batch_stored is not None:
                        stored.append(batch_stored)
                    for header in batch:
                        self._next_offsets[(header.topic, header.queue)] = header.queue_offset + 1
            except BaseException:
                if self.commitlog.failure is None:
                    self.commitlog.truncate(chunk.position)
                self._next_offsets.clear()
                raise
        if self.commitlog.sync:
            self.commitlog.wait_durable(chunk.end)
        with self._arrivals:
            self._arrivals.notify_all()
        for batch_stored in stored:
            for listener in self._put_listeners:
                listener(batch_stored)
        return chunk.end

    def _repair_maxima(self, log_end: int) -> None:
        """Drop ConsumeQueue entries that point past the end of the log (the log lost its tail)."""
        for topic, queue, max_offset in list(self.cq.queues()):
            last = self.cq.entry(topic, queue, max_offset - 1) if max_offset else None
            if max_offset and (last is None or last.end > log_end):
                low = self.cq.min_offset(topic, queue)
                keep = self._first_offset(topic, queue, low, max_offset, lambda e: e.end > log_end)
                self.cq.truncate_queue(topic, queue, keep)

    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        """Expire messages past their topic's retention; delete segments no topic can still need.

        A segment may go once every record in it is older than the longest retention of any topic.
        Queue minimums advance first (and are flushed) so no ConsumeQueue entry points into a
        deleted segment; the segment's key-index entries go with it.
        """
        with self._clean_lock:
            return self._clean_expired(clock.now_ms() if now_ms is None else now_ms)

    def release_segments(self, wanted_bytes: int, safe_before: int) -> CleanReport:
        """Remove the oldest whole segments that end at or below `safe_before` (everything below it is safe in a
        cold tier), until `wanted_bytes` are freed or none is left that may go: RocketMQ's forcible clean-up, for a
        broker past its disk quota (RIP-31). Retention would have removed them later."""
        with self._clean_lock:
            segments = self.commitlog.segments()
            keep_from, freed = segments[0].start, 0
            for segment in segments[:-1]:
                if freed >= wanted_bytes or segment.end > safe_before:
                    break
                keep_from, freed = segment.end, freed + segment.end - segment.start
            if keep_from == segments[0].start:
                return CleanReport(0, 0)
            return self._clean_expired(clock.now_ms(), floor=keep_from)

    def disk_usage(self) -> int:
        """Bytes this store's messages take: its commit log and ConsumeQueue (with the key index), what RIP-31
        counts against a broker's disk quota (metadata and checkpoints are left out, as RocketMQ leaves them)."""
        log_bytes = sum(segment.end - segment.start for segment in self.commitlog.segments())
        return log_bytes + _table_bytes(self.config.home / "consumequeue")

    def _clean_expired(self, now: int, floor: int = 0) -> CleanReport:
        longest = self.meta.longest_retention_ms()
        segments = self.commitlog.segments()
        keep_from = segments[0].start
        if longest is None:
            keep_from = segments[-1].start
        elif longest != FOREVER:
            for _, (next_start, _) in itertools.pairwise(segments):
                first = self.commitlog.first_store_timestamp(next_start)
                if first is None or first >= now - longest:
                    break
                keep_from = next_start
        if self._release_policy is not None:
            keep_from = max(keep_from, self._released_before(self._release_policy, segments, now))
        keep_from = max(keep_from, floor)
        expired = 0
        for topic, queue, max_offset in list(self.cq.queues()):
            config = self.meta.get_topic(topic)
            if config is None:
                with self._write_lock:
                    self.cq.drop_topic(topic)
                continue
            min_offset = self.cq.min_offset(topic, queue)
            cutoff = -1 if config.retention_ms is None else now - config.retention_ms

            def live(entry: CqEntry, cutoff: int = cutoff) -> bool:
                return entry.store_timestamp >= cutoff and entry.position >= keep_from

            oldest = self.cq.entry(topic, queue, min_offset) if min_offset < max_offset else None
            if oldest is None or live(oldest):
                continue  # the common case: nothing to expire in this queue, one lookup
            new_min = self._first_offset(topic, queue, min_offset, max_offset, live)
            if new_min > min_offset:
                self.cq.advance_min(topic, queue, min_offset, new_min)
                expired += new_min - min_offset
        deleted = []
        if keep_from > segments[0].start:
            self.cq.flush()
            deleted = self.commitlog.delete_segments_before(keep_from)
            for start, end in deleted:
                self.cq.drop_key_index(start, end)
        return CleanReport(len(deleted), expired)

    def _released_before(self, policy: ReleasePolicy, segments: list[SegmentRange], now: int) -> int:
        """Where the segments the release policy lets go end: uploaded wholly and old enough."""
        frontier = policy.uploaded_before()
        release_from = segments[0].start
        for _, (next_start, _) in itertools.pairwise(segments):
            first = self.commitlog.first_store_timestamp(next_start)
            if next_start > frontier or first is None or first >= now - policy.min_age_ms:
                break
            release_from = next_start
        return release_from

    def _maintain(self) -> None:
        """Background: checkpoint and clean on their intervals until closed. A round that fails is logged and
        the next one tries again; a failed store (its commit log failed) stops checkpointing, as a checkpoint
        would claim data durable that is not."""
        next_clean = time.monotonic() + self.config.clean_interval_s
        while not self._stop.wait(self.config.checkpoint_interval_s):
            if self.commitlog.failure is not None:
                continue
            try:
                self._write_checkpoint(clean=False)
            except StoreClosed:
                return
            except StoreFailed:
                continue  # logged when the commit log failed
            except Exception:
                log.exception(
                    "checkpoint of %s failed; the next is due in %s s",
                    self.config.home,
                    self.config.checkpoint_interval_s,
                )
            if time.monotonic() < next_clean:
                continue
            next_clean = time.monotonic() + self.config.clean_interval_s
            try:
                self.clean_expired()
            except StoreClosed:
                return
            except Exception:
                log.exception(
                    "retention of %s failed; it runs again in %s s", self.config.home, self.config.clean_interval_s
                )

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def open_kv(self) -> KeyValueStore:
        return self.open_kv_over(self)

    def open_kv_over(self, store: MessageStore) -> KeyValueStore:
        from .kv import EmbeddedKeyValueStore

        return EmbeddedKeyValueStore(store, self.config.home / "kv", self.config.metadata_sync)

    def close(self) -> None:
        if self._closed:
            return
        self.close_kv()
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


def _table_bytes(directory: os.PathLike) -> int:
    """The size of a RocksDB's table files (its data; not its info log, manifest or options files)."""
    total = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(".sst"):
                with contextlib.suppress(FileNotFoundError):  # compaction removed it meanwhile
                    total += entry.stat().st_size
    return total


__all__ = ["EmbeddedMessageStore"]
