"""`ServerlessMessageStore`: any number of stateless processes producing and consuming over a shared
directory (EFS in AWS) and DynamoDB, with no process that owns a queue (RIP-20's stateless compute).

    store.py        the MessageStore: reads here, the rest from the modules below
    lookups.py      lookups by id and by key, the hot tier then the cold
    hot_reads.py    the reads of the segment files (the hot records)
    metadata.py     topics, groups and users: one DynamoDB item each
    offsets.py      the consumer groups' committed offsets
    appender.py     the put: a batch appended to the writer's segment file, then sequenced
    sends.py        idempotent sends: a key's record written with the sequencing of its batch
    segments.py     the records: each writer's own files on the shared directory
    queue_index.py  the sequencing protocol: offsets, dense and ordered, from one DynamoDB write per batch
    tables.py       the DynamoDB tables: topics, groups, offsets, queues, batches, pop_ledger, timers, transactions,
                    sends
    pop.py          the pop groups' ledgers (pop consumption's state)
    timers.py       a DELAY topic's messages sent for later, moved onto their topic when due
    transactions.py transactional messages: half messages in the segment files, their state in DynamoDB
    cold.py         the cold tier as this backend reads it
    maintenance.py  the scheduled run: upload to the cold tier, retention, deleting unreferenced files
    arrivals.py     long polling: the waits of one process share one poll of the queues waited on
    kv/             the KV namespaces, on three tables of their own

A put validates the whole batch, appends its records (each queue's together) to the writer's segment file
with one write and one fsync, then sequences it, all or nothing: one UpdateItem when it goes to one queue,
one TransactWriteItems over the queues' items when it is spread over several (queue_index.py says why that is
safe), and acknowledges. A read finds its batches through the queue item (and, further back, the `batches`
items) and reads each with one pread, giving records their real offsets (`record.rebase`); below the
queue's hot boundary it reads the cold tier instead (maintenance.py moves messages there).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    InvalidArgument,
    OffsetOutOfRange,
    QueueOutOfRange,
)
from tidemq_protocol.filter import MessageFilter, SqlFilter
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.record import (
    decode_records,
)

from ..acl import UserRecord
from ..api import UNSET, CleanReport, MaintenanceReport
from ..batch import ValidatedBatch
from ..config import StoreConfig, TierMedium
from ..health import Probe
from ..model import (
    GroupConfig,
    Page,
    PutResult,
    QueueOffsets,
    TierQueueStatus,
    TopicConfig,
    check_queue,
)
from ..pop.api import PopLedger
from ..reads import DecodedRead, QueueRead, ReadRequest, RunsRead, check_read, matching
from ..selection import scan_size
from ..sends import SendKey
from ..timer.api import TimerStore
from ..timer.plan import put_delayed
from ..transactions.api import TransactionLog
from .appender import Appender
from .arrivals import ArrivalWatch
from .hot_reads import SegmentReads
from .known_queues import QUEUE_CACHE_S, KnownQueue
from .lookups import Lookups
from .metadata import Metadata
from .offsets import ConsumerOffsets
from .queue_index import BatchesMoved, BatchRef, QueueIndex, QueueState
from .segments import SegmentWriter, read_segment
from .sends import SendRecords
from .tables import Tables

if TYPE_CHECKING:
    from .maintenance import Maintenance

WAIT_POLL_S = 0.05


class ServerlessMessageStore(Lookups):
    """A `MessageStore` any number of processes open at once over the same shared directory, tables and bucket."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.tables = Tables(config.dynamodb_prefix)
        self.tables.create_missing()
        self.segments = config.efs_directory / "segments"
        max_age_s = min(config.efs_segment_age_s, config.efs_segment_grace_s / 2)  # segments.py says why
        self.writer = SegmentWriter(self.segments, config.efs_segment_bytes, max_age_s)
        self.index = QueueIndex(self.tables, self._keys_of)
        self.hot = SegmentReads(self.segments, self.index, config.max_batch_messages)
        self.metadata = Metadata(self.tables, config.max_page_bytes)
        self.offsets = ConsumerOffsets(self.tables, self.metadata, self.index)
        sends = SendRecords(self.tables, config.send_dedup_window_ms)
        self.appender = Appender(config, self.metadata, self.writer, self.index, self._delayed, sends)
        self._arrivals = ArrivalWatch(self.index.next_offsets, WAIT_POLL_S)
        self.tier = None
        self._probes = [Probe("dynamodb", True, self.tables.probe), Probe("disk", True, self.writer.disk.check)]
        if config.tier is not TierMedium.OFF:
            from .cold import ColdTier

            self.tier = ColdTier(config)
            self.tier_medium = self.tier.medium
            self._probes.append(Probe(self.tier.driver.kind, False, self.tier.driver.probe))

    @property
    def requests(self) -> int:
        """DynamoDB requests this process has made so far (for the benchmark's requests per message)."""
        return self.tables.requests

    # ---- topics, users and groups (metadata.py) --------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        return self.metadata.create_topic(config)

    def get_topic(self, name: str) -> TopicConfig:
        return self.metadata.get_topic(name)

    def cached_topic(self, name: str) -> TopicConfig:
        return self.metadata.cached_topic(name)

    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        return self.metadata.list_topics(after, limit)

    def all_topics(self) -> Iterator[TopicConfig]:
        """Every topic, a page of 1,000 at a time."""
        return self.metadata.all_topics()

    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        return self.metadata.update_topic(name, retention_ms=retention_ms, queues=queues, attributes=attributes)

    def delete_topic(self, name: str) -> None:
        """The topic's item, then its queues' items, every group's offsets and pop ledgers of it and its tier files."""
        config = self.metadata.delete_topic(name)
        for queue in range(config.queues):
            self.index.drop(name, queue)
        self.offsets.forget_topic(name)
        self.pop_ledger.forget_topic(name)  # a topic made again under the name starts every pop group afresh
        if config.message_type is MessageType.DELAY:
            self.timers.forget_topic(name)
        self.transactions.forget_topic(name)  # its half messages are never committed
        if self.tier is not None:
            self.tier.forget(name)

    def _cached_topic(self, topic: str, fresh: bool = False) -> TopicConfig:
        """The topic's config as puts and reads see it (`Metadata.cached_topic`)."""
        return self.metadata.cached_topic(topic, fresh)

    def create_user(self, user: UserRecord) -> UserRecord:
        return self.metadata.create_user(user)

    def get_user(self, name: str) -> UserRecord:
        return self.metadata.get_user(name)

    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        return self.metadata.list_users(after, limit)

    def update_user(self, user: UserRecord) -> UserRecord:
        return self.metadata.update_user(user)

    def delete_user(self, name: str) -> None:
        self.metadata.delete_user(name)

    def create_group(self, config: GroupConfig) -> GroupConfig:
        return self.metadata.create_group(config)

    def get_group(self, name: str) -> GroupConfig:
        return self.metadata.get_group(name)

    def cached_group(self, name: str) -> GroupConfig:
        return self.metadata.cached_group(name)

    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        return self.metadata.list_groups(after, limit)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        return self.metadata.update_group(config)

    def delete_group(self, name: str) -> None:
        """The group's item goes first: from then on every commit's condition on it fails, so no commit writes
        offsets behind the deletion (a commit made before it is in the `by_group` index within a second or so)."""
        self.metadata.delete_group(name)
        self.offsets.forget_group(name)
        self.pop_ledger.forget_group(name)

    # ---- offsets (offsets.py) --------------------------------------------------------------------

    def commit_offsets(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        self.offsets.commit(group, topic, offsets, expected)

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        return self.offsets.committed(group, topic)

    def group_topics(self, group: str) -> list[str]:
        return self.offsets.group_topics(group)

    # ---- put (appender.py) -----------------------------------------------------------------------

    def put(self, topic: str, messages: Sequence[Message], send: SendKey | None = None) -> list[PutResult]:
        return self.appender.put(topic, messages, send)

    def put_records(
        self, topic: str, records: bytes, default_queue: int = 0, send: SendKey | None = None
    ) -> list[PutResult]:
        return self.appender.put_records(topic, records, default_queue, send)

    def _delayed(self, config: TopicConfig, batch: ValidatedBatch, send: SendKey | None) -> list[PutResult]:
        """A DELAY topic's checked batch: appended if every message is due, else kept until due (timers.py); once
        for `send` either way (both write the key's `sends` item, sends.py)."""

        def append(due: ValidatedBatch, key: SendKey | None) -> list[PutResult]:
            if key is None:
                return self.appender.append(config.name, due)
            return self.appender.sends.append_once(config, due, key, self.appender.append)

        return put_delayed(self.timers, self.config, config, batch, append, clock.now_ms(), send)

    def open_timers(self) -> TimerStore:
        from .timers import DynamoTimers

        return DynamoTimers(
            self.config,
            self.tables,
            self.metadata,
            self.writer,
            self.segments,
            self.appender,
            self.message_by_id,
            self.appender.sends,
        )

    def _keys_of(self, batch: BatchRef) -> set[str]:
        data = read_segment(self.segments, batch.file, batch.position, batch.length)
        return {key for message in decode_records(data) for key in message.keys}

    # ---- get -------------------------------------------------------------------------------------

    def read_queue(self, request: ReadRequest) -> QueueRead:
        """Whole records with their real offsets, decoded (so `read_records` counts the messages that match): below the
        queue's hot boundary the cold tier's, read as the tiered store reads them, else the batches' in the segment
        files, which are decoded to choose (no ConsumeQueue holds their tags); a SQL92 filter is evaluated on the
        records where they lie, cold (`RunsRead`, the embedded engine's) and hot (hot_reads.py). Messages this
        process knows are there cost no request (known_queues.py); a read whose batches moved cold or whose segment
        file is gone since its view of the queue was taken is made again from a fresh one (never answered from
        further on: that would skip what the store holds)."""
        topic, queue = request.topic, request.queue
        config = self._cached_topic(topic)
        try:
            check_queue(config, queue)
        except QueueOutOfRange:
            check_queue(config := self._cached_topic(topic, fresh=True), queue)
        chosen_by = check_read(request, self.config.max_get_messages)
        if config.message_type is MessageType.DELAY:
            self.timers.asked(topic)  # a consumer asks: the topic's due timers move first (timers.py)
        through = request.offset + scan_size(request.max_messages, chosen_by) if type(request.offset) is int else 0
        try:
            return self._read(request, chosen_by, self.index.readable(topic, queue, through, config.queues))
        except (OSError, BatchesMoved):
            self.index.known.forget(topic, queue)
            return self._read(request, chosen_by, self.index.readable(topic, queue, through, config.queues))

    def _read(self, request: ReadRequest, chosen_by: MessageFilter | None, known: KnownQueue) -> QueueRead:
        topic, queue, offset, state = request.topic, request.queue, request.offset, known.state
        max_messages, max_bytes = request.max_messages, request.max_bytes
        low, high = self._min_offset(topic, queue, state), state.next_offset
        if type(offset) is not int or not low <= offset <= high:
            raise OffsetOutOfRange(topic, queue, offset, low, high)
        if offset < state.hot_offset and self.tier is not None:
            cold = self.tier.read(topic, queue, offset, max_messages, max_bytes, chosen_by, state.hot_offset, high)
            if isinstance(chosen_by, SqlFilter):
                return RunsRead(topic, queue, cold.selection, cold.block.records, chosen_by, low, high)
            records = cold.records()
            messages = decode_records(records, None if chosen_by else (topic, queue, offset))
            return DecodedRead(records, matching(messages, chosen_by), cold.selection.next_offset, low, high)
        end = min(high, offset + scan_size(max_messages, chosen_by))
        if isinstance(chosen_by, SqlFilter):
            return self.hot.selected(request, chosen_by, known, end, low, high)
        parts, messages, size, next_offset = [], [], 0, offset
        for message, record in self.hot.records(topic, queue, known, offset, end):
            if chosen_by is None or chosen_by.accepts(message):
                if messages and size + len(record) > max_bytes:
                    break
                parts.append(record)
                messages.append(message)
                size += len(record)
            next_offset = message.queue_offset + 1
            if len(messages) == max_messages:
                break
        return DecodedRead(b"".join(parts), messages, next_offset, low, high)

    def wait_for_messages(self, topic: str, queue: int, offset: int, timeout_s: float) -> bool:
        """Long polling: the process's waits share one poll, a BatchGetItem of the queues waited on every
        WAIT_POLL_S (no process can notify us: arrivals.py)."""
        config = self.get_topic(topic)
        check_queue(config, queue)
        if config.message_type is not MessageType.DELAY:
            return self._arrivals.wait(topic, queue, offset, timeout_s)
        deadline, poll = time.monotonic() + timeout_s, self.config.timer_poll_ms / 1000
        while (left := deadline - time.monotonic()) > 0:  # a DELAY topic's waiter moves its due timers as it waits
            self.timers.asked(topic)
            if self._arrivals.wait(topic, queue, offset, min(left, poll)):
                return True
        return False

    def _min_offset(self, topic: str, queue: int, state: QueueState) -> int:
        """The oldest readable offset: the queue's minimum, or below the hot boundary, the cold tier's."""
        if self.tier is None or state.hot_offset <= state.min_offset:
            return state.min_offset
        return max(state.min_offset, self.tier.min_offset(topic, queue, state.hot_offset))

    def queue_offsets(self, topic: str) -> list[QueueOffsets]:
        config = self.get_topic(topic)
        offsets = []
        for queue in range(config.queues):
            state = self.index.state(topic, queue)
            offsets.append(QueueOffsets(queue, self._min_offset(topic, queue, state), state.next_offset))
        return offsets

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        """The first batch stored at or after the time: the cold tier's answer below the hot boundary, else a
        paged walk of the queue's batch items and entries."""
        check_queue(self.get_topic(topic), queue)
        if not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool):
            raise InvalidArgument(f"timestamp must be an integer (ms since the epoch), got {timestamp_ms!r}")
        state = self.index.state(topic, queue)
        if self.tier is not None and state.hot_offset > state.min_offset:
            found = self.tier.offset_for_timestamp(topic, queue, timestamp_ms, state.hot_offset)
            if found is not None:
                return max(found, state.min_offset)
        low = max(state.min_offset, state.hot_offset)
        for ref in self.index.walk(topic, queue, state, low):
            if ref.store_timestamp >= timestamp_ms:
                return max(ref.first_offset, low)
        return state.next_offset

    # ---- cold tier -------------------------------------------------------------------------------

    def tier_status(self, topic: str) -> list[TierQueueStatus]:
        config = self.get_topic(topic)
        statuses = []
        for queue in range(config.queues):
            state = self.index.state(topic, queue)
            cold_min = cold_max = None
            if self.tier is not None:
                cold_min, cold_max = self.tier.range(topic, queue)
            uploaded = state.min_offset if cold_max is None else max(cold_max, state.min_offset)
            lag = max(0, state.next_offset - uploaded)
            oldest = next((ref.store_timestamp for ref in state.pending if ref.end_offset > uploaded), None)
            seconds = 0.0 if not lag or oldest is None else max(0.0, (clock.now_ms() - oldest) / 1000)
            statuses.append(
                TierQueueStatus(
                    queue,
                    max(state.min_offset, state.hot_offset),
                    cold_min,
                    cold_max,
                    state.next_offset,
                    lag if self.tier else 0,
                    round(seconds, 3),
                )
            )
        return statuses

    def upload_now(self, topic: str | None = None) -> int:
        """Run the maintenance upload now (what the scheduled function does), for `topic` or every dirty queue."""
        if topic is not None:
            self.get_topic(topic)
        if self.tier is None:
            return 0
        return self.maintenance().upload(topic).messages

    # ---- lifecycle -------------------------------------------------------------------------------

    def maintenance(self, skip_margin_s: float | None = None) -> Maintenance:
        """The maintenance run (maintenance.py), handed the parts of this store it works on; `skip_margin_s`
        instead of its SKIP_MARGIN_S (tests shorten it)."""
        from .maintenance import SKIP_MARGIN_S, Maintenance  # on first use: without a cold tier, puts load none of it

        skip_margin_s = SKIP_MARGIN_S if skip_margin_s is None else skip_margin_s
        parts = self.config, self.metadata, self.tables, self.index, self.segments, self.tier
        return Maintenance(*parts, skip_margin_s=skip_margin_s)

    def maintain(self) -> MaintenanceReport:
        """The maintenance run (maintenance.py): upload, then delete files nothing references."""
        return self.maintenance().run().summary()

    def probes(self) -> list[Probe]:
        """DynamoDB and the shared directory (writes need both), and the cold tier's medium (they do not)."""
        return self._probes

    def flush(self) -> None:
        """Nothing to do: every batch is fsync'd and sequenced before its put returns."""

    def recover(self) -> None:
        """Nothing to do: no process owns a queue, so none has anything to recover."""

    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        """Retention (the maintenance run's part that needs no cold tier)."""
        return self.maintenance().retention(now_ms)

    def open_kv(self):
        from .kv import ServerlessKeyValueStore

        return ServerlessKeyValueStore(self.tables)

    def open_pop_ledger(self) -> PopLedger:
        from ..pop.known import KnownLedgers
        from .pop import DynamoDbPopLedger

        return KnownLedgers(DynamoDbPopLedger(self.tables), QUEUE_CACHE_S)  # a read is a Query: known.py

    def open_transactions(self) -> TransactionLog:
        from .transactions import DynamoDbTransactionLog

        return DynamoDbTransactionLog(self)

    def close(self) -> None:
        if self._timers is not None:
            self._timers.close()
        self.close_transactions()
        self.close_pop_ledger()
        self.close_kv()
        self.writer.close()
        if self.tier is not None:
            self.tier.close()


__all__ = ["ServerlessMessageStore"]
