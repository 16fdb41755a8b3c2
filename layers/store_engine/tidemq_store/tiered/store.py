"""`TieredMessageStore`: the access layer over a hot store and its cold tier (RocketMQ 5.1's TieredMessageStore).

Writes, metadata and long polling go to the hot store, reached only through its interface (`hot.HotStore`);
every acknowledged put is dispatched to the tier (dispatcher.py), whose progress the tier keeps itself
(progress.py). Reads choose a tier per `tier_level` (config.TieredStorageLevel) and offset:

    DISABLE      hot
    NOT_IN_DISK  cold below the hot minimum (hot segments removed by hot retention), else hot
    NOT_IN_MEM   also cold when the record is more than `tier_in_memory_bytes` behind the hot log's end
    FORCE        cold wherever the tier holds the offset

and fall back to the hot tier for offsets the tier does not hold yet (or when a cold read fails while
the hot tier still has the data). Cold reads go through the read-ahead cache (cache.py), filter by tag
on the server from the tier's ConsumeQueue, and return the records byte for byte as stored, so a
consumer cannot tell which tier served it. A queue's readable range starts at the lower of the two
minimums. Lookups by message id and key ask the hot tier, then the tier's index (lookup.py: what only the tier
holds, once hot segments are gone); a lookup by time (`offset_for_timestamp`) searches the tier's ConsumeQueue
below the hot minimum.

Hot retention (`hot_retention_ms`): hot segments whose records are all in the tier and older than it are
removed by the hot cleaner (never under DISABLE, which could not read them back); topic retention also
deletes cold segments whose messages expired.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial

from tidemq_protocol import clock
from tidemq_protocol.errors import MessageNotFound, OffsetOutOfRange, TideMQError, TopicNotFound
from tidemq_protocol.message import Message, StoredMessage
from tidemq_protocol.record import parse_message_id

from ..acl import UserRecord
from ..api import UNSET, CleanReport, MessageStore
from ..config import StoreConfig, TieredStorageLevel
from ..health import Probe
from ..hot import HotStore, ReleasePolicy
from ..kv.api import KeyValueStore
from ..model import (
    GroupConfig,
    Page,
    PutResult,
    QueueOffsets,
    TierQueueStatus,
    TopicConfig,
    check_page_limit,
    check_queue,
)
from ..pop.api import PopLedger
from ..reads import QueueRead, ReadRequest, RunsRead, check_read
from ..sends import SendKey
from ..timer.api import TimerStore
from ..transactions.api import TransactionLog
from .cache import ReadAheadCache, read_cold
from .container import TieredQueue
from .directory import expire_directories, write_directory
from .dispatcher import TieredDispatcher
from .lookup import ColdLookup, ColdQueue, QueuePlace, newest
from .progress import ProgressStore
from .segment import TierDriver

log = logging.getLogger("tidemq.tier")


class TieredMessageStore(MessageStore):
    """The `MessageStore` of a hot store with a cold tier on `driver` (see the module docstring)."""

    def __init__(self, hot: HotStore, driver: TierDriver, config: StoreConfig) -> None:
        self.hot, self.driver, self.config = hot, driver, config
        self.tier_medium = driver.describe()
        self.tier_probe = Probe(driver.kind, False, driver.probe)
        self._closed = False
        self.progress = ProgressStore(config.home / "tier-progress", config.metadata_sync)
        self.dispatcher = TieredDispatcher(hot, driver, self.progress, config)
        self.cache = ReadAheadCache(config.tier_cache_bytes, config.tier_cache_ttl_s)
        self.lookup = ColdLookup(driver)
        hot.add_put_listener(self.dispatcher.dispatch)
        if config.tier_level is not TieredStorageLevel.DISABLE:
            hot.set_segment_archive(partial(write_directory, driver))
        if config.hot_retention_ms is not None and config.tier_level is not TieredStorageLevel.DISABLE:
            hot.set_release_policy(ReleasePolicy(self.dispatcher.uploaded_before, config.hot_retention_ms))

    # ---- topics and groups: the hot store's ------------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        return self.hot.create_topic(config)

    def get_topic(self, name: str) -> TopicConfig:
        return self.hot.get_topic(name)

    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        return self.hot.list_topics(after, limit)

    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        return self.hot.update_topic(name, retention_ms=retention_ms, queues=queues, attributes=attributes)

    def delete_topic(self, name: str) -> None:
        config = self.hot.get_topic(name)
        locks = [self.dispatcher.queue_lock(name, queue) for queue in range(config.queues)]
        for lock in locks:  # no upload of the topic is running, none starts
            lock.acquire()
        try:
            self.hot.delete_topic(name)
            self.dispatcher.forget(name)
            self.cache.forget(name)
        finally:
            for lock in locks:
                lock.release()

    def create_group(self, config: GroupConfig) -> GroupConfig:
        return self.hot.create_group(config)

    def get_group(self, name: str) -> GroupConfig:
        return self.hot.get_group(name)

    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        return self.hot.list_groups(after, limit)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        return self.hot.update_group(config)

    def delete_group(self, name: str) -> None:
        self.hot.delete_group(name)

    def create_user(self, user: UserRecord) -> UserRecord:
        return self.hot.create_user(user)

    def get_user(self, name: str) -> UserRecord:
        return self.hot.get_user(name)

    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        return self.hot.list_users(after, limit)

    def update_user(self, user: UserRecord) -> UserRecord:
        return self.hot.update_user(user)

    def delete_user(self, name: str) -> None:
        self.hot.delete_user(name)

    def commit_offsets(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        self.hot.commit_offsets(group, topic, offsets, expected)

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        return self.hot.committed_offsets(group, topic)

    def group_topics(self, group: str) -> list[str]:
        return self.hot.group_topics(group)

    # ---- messages --------------------------------------------------------------------------------

    def put(self, topic: str, messages: Sequence[Message], send: SendKey | None = None) -> list[PutResult]:
        return self.hot.put(topic, messages, send)  # the hot store's put listener dispatches to the tier

    def put_records(
        self, topic: str, records: bytes, default_queue: int = 0, send: SendKey | None = None
    ) -> list[PutResult]:
        return self.hot.put_records(topic, records, default_queue, send)

    def read_queue(self, request: ReadRequest) -> QueueRead:
        """The cold tier's read where `_route` says (see the module docstring), else the hot store's, with the
        queue's minimum (in the read and in its errors) counting the cold tier."""
        cold = self._cold_read(request)
        if cold is not None:
            return cold
        topic, queue = request.topic, request.queue
        try:
            read = self.hot.read_queue(request)
        except OffsetOutOfRange as error:
            low = self._min_offset(topic, queue, error.min_offset)
            if low != error.min_offset:
                raise OffsetOutOfRange(topic, queue, request.offset, low, error.max_offset) from None
            raise
        read.min_offset = self._min_offset(topic, queue, read.min_offset)
        return read

    def _route(self, topic: str, queue: int, offset: int) -> TieredQueue | None:
        """The tier queue to read `offset` from, or None for the hot tier (see the module docstring)."""
        level = self.config.tier_level
        if level is TieredStorageLevel.DISABLE or not isinstance(offset, int):
            return None
        hot_min = self.hot.min_offset(topic, queue)
        if level is TieredStorageLevel.NOT_IN_DISK and offset >= hot_min:
            return None
        if not self.dispatcher.has_tier_data(topic, queue):
            return None
        tiered = self.dispatcher.tiered_queue(topic, queue)
        low, high = tiered.min_offset, tiered.max_offset
        if low is None or not low <= offset < high:
            return None
        if offset < hot_min or level is TieredStorageLevel.FORCE:
            return tiered
        if level is TieredStorageLevel.NOT_IN_MEM:
            hot_entry = self.hot.entries(topic, queue, offset, offset + 1)
            if not hot_entry:  # released from the hot tier meanwhile
                return tiered
            behind = self.hot.written_position - hot_entry[0].position
            return tiered if behind > self.config.tier_in_memory_bytes else None
        return None

    def _cold_read(self, request: ReadRequest) -> RunsRead | None:
        """The read from the cold tier's read-ahead cache, or None to read hot."""
        topic, queue, offset = request.topic, request.queue, request.offset
        check_queue(self.hot.get_topic(topic), queue)
        message_filter = check_read(request, self.config.max_get_messages)
        tiered = self._route(topic, queue, offset)
        if tiered is None:
            return None
        try:
            cold = read_cold(self.cache, tiered, offset, request.max_messages, request.max_bytes, message_filter)
        except Exception:
            if offset >= self.hot.min_offset(topic, queue):
                log.warning("cold read of %s:%s at %s failed; reading hot", topic, queue, offset, exc_info=True)
                return None
            raise
        min_offset = min(tiered.min_offset, self.hot.min_offset(topic, queue))
        max_offset = self.hot.max_offset(topic, queue)
        return RunsRead(topic, queue, cold.selection, cold.block.records, message_filter, min_offset, max_offset)

    def _min_offset(self, topic: str, queue: int, hot_min: int) -> int:
        if self.config.tier_level is TieredStorageLevel.DISABLE or not self.dispatcher.has_tier_data(topic, queue):
            return hot_min
        cold_min = self.dispatcher.tiered_queue(topic, queue).min_offset
        return hot_min if cold_min is None else min(cold_min, hot_min)

    def wait_for_messages(self, topic: str, queue: int, offset: int, timeout_s: float) -> bool:
        return self.hot.wait_for_messages(topic, queue, offset, timeout_s)

    def queue_offsets(self, topic: str) -> list[QueueOffsets]:
        return [
            QueueOffsets(q.queue, self._min_offset(topic, q.queue, q.min_offset), q.max_offset)
            for q in self.hot.queue_offsets(topic)
        ]

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        offset = self.hot.offset_for_timestamp(topic, queue, timestamp_ms)
        hot_min = self.hot.min_offset(topic, queue)
        if offset > hot_min or self.config.tier_level is TieredStorageLevel.DISABLE:
            return offset
        if not self.dispatcher.has_tier_data(topic, queue):
            return offset
        tiered = self.dispatcher.tiered_queue(topic, queue)
        low, high = tiered.min_offset, min(tiered.max_offset or 0, hot_min)
        if low is None or low >= high:
            return offset
        return tiered.first_offset_stored_at(timestamp_ms, low, high)

    def message_by_id(self, msg_id: str) -> StoredMessage:
        """The hot tier's message, else the cold tier's, searched in one queue (lookup.py): the one its record names
        while the hot commit log holds its place (retention may have released it already), else the one the tier's
        id directory lists for the place (directory.py)."""
        try:
            return self.hot.message_by_id(msg_id)
        except MessageNotFound:
            if self.config.tier_level is TieredStorageLevel.DISABLE:
                raise
            physical, _ = parse_message_id(msg_id)
            # While the hot log holds the place, the record there names its queue (none for a timer's or a half
            # message's id); once its segment is gone (maybe while it was read), the id directory does.
            place = self.hot.record_queue(msg_id) if physical >= self.hot.first_position else None
            if place is not None:
                places = [place]
            elif physical < self.hot.first_position:
                places = self.lookup.queues_at(msg_id)
            else:
                places = []
            found = self.lookup.by_id(self._cold_queues(places), msg_id)
            if found is None or not self._in_tier_range(found):
                raise
            return found

    def _cold_queues(self, places: Iterable[QueuePlace]) -> Iterator[ColdQueue]:
        """The tier queues of `places` holding offsets the hot tier no longer has, each with its hot minimum: what
        to search for what the hot tier lacks."""
        for name, queue in places:
            try:
                hot_min = self.hot.min_offset(name, queue)
            except TopicNotFound:
                continue
            if hot_min > 0 and self.dispatcher.has_tier_data(name, queue):
                yield self.dispatcher.tiered_queue(name, queue), hot_min

    def _topic_queues(self, topic: str) -> list[QueuePlace]:
        """The queues of `topic` the tier holds."""
        return [(name, queue) for name, queue in self.progress.queues() if name == topic]

    def _in_tier_range(self, message: StoredMessage) -> bool:
        """Whether a message found in the tier (within its queue's tier range) is its topic's: the topic exists
        and was not created after the message (a deleted topic's name taken again)."""
        try:
            return message.store_timestamp >= self.hot.get_topic(message.topic).created_at
        except TopicNotFound:
            return False

    @property
    def timers(self) -> TimerStore:
        return self.hot.timers

    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        """The hot tier's and the cold tier's messages carrying `key` (lookup.py), the newest `limit`."""
        hot = self.hot.messages_by_key(topic, key, limit)
        if self.config.tier_level is TieredStorageLevel.DISABLE:
            return hot
        queues = self._cold_queues(self._topic_queues(topic))
        cold = [m for m in self.lookup.by_key(queues, key, limit) if self._in_tier_range(m)]
        return newest(hot, cold, check_page_limit(limit))

    # ---- cold tier -------------------------------------------------------------------------------

    def tier_status(self, topic: str) -> list[TierQueueStatus]:
        statuses = []
        for offsets in self.hot.queue_offsets(topic):
            queue = offsets.queue
            cold_min = cold_max = None
            if self.dispatcher.has_tier_data(topic, queue):
                tiered = self.dispatcher.tiered_queue(topic, queue)
                cold_min, cold_max = tiered.min_offset, tiered.max_offset
            lag = self.dispatcher.lag(topic, queue)
            statuses.append(
                TierQueueStatus(
                    queue,
                    offsets.min_offset,
                    cold_min,
                    cold_max,
                    offsets.max_offset,
                    lag.messages,
                    round(lag.seconds, 3),
                )
            )
        return statuses

    def upload_now(self, topic: str | None = None) -> int:
        if topic is not None:
            self.hot.get_topic(topic)
        return self.dispatcher.upload_now(topic)

    # ---- lifecycle -------------------------------------------------------------------------------

    def check_health(self) -> None:
        self.hot.check_health()

    def probes(self) -> list[Probe]:
        """The hot store's, and the tier's medium (not required: produce goes on while uploads wait)."""
        return [*self.hot.probes(), self.tier_probe]

    def flush(self) -> None:
        self.hot.flush()

    def recover(self) -> None:
        self.hot.recover()

    def release_to_tier(self, wanted_bytes: int) -> CleanReport:
        """Remove the oldest hot segments the tier holds whole, until `wanted_bytes` are freed, however young (a
        broker past its disk quota, RIP-31); none under DISABLE, which never reads them back from the tier."""
        if self.config.tier_level is TieredStorageLevel.DISABLE:
            return CleanReport(0, 0)
        return self.hot.release_segments(wanted_bytes, self.dispatcher.uploaded_before())

    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        """Hot retention and release, then topic retention in the tier, then the id directory's objects older than
        the longest retention of a topic in the tier (directory.py)."""
        report = self.hot.clean_expired(now_ms)
        now = clock.now_ms() if now_ms is None else now_ms
        expired = 0
        longest: int | None = 0  # the longest retention of a topic in the tier (None: one keeps forever)
        for topic, queue in list(self.progress.queues()):
            try:
                config = self.hot.get_topic(topic)
            except TopicNotFound:
                continue
            if config.retention_ms is None:
                longest = None
                continue
            longest = None if longest is None else max(longest, config.retention_ms)
            with self.dispatcher.queue_lock(topic, queue):
                try:
                    expired += self.dispatcher.tiered_queue(topic, queue).delete_expired(now - config.retention_ms)
                except TideMQError:
                    log.exception("cold retention of %s:%s failed", topic, queue)
        if longest is not None and self.config.tier_level is not TieredStorageLevel.DISABLE:
            expire_directories(self.driver, (now - longest) / 1000)
        return CleanReport(report.segments_deleted, report.messages_expired + expired)

    def open_kv(self) -> KeyValueStore:
        return self.hot.open_kv_over(self)

    @property
    def pop_ledger(self) -> PopLedger:
        """The hot store's: pop state is no part of what the tier holds."""
        return self.hot.pop_ledger

    @property
    def transactions(self) -> TransactionLog:
        """The hot store's: transactions are no part of what the tier holds."""
        return self.hot.transactions

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_kv()
        self.dispatcher.close()
        self.cache.close()
        self.progress.close()
        self.hot.close()
