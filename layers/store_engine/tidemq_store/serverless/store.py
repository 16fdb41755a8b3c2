"""`ServerlessMessageStore`: any number of stateless processes producing and consuming over a shared
directory (EFS in AWS) and DynamoDB (tables.py), with no process that owns a queue (RIP-20).

Files: each writer (a process, a Lambda execution environment) appends to segment files of its own,
`<efs>/segments/<key:06x>`, created exclusively with a random 24-bit key. A record's physical offset is
`key << 40 | position in the file`, so a message id (record.py) says where the message is.

Produce protocol, per batch:

  1. Validate the whole batch. Encode each queue's records with queue offsets 0, 1, ... (not known yet).
  2. Append the batch to the writer's segment file with one write, and fsync it.
  3. Sequence it with one DynamoDB transaction that, for every queue in the batch, moves the queue's
     counter from N (the value the writer last saw) to N + n on condition that it is still N, and puts
     the index item (queue, first offset N, file, position, length). If another writer moved a counter
     first, the transaction changes nothing and the writer learns the new values (from the cancellation,
     else one read) and tries again: DynamoDB only, the bytes on EFS do not move.
  4. Acknowledge.

Why it is safe: offsets are only ever assigned by a successful transaction, which moves a counter from
exactly N to N + n and writes the index item for [N, N + n) atomically. So a queue's index items tile
[min_offset, next_offset) with no gap and no overlap, and an item exists exactly when its offsets do:
readers (strongly consistent) never see a hole that later fills, nor an offset twice. Bytes are durable
before they are sequenced, so every item points to data that is there. A crash before step 3 leaves
bytes no item points to (never read; compaction drops them); a crash after it leaves a stored batch
that was not acknowledged, which the producer's retry may store again (at-least-once, as everywhere).
Each batch costs one EFS append and, without contention, one DynamoDB request.

Reads find batches through the index (one Query) and read each with one read, giving the records
their real offsets (`record.rebase`) on the way out.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Mapping, Sequence

from pynamodb.exceptions import DoesNotExist, PutError, TransactWriteError
from pynamodb.transactions import TransactWrite

from ..api import UNSET, CleanReport, MessageStore
from ..batch import current_ms, validate_batch
from ..config import StoreConfig
from ..errors import (
    CorruptStore,
    GroupExists,
    GroupNotFound,
    InvalidArgument,
    MessageNotFound,
    OffsetOutOfRange,
    QueueOutOfRange,
    TopicExists,
    TopicNotFound,
)
from ..model import (
    GetResult,
    GroupConfig,
    Message,
    PutResult,
    QueueOffsets,
    RecordBatch,
    StoredMessage,
    TagFilter,
    TopicConfig,
    check_name,
    validated,
)
from ..record import decode_message, decode_records, encode_batch, message_id, parse_message_id, rebase
from ..selection import check_read
from .tables import Tables

KEY_BITS = 24
POSITION_BITS = 40
MAX_ATTEMPTS = 1000
TOPIC_CACHE_S = 5.0
BACKOFF_S = 0.001  # after a lost race: a random pause up to this, doubling per loss
MAX_BACKOFF_S = 0.05


class SegmentWriter:
    """This process's own segment file on the shared directory: one append per batch, fsync'd."""

    def __init__(self, directory, segment_bytes: int) -> None:
        self.directory, self.segment_bytes = directory, segment_bytes
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd = -1
        self.key = 0
        self.position = 0

    def _open_new(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        while True:
            key = random.getrandbits(KEY_BITS)
            try:
                self._fd = os.open(self.directory / f"{key:06x}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            self.key, self.position = key, 0
            return

    def append(self, encode) -> tuple[int, int]:
        """Write `encode(physical_start)` at the end of the current file, durably; return (file key, position)."""
        with self._lock:
            if self._fd < 0 or self.position >= self.segment_bytes:
                self._open_new()
            position = self.position
            data = encode((self.key << POSITION_BITS) | position)
            written = os.pwrite(self._fd, data, position)
            if written != len(data):
                raise OSError(f"short write to segment {self.key:06x}: {written} of {len(data)} bytes")
            os.fsync(self._fd)
            self.position += len(data)
            return self.key, position

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ServerlessMessageStore(MessageStore):
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.tables = Tables(config.dynamodb_prefix)
        self.tables.create_missing()
        self.segments = config.efs_directory / "segments"
        self.writer = SegmentWriter(self.segments, config.commitlog_segment_bytes)
        self._counters: dict[tuple[str, int], int] = {}  # the next offset this process last saw per queue
        self._topics: dict[str, tuple[float, TopicConfig]] = {}
        self.requests = 0  # DynamoDB requests made by puts (for the benchmark's requests per message)

    # ---- topics ----------------------------------------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        check_name("topic", config.name)
        created = validated(TopicConfig, {**config.model_dump(), "created_at": current_ms()})
        item = self.tables.topics("topic", created.name, config=created.model_dump_json())
        try:
            item.save(condition=self.tables.topics.name.does_not_exist())
        except PutError as error:
            if _conditional(error):
                raise TopicExists(config.name) from None
            raise
        return created

    def get_topic(self, name: str) -> TopicConfig:
        check_name("topic", name)
        try:
            item = self.tables.topics.get("topic", name, consistent_read=True)
        except DoesNotExist:
            raise TopicNotFound(name) from None
        return TopicConfig.model_validate_json(item.config)

    def list_topics(self, after: str | None = None, limit: int = 100) -> list[TopicConfig]:
        return self._list(self.tables.topics, "topic", TopicConfig, after, limit)

    def _list(self, model, kind: str, config_type, after: str | None, limit: int) -> list:
        condition = model.name > after if after else None
        items = model.query(kind, condition, limit=limit, consistent_read=True)
        return [config_type.model_validate_json(item.config) for item in items]

    def update_topic(
        self, name: str, *, retention_ms: int | object | None = UNSET, queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:  # fmt: skip
        current = self.get_topic(name)
        changes = {}
        if retention_ms is not UNSET:
            changes["retention_ms"] = retention_ms
        if queues is not None:
            if queues < current.queues:
                raise InvalidArgument(f"queues can grow, not shrink: {name} has {current.queues}")
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
            key = _queue_key(name, queue)
            with self.tables.batches.batch_write() as batch:
                for item in self.tables.batches.query(key):
                    batch.delete(item)
            self.tables.queues(key).delete()
            self._counters.pop((name, queue), None)

    # ---- groups and offsets ----------------------------------------------------------------------

    def create_group(self, config: GroupConfig) -> GroupConfig:
        check_name("group", config.name)
        created = validated(GroupConfig, {**config.model_dump(), "created_at": current_ms()})
        try:
            self.tables.groups("group", created.name, config=created.model_dump_json()).save(
                condition=self.tables.groups.name.does_not_exist()
            )
        except PutError as error:
            if _conditional(error):
                raise GroupExists(config.name) from None
            raise
        return created

    def get_group(self, name: str) -> GroupConfig:
        check_name("group", name)
        try:
            return GroupConfig.model_validate_json(self.tables.groups.get("group", name, consistent_read=True).config)
        except DoesNotExist:
            raise GroupNotFound(name) from None

    def list_groups(self, after: str | None = None, limit: int = 100) -> list[GroupConfig]:
        return self._list(self.tables.groups, "group", GroupConfig, after, limit)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        current = self.get_group(config.name)
        updated = validated(GroupConfig, {**config.model_dump(), "created_at": current.created_at})
        try:
            self.tables.groups("group", updated.name, config=updated.model_dump_json()).save(
                condition=self.tables.groups.name.exists()
            )
        except PutError as error:
            if _conditional(error):
                raise GroupNotFound(config.name) from None
            raise
        return updated

    def delete_group(self, name: str) -> None:
        self.get_group(name)
        self.tables.groups("group", name).delete()

    def commit_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        self.get_group(group)
        config = self.get_topic(topic)
        for queue, offset in offsets.items():
            _check_queue(config, queue)
            low, high = self._range(topic, queue)
            if not isinstance(offset, int) or not 0 <= offset <= high:
                raise OffsetOutOfRange(topic, queue, offset, low, high)
        with self.tables.offsets.batch_write() as batch:
            for queue, offset in offsets.items():
                batch.save(self.tables.offsets(f"{topic}@{group}", queue, offset=offset))

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        items = self.tables.offsets.query(f"{topic}@{group}", consistent_read=True)
        return {int(item.queue): int(item.offset) for item in items}

    def group_topics(self, group: str) -> list[str]:
        self.get_group(group)
        topics = []
        for config in self._all_topics():
            if next(iter(self.tables.offsets.query(f"{config.name}@{group}", limit=1)), None) is not None:
                topics.append(config.name)
        return topics

    def _all_topics(self):
        after = None
        while page := self.list_topics(after, 1000):
            yield from page
            after = page[-1].name

    # ---- put -------------------------------------------------------------------------------------

    def _topic_for_put(self, topic: str) -> TopicConfig:
        """The topic's config, read at most every TOPIC_CACHE_S per process (a put must not cost a read;
        a queue added meanwhile is refused for that long)."""
        cached = self._topics.get(topic)
        if cached is None or time.monotonic() - cached[0] > TOPIC_CACHE_S:
            self.requests += 1
            cached = self._topics[topic] = (time.monotonic(), self.get_topic(topic))
        return cached[1]

    def put(self, topic: str, messages: Sequence[Message]) -> list[PutResult]:
        config = self._topic_for_put(topic)
        pending = validate_batch(self.config, config, messages)
        store_timestamp = current_ms()
        by_queue: dict[int, list] = {}
        for index, (queue, born, props, body, _, _, _) in enumerate(pending):
            by_queue.setdefault(queue, []).append((index, born, props, body))
        order = sorted(by_queue)
        records = []
        for queue in order:  # each queue's records together, offsets relative to the batch
            records += [(queue, i, born, props, body) for i, (_, born, props, body) in enumerate(by_queue[queue])]
        key, position = self.writer.append(lambda start: encode_batch(topic.encode(), records, start, store_timestamp))
        spans, at = {}, position
        for queue in order:
            size = sum(pending[index][6] for index, *_ in by_queue[queue])
            spans[queue] = (at, size, len(by_queue[queue]))
            at += size
        keys = {queue: {k for index, *_ in by_queue[queue] for k in pending[index][5]} for queue in order}
        firsts = self._sequence(topic, key, spans, store_timestamp, keys)
        results: list[PutResult | None] = [None] * len(pending)
        for queue in order:
            at = spans[queue][0]
            for i, (index, *_) in enumerate(by_queue[queue]):
                size = pending[index][6]
                physical = (key << POSITION_BITS) | at
                results[index] = PutResult(message_id(physical, size), queue, firsts[queue] + i, store_timestamp)
                at += size
        return results  # type: ignore[return-value]

    def _sequence(
        self, topic: str, file_key: int, spans: dict[int, tuple[int, int, int]], stamp: int, keys: dict[int, set]
    ) -> dict:
        """Step 3 of the protocol: assign each queue's first offset with one transaction (retried on a race)."""
        queues = self.tables.queues
        lost = 0
        for _ in range(MAX_ATTEMPTS):
            firsts = {q: self._counters.get((topic, q), 0) for q in spans}
            try:
                self.requests += 1
                with TransactWrite(connection=self.tables.connection) as transaction:
                    for queue, (position, length, count) in spans.items():
                        first = firsts[queue]
                        counter = queues(_queue_key(topic, queue))
                        if first == 0:
                            condition = queues.next_offset.does_not_exist() | (queues.next_offset == 0)
                        else:
                            condition = queues.next_offset == first
                        transaction.update(counter, [queues.next_offset.set(first + count)], condition=condition,
                                           return_values="ALL_OLD")  # fmt: skip
                        transaction.save(self.tables.batches(_queue_key(topic, queue), first, count=count,
                                                             file=f"{file_key:06x}", position=position,
                                                             length=length, store_timestamp=stamp,
                                                             keys=keys.get(queue) or None))  # fmt: skip
            except TransactWriteError as error:
                if not self._learn_counters(topic, spans, error):
                    raise
                lost += 1  # another writer got there first: step back a little, more after each loss
                time.sleep(random.uniform(0, min(MAX_BACKOFF_S, BACKOFF_S * 2**lost)))
                continue
            for queue, (_, _, count) in spans.items():
                self._counters[(topic, queue)] = firsts[queue] + count
            return firsts
        raise TimeoutError(f"could not sequence a batch of {topic} in {MAX_ATTEMPTS} attempts")

    def _learn_counters(self, topic: str, spans: dict, error: TransactWriteError) -> bool:
        """After a lost race: update the counters we know; False if the failure was not a race."""
        reasons = error.cancellation_reasons or []
        if not any(r is not None and r.code == "ConditionalCheckFailed" for r in reasons):
            return False
        learned = set()
        for reason in reasons:
            item = reason.raw_item if reason is not None else None
            if item and "next_offset" in item and "key" in item:
                name, _, queue = item["key"]["S"].rpartition("|")
                self._counters[(name, int(queue))] = int(item["next_offset"]["N"])
                learned.add(int(queue))
        for queue in spans:
            if queue not in learned:
                self.requests += 1
                self._counters[(topic, queue)] = self._range(topic, queue)[1]
        return True

    # ---- get -------------------------------------------------------------------------------------

    def _range(self, topic: str, queue: int) -> tuple[int, int]:
        try:
            item = self.tables.queues.get(_queue_key(topic, queue), consistent_read=True)
        except DoesNotExist:
            return 0, 0
        return int(item.min_offset or 0), int(item.next_offset or 0)

    def _select(self, topic, queue, offset, max_messages, max_bytes, tag_filter):
        """(records, messages, next_offset, min, max) of a read: whole records with their real offsets."""
        config = self.get_topic(topic)
        _check_queue(config, queue)
        tag_filter = check_read(max_messages, max_bytes, self.config.max_get_messages, tag_filter)
        low, high = self._range(topic, queue)
        if type(offset) is not int or not low <= offset <= high:
            raise OffsetOutOfRange(topic, queue, offset, low, high)
        key = _queue_key(topic, queue)
        batches = self.tables.batches
        # One Query: the batch holding `offset` starts at most max_batch_messages - 1 before it.
        scan = max(max_messages, 4096) if tag_filter is not None else max_messages
        window = batches.first_offset.between(max(0, offset - self.config.max_batch_messages + 1), offset + scan)
        items = [item for item in batches.query(key, window, consistent_read=True) if offset < high
                 and int(item.first_offset) + int(item.count) > offset]  # fmt: skip
        parts, messages, taken, size, next_offset = [], [], 0, 0, offset
        for item in items:
            data = rebase(self._read_file(item.file, int(item.position), int(item.length)), int(item.first_offset))
            decoded = decode_records(data, (topic, queue, int(item.first_offset)))
            position = 0
            for message in decoded:
                length = int.from_bytes(data[position : position + 4], "little")
                record = data[position : position + length]
                position += length
                if message.queue_offset < offset:
                    continue
                if tag_filter is None or tag_filter.matches(message.tag):
                    if taken and size + length > max_bytes:
                        return b"".join(parts), messages, next_offset, low, high
                    parts.append(record)
                    messages.append(message)
                    taken += 1
                    size += length
                next_offset = message.queue_offset + 1
                if taken == max_messages:
                    return b"".join(parts), messages, next_offset, low, high
            if next_offset - offset >= max(max_messages, 4096):
                break
        return b"".join(parts), messages, next_offset, low, high

    def _read_file(self, name: str, position: int, length: int) -> bytes:
        with open(self.segments / name, "rb", buffering=0) as file:
            data = os.pread(file.fileno(), length, position)
        if len(data) != length:
            raise OSError(f"segment {name} is shorter than its index says")
        return data

    def get(
        self, topic: str, queue: int, offset: int, max_messages: int = 32, max_bytes: int = 4 * 1024 * 1024,
        tag_filter: str | TagFilter | None = None,
    ) -> GetResult:  # fmt: skip
        _, messages, next_offset, low, high = self._select(topic, queue, offset, max_messages, max_bytes, tag_filter)
        return GetResult(messages, next_offset, low, high)

    def read_records(
        self, topic: str, queue: int, offset: int, max_messages: int = 1000, max_bytes: int = 4 * 1024 * 1024,
        tag_filter: str | TagFilter | None = None,
    ) -> RecordBatch:  # fmt: skip
        records, messages, next_offset, low, high = self._select(
            topic, queue, offset, max_messages, max_bytes, tag_filter
        )
        return RecordBatch(records, len(messages), next_offset, low, high)

    def queue_offsets(self, topic: str) -> list[QueueOffsets]:
        config = self.get_topic(topic)
        return [QueueOffsets(q, *self._range(topic, q)) for q in range(config.queues)]

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        _check_queue(self.get_topic(topic), queue)
        if not isinstance(timestamp_ms, int):
            raise InvalidArgument(f"timestamp must be an integer (ms since the epoch), got {timestamp_ms!r}")
        for item in self.tables.batches.query(_queue_key(topic, queue), consistent_read=True):
            if int(item.store_timestamp) >= timestamp_ms:
                return int(item.first_offset)
        return self._range(topic, queue)[1]

    def message_by_id(self, msg_id: str) -> StoredMessage:
        """The id says which file and where; the queue's index says which offset (a scan of its items)."""
        physical, size = parse_message_id(msg_id)
        name, position = f"{physical >> POSITION_BITS:06x}", physical & ((1 << POSITION_BITS) - 1)
        try:
            message = decode_message(self._read_file(name, position, size))
        except (OSError, ValueError, CorruptStore):  # no such file, or no record there: not an id we gave out
            raise MessageNotFound(f"with id {msg_id}") from None
        batches = self.tables.batches
        found = (batches.file == name) & (batches.position <= position)
        for item in batches.query(_queue_key(message.topic, message.queue), filter_condition=found):
            if position < int(item.position) + int(item.length):
                message.queue_offset += int(item.first_offset)
                return message
        raise MessageNotFound(f"with id {msg_id}")  # written, never sequenced (or expired)

    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        """Batches carrying the key, newest first, per queue (a filtered Query of the queue's index: its cost
        grows with the queue's batches; a key table is the way to make it flat)."""
        config = self.get_topic(topic)
        if not isinstance(key, str) or not key:
            raise InvalidArgument("key must be a non-empty string")
        if not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidArgument(f"limit must be 1..1000, got {limit!r}")
        batches, found = self.tables.batches, []
        for queue in range(config.queues):
            items = batches.query(_queue_key(topic, queue), filter_condition=batches.keys.contains(key),
                                  scan_index_forward=False, consistent_read=True)  # fmt: skip
            for item in items:
                data = rebase(self._read_file(item.file, int(item.position), int(item.length)), int(item.first_offset))
                matches = [m for m in decode_records(data) if key in m.keys]
                found += matches
                if len(matches) >= limit:
                    break
        found.sort(key=lambda m: (m.store_timestamp, m.queue, m.queue_offset))
        return found[-limit:]

    # ---- lifecycle -------------------------------------------------------------------------------

    def flush(self) -> None:
        """Nothing to do: every batch is fsync'd and sequenced before its put returns."""

    def recover(self) -> None:
        """Nothing to do: no process owns a queue, so none has anything to recover."""

    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        return CleanReport(0, 0)

    def close(self) -> None:
        self.writer.close()


def _queue_key(topic: str, queue: int) -> str:
    return f"{topic}|{queue}"


def _check_queue(config: TopicConfig, queue: object) -> None:
    if not isinstance(queue, int) or isinstance(queue, bool) or not 0 <= queue < config.queues:
        raise QueueOutOfRange(config.name, queue, config.queues)  # type: ignore[arg-type]


def _conditional(error: Exception) -> bool:
    cause = getattr(error, "cause_response_code", None)
    return cause == "ConditionalCheckFailedException"
