"""`ServerlessMessageStore`: any number of stateless processes producing and consuming over a shared
directory (EFS in AWS) and DynamoDB, with no process that owns a queue (RIP-20's stateless compute).

    segments.py     the records: each writer's own files on the shared directory
    queue_index.py  the sequencing protocol: offsets, dense and ordered, from one DynamoDB write per batch
    tables.py       the DynamoDB tables: topics, groups, offsets, queues, batches
    maintenance.py  the scheduled run: upload to the cold tier, retention, deleting unreferenced files
    arrivals.py     long polling: the waits of one process share one poll of the queues waited on

A put validates the whole batch, appends its records (each queue's together) to the writer's segment file
with one write and one fsync, then sequences it, all or nothing: one UpdateItem when it goes to one queue,
one TransactWriteItems over the queues' items when it is spread over several (queue_index.py says why that is
safe), and acknowledges. A read finds its batches through the queue item (and, further back, the `batches`
items) and reads each with one pread, giving records their real offsets (`record.rebase`); below the
queue's hot boundary it reads the cold tier instead (maintenance.py moves messages there).
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator, Mapping, Sequence

from pynamodb.exceptions import DeleteError, DoesNotExist, PutError, TransactWriteError
from pynamodb.transactions import TransactWrite

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    GroupExists,
    GroupNotFound,
    InvalidArgument,
    MessageNotFound,
    OffsetConflict,
    OffsetOutOfRange,
    QueueOutOfRange,
    QueuesCannotShrink,
    TopicExists,
    TopicNotFound,
    UserExists,
    UserNotFound,
)
from tidemq_protocol.message import Message, StoredMessage, TagFilter
from tidemq_protocol.names import check_name
from tidemq_protocol.record import decode_records, message_id, parse_message_id, read_by_id, rebase

from ..acl import UserRecord
from ..api import UNSET, CleanReport, MaintenanceReport, MessageStore
from ..batch import ValidatedBatch, validate_batch, validate_records
from ..config import StoreConfig, TierMedium
from ..model import (
    GetResult,
    GroupConfig,
    Page,
    PutResult,
    QueueOffsets,
    RecordBatch,
    TierQueueStatus,
    TopicConfig,
    check_page_limit,
    check_queue,
    take_page,
    validated,
)
from ..selection import check_read, scan_size
from .arrivals import ArrivalWatch
from .queue_index import (
    BACKOFF_S,
    MAX_BACKOFF_S,
    BatchRef,
    QueueIndex,
    QueueMissing,
    QueueState,
    is_conditional,
    raced,
)
from .segments import SegmentWriter, physical_offset, read_segment, split_physical
from .tables import Tables

TOPIC_CACHE_S = 5.0
WAIT_POLL_S = 0.05
COMMIT_QUEUES = 99  # offsets in one commit transaction (DynamoDB's limit of 100 items, less the group's condition)
COMMIT_ATTEMPTS = 8  # a commit that met a concurrent transaction on its items tries this many times more
CONDITION_FAILED = "ConditionalCheckFailed"


class ServerlessMessageStore(MessageStore):
    """A `MessageStore` any number of processes open at once over the same shared directory, tables and bucket."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.tables = Tables(config.dynamodb_prefix)
        self.tables.create_missing()
        self.segments = config.efs_directory / "segments"
        max_age_s = min(config.efs_segment_age_s, config.efs_segment_grace_s / 2)  # segments.py says why
        self.writer = SegmentWriter(self.segments, config.efs_segment_bytes, max_age_s)
        self.index = QueueIndex(self.tables, self._keys_of)
        self._arrivals = ArrivalWatch(self.index.next_offsets, WAIT_POLL_S)
        self._topics: dict[str, tuple[float, TopicConfig]] = {}
        self.tier = None
        if config.tier is not TierMedium.OFF:
            from .cold import ColdTier

            self.tier = ColdTier(config)
            self.tier_medium = self.tier.medium

    @property
    def requests(self) -> int:
        """DynamoDB requests this process has made so far (for the benchmark's requests per message)."""
        return self.tables.requests

    # ---- topics ----------------------------------------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        """One conditional PutItem; each queue's item is made by its first put."""
        check_name("topic", config.name)
        created = validated(TopicConfig, {**config.model_dump(), "created_at": clock.now_ms()})
        topics = self.tables.topics
        return _save_config(topics, "topic", created, topics.name.does_not_exist(), TopicExists(config.name))

    def get_topic(self, name: str) -> TopicConfig:
        check_name("topic", name)
        try:
            item = self.tables.topics.get("topic", name, consistent_read=True)
        except DoesNotExist:
            raise TopicNotFound(name) from None
        return TopicConfig.model_validate_json(item.config)

    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        return self._list(self.tables.topics, "topic", TopicConfig, after, limit)

    def _list(self, model, kind: str, config_type, after: str | None, limit: int) -> Page:
        """A page of configs in name order (`model.take_page`): one Query, of one item more than the page when
        the page is cut by bytes. Safe against concurrent deletes: each item holds the whole config, so nothing is
        read per entry after the Query; an item deleted meanwhile is listed as it was or not at all, and the next
        page is a Query for the names after `after`, whether that one is still there, so none is listed twice."""
        check_page_limit(limit)
        condition = model.name > after if after else None
        items = model.query(kind, condition, limit=limit, consistent_read=True)
        return take_page((item.config for item in items), config_type, limit, self.config.max_page_bytes)

    def all_topics(self) -> Iterator[TopicConfig]:
        """Every topic, a page of 1,000 at a time."""
        after = None
        while page := self.list_topics(after, 1000):
            yield from page
            after = page[-1].name

    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        current = self.get_topic(name)
        changes = {}
        if retention_ms is not UNSET:
            changes["retention_ms"] = retention_ms
        if queues is not None:
            if queues < current.queues:
                raise QueuesCannotShrink(name, current.queues, queues)
            changes["queues"] = queues
        if attributes is not None:
            changes["attributes"] = dict(attributes)
        updated = validated(TopicConfig, {**current.model_dump(), **changes})
        self.tables.topics("topic", name, config=updated.model_dump_json()).save()
        return updated

    def delete_topic(self, name: str) -> None:
        config = self.get_topic(name)
        self.tables.topics("topic", name).delete()
        self._topics.pop(name, None)
        for queue in range(config.queues):
            self.index.drop(name, queue)
        with self.tables.offsets.batch_write() as writer:
            for item in self.tables.offsets.query(name):
                writer.delete(item)
        if self.tier is not None:
            self.tier.forget(name)

    # ---- users -----------------------------------------------------------------------------------

    def create_user(self, user: UserRecord) -> UserRecord:
        created = validated(UserRecord, {**user.model_dump(), "created_at": clock.now_ms()})
        users = self.tables.users
        return _save_config(users, "user", created, users.name.does_not_exist(), UserExists(user.name))

    def get_user(self, name: str) -> UserRecord:
        try:
            return UserRecord.model_validate_json(self.tables.users.get("user", name, consistent_read=True).config)
        except (DoesNotExist, ValueError):
            raise UserNotFound(name) from None

    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        return self._list(self.tables.users, "user", UserRecord, after, limit)

    def update_user(self, user: UserRecord) -> UserRecord:
        current = self.get_user(user.name)
        updated = validated(UserRecord, {**user.model_dump(), "created_at": current.created_at})
        users = self.tables.users
        return _save_config(users, "user", updated, users.name.exists(), UserNotFound(user.name))

    def delete_user(self, name: str) -> None:
        users = self.tables.users
        try:
            users("user", name).delete(condition=users.name.exists())
        except DeleteError as error:
            if is_conditional(error):
                raise UserNotFound(name) from None
            raise

    # ---- groups and offsets ----------------------------------------------------------------------

    def create_group(self, config: GroupConfig) -> GroupConfig:
        check_name("group", config.name)
        created = validated(GroupConfig, {**config.model_dump(), "created_at": clock.now_ms()})
        groups = self.tables.groups
        return _save_config(groups, "group", created, groups.name.does_not_exist(), GroupExists(config.name))

    def get_group(self, name: str) -> GroupConfig:
        check_name("group", name)
        try:
            return GroupConfig.model_validate_json(self.tables.groups.get("group", name, consistent_read=True).config)
        except DoesNotExist:
            raise GroupNotFound(name) from None

    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        return self._list(self.tables.groups, "group", GroupConfig, after, limit)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        current = self.get_group(config.name)
        updated = validated(GroupConfig, {**config.model_dump(), "created_at": current.created_at})
        groups = self.tables.groups
        return _save_config(groups, "group", updated, groups.name.exists(), GroupNotFound(config.name))

    def delete_group(self, name: str) -> None:
        """The group's item goes first: from then on every commit's condition on it fails, so no commit writes
        offsets behind the deletion (a commit made before it is in the `by_group` index within a second or so)."""
        self.get_group(name)
        self.tables.groups("group", name).delete()
        offsets = self.tables.offsets
        with offsets.batch_write() as writer:
            for item in offsets.by_group.query(name):
                writer.delete(offsets(item.topic, item.slot))

    def commit_offsets(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        """One TransactWriteItems: a condition that the group's item exists (so a commit never outlives its
        group's deletion), with `expected` a condition on each of those queues' offset items, and the puts.
        More than COMMIT_QUEUES queues go in several transactions (a compare-and-set is refused beyond that)."""
        config = self.get_topic(topic)
        for queue, offset in offsets.items():
            check_queue(config, queue)
            state = self.index.state(topic, queue)
            if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= state.next_offset:
                raise OffsetOutOfRange(topic, queue, offset, state.min_offset, state.next_offset)
        expected = dict(expected or {})
        queues = sorted(set(offsets) | set(expected))
        if expected and len(queues) > COMMIT_QUEUES:
            raise InvalidArgument(f"a compare-and-set commit covers at most {COMMIT_QUEUES} queues, not {len(queues)}")
        for start in range(0, len(queues), COMMIT_QUEUES):
            chunk = queues[start : start + COMMIT_QUEUES]
            self._commit(group, topic, {q: offsets[q] for q in chunk if q in offsets}, expected, chunk)

    def _commit(
        self, group: str, topic: str, offsets: dict[int, int], expected: dict[int, int | None], queues: list[int]
    ) -> None:
        groups, items = self.tables.groups, self.tables.offsets
        for attempt in itertools.count():
            try:
                with TransactWrite(connection=self.tables.connection) as transaction:
                    transaction.condition_check(groups, "group", group, condition=groups.name.exists())
                    for queue in queues:
                        condition = None
                        if queue in expected:
                            seen = expected[queue]
                            condition = items.slot.does_not_exist() if seen is None else items.offset == seen
                        if queue in offsets:
                            item = items(topic, _slot(group, queue), group=group, queue=queue, offset=offsets[queue])
                            transaction.save(item, condition=condition)
                        else:
                            transaction.condition_check(items, topic, _slot(group, queue), condition=condition)
                return
            except TransactWriteError as error:
                failed = [i for i, r in enumerate(error.cancellation_reasons or []) if r and r.code == CONDITION_FAILED]
                if failed and failed[0] == 0:
                    raise GroupNotFound(group) from None
                if failed:
                    queue = queues[failed[0] - 1]
                    actual = self.committed_offsets(group, topic).get(queue)
                    raise OffsetConflict(group, topic, queue, expected.get(queue), actual) from None
                if not raced(error) or attempt >= COMMIT_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0, min(MAX_BACKOFF_S, BACKOFF_S * 2**attempt)))  # a concurrent commit

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        self.get_group(group)
        self.get_topic(topic)
        offsets = self.tables.offsets
        items = offsets.query(topic, offsets.slot.startswith(f"{group}/"), consistent_read=True)
        return {int(item.queue): int(item.offset) for item in items}

    def group_topics(self, group: str) -> list[str]:
        """The group's topics, from the `by_group` index (eventually consistent: a first commit shows up
        within a second or so)."""
        self.get_group(group)
        return sorted({item.topic for item in self.tables.offsets.by_group.query(group)})

    # ---- put -------------------------------------------------------------------------------------

    def _cached_topic(self, topic: str, fresh: bool = False) -> TopicConfig:
        """The topic's config, read at most every TOPIC_CACHE_S per process, for puts and reads (neither should
        cost a read of the topic; a deleted topic stays readable for that long). A queue beyond the cached count
        is looked up again before it is refused, so a topic that grew is seen at once."""
        cached = self._topics.get(topic)
        if fresh or cached is None or time.monotonic() - cached[0] > TOPIC_CACHE_S:
            cached = self._topics[topic] = (time.monotonic(), self.get_topic(topic))
        return cached[1]

    def put(self, topic: str, messages: Sequence[Message]) -> list[PutResult]:
        try:
            batch = validate_batch(self.config, self._cached_topic(topic), messages)
        except QueueOutOfRange:
            batch = validate_batch(self.config, self._cached_topic(topic, fresh=True), messages)
        return self._append(topic, batch)

    def put_records(self, topic: str, records: bytes, default_queue: int = 0) -> list[PutResult]:
        try:
            batch = validate_records(self.config, self._cached_topic(topic), records, default_queue)
        except QueueOutOfRange:
            batch = validate_records(self.config, self._cached_topic(topic, fresh=True), records, default_queue)
        return self._append(topic, batch)

    def _append(self, topic: str, batch: ValidatedBatch) -> list[PutResult]:
        by_queue: dict[int, list[int]] = {}
        for index, queue in enumerate(batch.queues):
            by_queue.setdefault(queue, []).append(index)
        queues = sorted(by_queue)
        grouped = batch.take([index for queue in queues for index in by_queue[queue]])  # each queue's together
        relative = [i for queue in queues for i in range(len(by_queue[queue]))]  # offsets within each queue's part
        store_timestamp = clock.now_ms()
        appended = self.writer.append(lambda start: grouped.stamped(relative, start, store_timestamp))
        parts, at = {}, appended.position
        for queue in queues:
            indexes = by_queue[queue]
            length = sum(batch.sizes[index] for index in indexes)
            has_keys = any(batch.keys[index] for index in indexes)
            parts[queue] = BatchRef(0, len(indexes), appended.file, at, length, store_timestamp, has_keys)
            at += length
        firsts = self._sequence(topic, parts)
        results: list[PutResult | None] = [None] * len(batch)
        for queue, part in parts.items():
            at = part.position
            for i, index in enumerate(by_queue[queue]):
                size = batch.sizes[index]
                msg_id = message_id(physical_offset(appended.file, at), size)
                results[index] = PutResult(msg_id, queue, firsts[queue] + i, store_timestamp)
                at += size
        return results  # type: ignore[return-value]

    def _sequence(self, topic: str, parts: dict[int, BatchRef]) -> dict[int, int]:
        """Give each queue's part of the batch its offsets, all or none (queue_index.py); the first of each."""
        try:
            return self.index.sequence(topic, parts)
        except QueueMissing as missing:  # a queue's first put, or the topic is gone (or lost it): look again
            config = self._cached_topic(topic, fresh=True)
            for queue in missing.queues:
                check_queue(config, queue)
                self.index.create(topic, queue)
            return self.index.sequence(topic, parts)

    def _keys_of(self, batch: BatchRef) -> set[str]:
        data = read_segment(self.segments, batch.file, batch.position, batch.length)
        return {key for message in decode_records(data) for key in message.keys}

    # ---- get -------------------------------------------------------------------------------------

    def _select(self, topic, queue, offset, max_messages, max_bytes, tag_filter):
        """(records, messages, next_offset, min, max) of a read: whole records with their real offsets."""
        try:
            check_queue(self._cached_topic(topic), queue)
        except QueueOutOfRange:
            check_queue(self._cached_topic(topic, fresh=True), queue)
        tag_filter = check_read(max_messages, max_bytes, self.config.max_get_messages, tag_filter)
        state = self.index.state(topic, queue)
        low, high = self._min_offset(topic, queue, state), state.next_offset
        if type(offset) is not int or not low <= offset <= high:
            raise OffsetOutOfRange(topic, queue, offset, low, high)
        if offset < state.hot_offset and self.tier is not None:
            cold = self.tier.read(topic, queue, offset, max_messages, max_bytes, tag_filter, state.hot_offset, high)
            records, next_offset = cold.records, cold.next_offset
            messages = decode_records(records, None if tag_filter else (topic, queue, offset))
            if tag_filter is not None:  # tag codes can collide: confirm the real tag
                messages = [m for m in messages if tag_filter.matches(m.tag)]
            return records, messages, next_offset, low, high
        end = min(high, offset + scan_size(max_messages, tag_filter))
        refs = self.index.batches(topic, queue, state, offset, end, self.config.max_batch_messages)
        parts, messages, size, next_offset = [], [], 0, offset
        for ref in refs:
            data = rebase(read_segment(self.segments, ref.file, ref.position, ref.length), ref.first_offset)
            decoded = decode_records(data, (topic, queue, ref.first_offset))
            position = 0
            for message in decoded:
                length = int.from_bytes(data[position : position + 4], "little")
                record = data[position : position + length]
                position += length
                if message.queue_offset < offset:
                    continue
                if message.queue_offset >= end:
                    return b"".join(parts), messages, next_offset, low, high
                if tag_filter is None or tag_filter.matches(message.tag):
                    if messages and size + length > max_bytes:
                        return b"".join(parts), messages, next_offset, low, high
                    parts.append(record)
                    messages.append(message)
                    size += length
                next_offset = message.queue_offset + 1
                if len(messages) == max_messages:
                    return b"".join(parts), messages, next_offset, low, high
        return b"".join(parts), messages, next_offset, low, high

    def get(
        self,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int = 32,
        max_bytes: int = 4 * 1024 * 1024,
        tag_filter: str | TagFilter | None = None,
    ) -> GetResult:
        _, messages, next_offset, low, high = self._select(topic, queue, offset, max_messages, max_bytes, tag_filter)
        return GetResult(messages, next_offset, low, high)

    def read_records(
        self,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int = 1000,
        max_bytes: int = 4 * 1024 * 1024,
        tag_filter: str | TagFilter | None = None,
    ) -> RecordBatch:
        records, messages, next_offset, low, high = self._select(
            topic, queue, offset, max_messages, max_bytes, tag_filter
        )
        return RecordBatch(records, len(messages), next_offset, low, high)

    def wait_for_messages(self, topic: str, queue: int, offset: int, timeout_s: float) -> bool:
        """Long polling: the process's waits share one poll, a BatchGetItem of the queues waited on every
        WAIT_POLL_S (no process can notify us: arrivals.py)."""
        check_queue(self.get_topic(topic), queue)
        return self._arrivals.wait(topic, queue, offset, timeout_s)

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

    def message_by_id(self, msg_id: str) -> StoredMessage:
        """The id names the file and place (`record.read_by_id` checks what is there before reading it whole); the
        queue's entries (or the `by_file` index) say which offset."""
        physical, _ = parse_message_id(msg_id)
        file, position = split_physical(physical)
        message = read_by_id(msg_id, self.config.max_message_bytes, self._read_physical)
        state = self.index.state(message.topic, message.queue)
        first = next((ref.first_offset for ref in state.pending if _holds(ref, file, position)), None)
        if first is None:
            first = self.index.first_offset_at(message.topic, message.queue, file, position)
        if first is None or first + message.queue_offset < state.min_offset:
            raise MessageNotFound(f"with id {msg_id}")  # written, never sequenced (or expired)
        message.queue_offset += first
        return message

    def _read_physical(self, physical: int, length: int) -> bytes:
        return read_segment(self.segments, *split_physical(physical), length)

    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        """Batches carrying the key, newest first, per queue: the hot entries, then the batch items (a
        filtered Query of the queue's hot index; its cost grows with the hot tier, not the cold one)."""
        config = self.get_topic(topic)
        if not isinstance(key, str) or not key:
            raise InvalidArgument("key must be a non-empty string")
        check_page_limit(limit)
        found: list[StoredMessage] = []
        batches = self.tables.batches
        for queue in range(config.queues):
            state = self.index.state(topic, queue)
            keyed = [ref for ref in reversed(state.pending) if ref.has_keys]
            # Batch items as of `state`: an entry pending then may have been indexed since, and is in `keyed`.
            indexed = self.index.indexed_batches(topic, queue, True, batches.keys.contains(key))
            refs = [*keyed, *(ref for ref in indexed if ref.first_offset < state.indexed)]
            taken = 0
            for ref in refs:
                if ref.first_offset < max(state.min_offset, state.hot_offset):
                    break
                data = rebase(read_segment(self.segments, ref.file, ref.position, ref.length), ref.first_offset)
                matches = [m for m in decode_records(data) if key in m.keys]
                found += matches
                taken += len(matches)
                if taken >= limit:
                    break
        found.sort(key=lambda m: (m.store_timestamp, m.queue, m.queue_offset))
        return found[-limit:]

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
        from .maintenance import Maintenance

        return Maintenance(self).upload(topic).messages

    # ---- lifecycle -------------------------------------------------------------------------------

    def maintain(self) -> MaintenanceReport:
        """The maintenance run (maintenance.py): upload, then delete files nothing references."""
        from .maintenance import Maintenance

        return Maintenance(self).run().summary()

    def flush(self) -> None:
        """Nothing to do: every batch is fsync'd and sequenced before its put returns."""

    def recover(self) -> None:
        """Nothing to do: no process owns a queue, so none has anything to recover."""

    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        """Retention (the maintenance run's part that needs no cold tier)."""
        from .maintenance import Maintenance

        return Maintenance(self).retention(now_ms)

    def open_kv(self):
        from .kv import ServerlessKeyValueStore

        return ServerlessKeyValueStore(self)

    def close(self) -> None:
        self.close_kv()
        self.writer.close()
        if self.tier is not None:
            self.tier.close()


def _save_config(model, kind: str, config, condition, refused: Exception):
    """Put a topic's or group's config item on `condition`; raise `refused` when the condition fails."""
    try:
        model(kind, config.name, config=config.model_dump_json()).save(condition=condition)
    except PutError as error:
        if is_conditional(error):
            raise refused from None
        raise
    return config


def _slot(group: str, queue: int) -> str:
    return f"{group}/{queue:04d}"  # "/" is in no group name (model.NAME_RULE): one group's slots share a prefix


def _holds(ref: BatchRef, file: str, position: int) -> bool:
    return ref.file == file and ref.position <= position < ref.position + ref.length


__all__ = ["ServerlessMessageStore"]
