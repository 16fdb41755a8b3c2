"""`MemoryHotStore`: a hot store held in memory, implementing `tidemq_store.hot.HotStore` and nothing else.

The tier's unit tests put the tier over it: if the tier reached past the interface (into the embedded engine's
ConsumeQueue, metadata or commit log), these tests would fail. Records are real (`batch.ValidatedBatch.stamped`,
CRCs and all) in one bytearray standing for the commit log; entries are real 24-byte ConsumeQueue entries. `expire`
stands for hot retention; `close` drops everything, as a crash of a store with no disk would.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    GroupExists,
    GroupNotFound,
    MessageNotFound,
    OffsetConflict,
    OffsetOutOfRange,
    TopicExists,
    TopicNotFound,
    UserExists,
    UserNotFound,
)
from tidemq_protocol.message import Message, StoredMessage
from tidemq_protocol.record import decode_message, message_id, parse_message_id
from tidemq_store import StoreConfig
from tidemq_store.acl import UserRecord
from tidemq_store.api import UNSET, CleanReport, updated_topic
from tidemq_store.batch import ValidatedBatch, validate_batch, validate_records
from tidemq_store.cq_entry import ENTRY_SIZE, CqEntries, pack_entry
from tidemq_store.hot import HotStore, PutListener, QueueExtent, ReleasePolicy, StoredBatch
from tidemq_store.model import (
    GroupConfig,
    Page,
    PutResult,
    QueueOffsets,
    TopicConfig,
    check_queue,
    validated,
)
from tidemq_store.reads import ReadRequest, RunsRead, check_read
from tidemq_store.selection import scan_size, select_runs


def _page(configs: list, limit: int) -> Page:
    page = configs[:limit]
    return Page(page, page[-1].name if len(page) == limit else None)


class MemoryHotStore(HotStore):
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.log = bytearray()
        self.topics: dict[str, TopicConfig] = {}
        self.groups: dict[str, GroupConfig] = {}
        self.users: dict[str, UserRecord] = {}
        self.offsets: dict[tuple[str, str], dict[int, int]] = {}
        self.cq: dict[tuple[str, int], bytearray] = {}  # entries from the queue's min offset on
        self.min_offsets: dict[tuple[str, int], int] = {}
        self.listeners: list[PutListener] = []
        self.release_policy: ReleasePolicy | None = None
        self.released: list[tuple[int, int]] = []  # what release_segments was asked

    # ---- topics and groups ----

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        if config.name in self.topics:
            raise TopicExists(config.name)
        created = validated(TopicConfig, {**config.model_dump(), "created_at": now_ms()})
        self.topics[config.name] = created
        return created

    def get_topic(self, name: str) -> TopicConfig:
        if name not in self.topics:
            raise TopicNotFound(name)
        return self.topics[name]

    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        return _page([self.topics[name] for name in sorted(self.topics) if after is None or name > after], limit)

    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        self.topics[name] = updated_topic(self.get_topic(name), retention_ms, queues, attributes)
        return self.topics[name]

    def delete_topic(self, name: str) -> None:
        self.get_topic(name)
        del self.topics[name]
        for key in [key for key in self.cq if key[0] == name]:
            del self.cq[key]

    def create_group(self, config: GroupConfig) -> GroupConfig:
        if config.name in self.groups:
            raise GroupExists(config.name)
        self.groups[config.name] = config
        return config

    def get_group(self, name: str) -> GroupConfig:
        if name not in self.groups:
            raise GroupNotFound(name)
        return self.groups[name]

    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        return _page([self.groups[name] for name in sorted(self.groups) if after is None or name > after], limit)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        self.get_group(config.name)
        self.groups[config.name] = config
        return config

    def delete_group(self, name: str) -> None:
        self.get_group(name)
        del self.groups[name]

    def commit_offsets(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        committed = self.offsets.setdefault((group, topic), {})
        for queue, offset in (expected or {}).items():
            if committed.get(queue) != offset:
                raise OffsetConflict(group, topic, queue, offset, committed.get(queue))
        committed.update(offsets)

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offsets.get((group, topic), {}))

    def group_topics(self, group: str) -> list[str]:
        return sorted(topic for g, topic in self.offsets if g == group)

    # ---- users ----

    def create_user(self, user: UserRecord) -> UserRecord:
        if user.name in self.users:
            raise UserExists(user.name)
        self.users[user.name] = user
        return user

    def get_user(self, name: str) -> UserRecord:
        if name not in self.users:
            raise UserNotFound(name)
        return self.users[name]

    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        return _page([self.users[name] for name in sorted(self.users) if after is None or name > after], limit)

    def update_user(self, user: UserRecord) -> UserRecord:
        self.get_user(user.name)
        self.users[user.name] = user
        return user

    def delete_user(self, name: str) -> None:
        self.get_user(name)
        del self.users[name]

    # ---- messages ----

    def put(self, topic: str, messages: Sequence[Message], send: object = None) -> list[PutResult]:
        return self._append(topic, validate_batch(self.config, self.get_topic(topic), messages))

    def put_records(self, topic: str, records: bytes, default_queue: int = 0, send: object = None) -> list[PutResult]:
        return self._append(topic, validate_records(self.config, self.get_topic(topic), records, default_queue))

    def _append(self, topic: str, batch: ValidatedBatch) -> list[PutResult]:
        store_timestamp = now_ms()
        offsets, positions, position = [], [], len(self.log)
        next_offsets: dict[int, int] = {}
        for queue, size in zip(batch.queues, batch.sizes, strict=True):
            offset = next_offsets.get(queue, self.max_offset(topic, queue))
            next_offsets[queue] = offset + 1
            offsets.append(offset)
            positions.append(position)
            position += size
        start = len(self.log)
        self.log += batch.stamped(offsets, start, store_timestamp)
        for queue, position, size, tag_code in zip(batch.queues, positions, batch.sizes, batch.tag_codes, strict=True):
            self.cq.setdefault((topic, queue), bytearray()).extend(
                pack_entry(position, size, tag_code, store_timestamp)
            )
        stored = StoredBatch(topic, store_timestamp, batch.queues, offsets, positions, batch.sizes)
        for listener in self.listeners:
            listener(stored)
        return [
            PutResult(message_id(position, size), queue, offset, store_timestamp)
            for queue, offset, position, size in zip(batch.queues, offsets, positions, batch.sizes, strict=True)
        ]

    def read_queue(self, request: ReadRequest) -> RunsRead:
        topic, queue, offset = request.topic, request.queue, request.offset
        check_queue(self.get_topic(topic), queue)
        message_filter = check_read(request, self.config.max_get_messages)
        low, high = self.min_offset(topic, queue), self.max_offset(topic, queue)
        if not low <= offset <= high:
            raise OffsetOutOfRange(topic, queue, offset, low, high)
        entries = self.entries(
            topic, queue, offset, min(high, offset + scan_size(request.max_messages, message_filter))
        )
        selection = select_runs(entries, offset, request.max_messages, request.max_bytes, message_filter)
        return RunsRead(topic, queue, selection, self._read_log, message_filter, low, high)

    def _read_log(self, position: int, length: int) -> bytes:
        return bytes(self.log[position : position + length])

    def queue_offsets(self, topic: str) -> list[QueueOffsets]:
        queues = self.get_topic(topic).queues
        return [QueueOffsets(q, self.min_offset(topic, q), self.max_offset(topic, q)) for q in range(queues)]

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        low, high = self.min_offset(topic, queue), self.max_offset(topic, queue)
        for offset, entry in enumerate(self.entries(topic, queue, low, high), low):
            if entry.store_timestamp >= timestamp_ms:
                return offset
        return high

    def message_by_id(self, msg_id: str) -> StoredMessage:
        position, size = parse_message_id(msg_id)
        if position + size > len(self.log):
            raise MessageNotFound(f"with id {msg_id}")
        return decode_message(bytes(self.log[position : position + size]))

    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        found = []
        for queue in range(self.get_topic(topic).queues):
            found += [
                m for m in self.get(topic, queue, self.min_offset(topic, queue), 10_000).messages if key in m.keys
            ]
        return found[-limit:]

    def flush(self) -> None:
        pass

    def recover(self) -> None:
        pass

    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        return CleanReport(0, 0)

    def close(self) -> None:
        pass

    def expire(self, topic: str, queue: int, new_min: int) -> None:
        """Hot retention: forget the queue's messages below `new_min`."""
        key = (topic, queue)
        dropped = new_min - self.min_offset(topic, queue)
        self.cq[key] = self.cq[key][dropped * ENTRY_SIZE :]
        self.min_offsets[key] = new_min

    # ---- HotStore ----

    def min_offset(self, topic: str, queue: int) -> int:
        return self.min_offsets.get((topic, queue), 0)

    def max_offset(self, topic: str, queue: int) -> int:
        return self.min_offset(topic, queue) + len(self.cq.get((topic, queue), b"")) // ENTRY_SIZE

    def readable_max_offset(self, topic: str, queue: int) -> int:
        return self.max_offset(topic, queue)

    def entries(self, topic: str, queue: int, start: int, end: int) -> CqEntries:
        low = self.min_offset(topic, queue)
        start, end = max(start, low), min(end, self.max_offset(topic, queue))
        if end <= start:
            return CqEntries()
        return CqEntries(bytes(self.cq[(topic, queue)][(start - low) * ENTRY_SIZE : (end - low) * ENTRY_SIZE]))

    @property
    def written_position(self) -> int:
        return len(self.log)

    def queues(self) -> Iterator[QueueExtent]:
        for topic, queue in list(self.cq):
            yield QueueExtent(topic, queue, self.max_offset(topic, queue))

    def add_put_listener(self, listener: PutListener) -> None:
        self.listeners.append(listener)

    @property
    def first_position(self) -> int:
        return 0  # nothing is ever removed from the log in memory

    def record_queue(self, msg_id: str) -> tuple[str, int] | None:
        try:
            message = self.message_by_id(msg_id)
        except MessageNotFound:
            return None
        return message.topic, message.queue

    def set_segment_archive(self, archive) -> None:
        self.segment_archive = archive  # never called: no segment is removed

    def set_release_policy(self, policy: ReleasePolicy) -> None:
        self.release_policy = policy

    def release_segments(self, wanted_bytes: int, safe_before: int) -> CleanReport:
        """A store in memory has no segment files to remove: it notes what it was asked (`released`)."""
        self.released.append((wanted_bytes, safe_before))
        return CleanReport(0, 0)

    def disk_usage(self) -> int:
        return 0  # nothing on disk
