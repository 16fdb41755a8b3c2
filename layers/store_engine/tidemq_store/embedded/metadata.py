"""Metadata in RocksDB with WAL (RIP-66): topics, subscription groups and consumer offsets.

Each change is one small write batch to the WAL and memtable; nothing is ever rewritten as a whole
table, so a change costs the same with a million topics as with ten. Column families:

    topics         topic                          ->  TopicConfig as JSON
    retention      retention_ms:u64 (BE) topic    ->  ""  (ordered: the last key holds the longest retention)
    groups         group                          ->  GroupConfig as JSON
    offsets        topic "@" group 0x00 queue:u32 ->  committed offset:u64 (LE)  (RocketMQ's topic@group)
    subscriptions  group 0x00 topic               ->  ""  (a group's topics; offsets are keyed topic-first)
    users          user                           ->  UserRecord as JSON (acl.py; its secret sealed)

A family `tier` (upload progress, kept by the cold tier itself since: tiered/progress.py) is dropped when found.

Names cannot contain "@" or 0x00, so the separators are unambiguous. A topic kept forever is filed
under retention 2**64-1.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from rocksdict import ReadOptions, WriteBatch, WriteOptions

from ..acl import UserRecord
from ..model import GroupConfig, Page, TopicConfig, take_page
from ..rocks import Families
from .consumequeue import U64

FAMILIES = ("topics", "retention", "groups", "offsets", "subscriptions", "users")
RETIRED_FAMILIES = ("tier",)
FOREVER = 2**64 - 1
U64_BE = struct.Struct(">Q")
QUEUE = struct.Struct(">I")
CACHE_LIMIT = 65_536


def _retention_key(config: TopicConfig) -> bytes:
    retention = FOREVER if config.retention_ms is None else config.retention_ms
    return U64_BE.pack(retention) + config.name.encode()


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


class MetadataStore:
    """Topic, group and consumer-offset records; callers validate, this layer only stores."""

    def __init__(self, path: Path, sync: bool) -> None:
        self._rocks = Families(path, FAMILIES, retired=RETIRED_FAMILIES)
        self._db, self._families, self._handles = self._rocks.db, self._rocks.views, self._rocks.handles
        self._write = WriteOptions()
        self._write.sync = sync
        self._topic_cache: dict[str, TopicConfig] = {}

    def _batch(self) -> WriteBatch:
        return WriteBatch(raw_mode=True)

    def _scan(self, family: str, prefix: bytes, after: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Items of `family` under `prefix`, starting after the key `after` if given."""
        bounds = ReadOptions()  # RocksDB keeps a pointer to the bound: it must outlive the iteration
        bounds.set_iterate_upper_bound(_prefix_end(prefix) if prefix else b"\xff" * 8)
        start = prefix if after is None else after + b"\x00"
        yield from self._families[family].items(from_key=start, read_opt=bounds)

    # ---- topics ----------------------------------------------------------------------------------

    def get_topic(self, name: str) -> TopicConfig | None:
        config = self._topic_cache.get(name)
        if config is None:
            raw = self._families["topics"].get(name.encode())
            if raw is None:
                return None
            config = TopicConfig.model_validate_json(raw)
            if len(self._topic_cache) >= CACHE_LIMIT:
                self._topic_cache.clear()
            self._topic_cache[name] = config
        return config

    def put_topic(self, config: TopicConfig, previous: TopicConfig | None = None) -> None:
        batch = self._batch()
        if previous is not None:
            batch.delete(_retention_key(previous), self._handles["retention"])
        batch.put(config.name.encode(), config.model_dump_json().encode(), self._handles["topics"])
        batch.put(_retention_key(config), b"", self._handles["retention"])
        self._db.write(batch, self._write)
        self._topic_cache.pop(config.name, None)

    def delete_topic(self, config: TopicConfig) -> None:
        """Delete a topic with its retention entry and every group's offsets on it."""
        batch = self._batch()
        batch.delete(config.name.encode(), self._handles["topics"])
        batch.delete(_retention_key(config), self._handles["retention"])
        groups = set()
        prefix = config.name.encode() + b"@"
        for key, _ in self._scan("offsets", prefix):
            groups.add(key[len(prefix) : key.index(b"\x00")])
        for group in groups:
            batch.delete(group + b"\x00" + config.name.encode(), self._handles["subscriptions"])
        batch.delete_range(prefix, _prefix_end(prefix), self._handles["offsets"])
        self._db.write(batch, self._write)
        self._topic_cache.pop(config.name, None)

    def list_topics(self, after: str | None, limit: int, max_bytes: int) -> Page[TopicConfig]:
        return self._list("topics", TopicConfig, after, limit, max_bytes)

    def _list(self, family: str, model: type, after: str | None, limit: int, max_bytes: int) -> Page:
        """A page of configs in name order, starting after `after` (`model.take_page`). Safe against concurrent
        deletes: the page comes from one RocksDB iterator, which reads the family as it was when the iterator was
        made, and each item is the whole config, so nothing is looked up again; the next page seeks past a name,
        whether it is still there or not."""
        stored = (raw for _, raw in self._scan(family, b"", after.encode() if after else None))
        return take_page(stored, model, limit, max_bytes)

    def longest_retention_ms(self) -> int | None:
        """The longest retention of any topic (FOREVER if one keeps messages forever); None with no topics."""
        for key in self._families["retention"].keys(backwards=True):
            return U64_BE.unpack_from(key)[0]
        return None

    # ---- groups ----------------------------------------------------------------------------------

    def get_group(self, name: str) -> GroupConfig | None:
        raw = self._families["groups"].get(name.encode())
        return GroupConfig.model_validate_json(raw) if raw is not None else None

    def put_group(self, config: GroupConfig) -> None:
        self._families["groups"].put(config.name.encode(), config.model_dump_json().encode(), self._write)

    def delete_group(self, name: str) -> None:
        """Delete a group with all its committed offsets."""
        batch = self._batch()
        batch.delete(name.encode(), self._handles["groups"])
        prefix = name.encode() + b"\x00"
        for key, _ in self._scan("subscriptions", prefix):
            offsets = key[len(prefix) :] + b"@" + name.encode() + b"\x00"
            batch.delete_range(offsets, _prefix_end(offsets), self._handles["offsets"])
        batch.delete_range(prefix, _prefix_end(prefix), self._handles["subscriptions"])
        self._db.write(batch, self._write)

    def list_groups(self, after: str | None, limit: int, max_bytes: int) -> Page[GroupConfig]:
        return self._list("groups", GroupConfig, after, limit, max_bytes)

    # ---- users ------------------------------------------------------------------------------------

    def get_user(self, name: str) -> UserRecord | None:
        raw = self._families["users"].get(name.encode())
        return UserRecord.model_validate_json(raw) if raw is not None else None

    def put_user(self, user: UserRecord) -> None:
        self._families["users"].put(user.name.encode(), user.model_dump_json().encode(), self._write)

    def delete_user(self, name: str) -> None:
        self._families["users"].delete(name.encode(), self._write)

    def list_users(self, after: str | None, limit: int, max_bytes: int) -> Page[UserRecord]:
        return self._list("users", UserRecord, after, limit, max_bytes)

    # ---- consumer offsets ------------------------------------------------------------------------

    def commit_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        batch = self._batch()
        prefix = f"{topic}@{group}".encode() + b"\x00"
        for queue, offset in offsets.items():
            batch.put(prefix + QUEUE.pack(queue), U64.pack(offset), self._handles["offsets"])
        batch.put(group.encode() + b"\x00" + topic.encode(), b"", self._handles["subscriptions"])
        self._db.write(batch, self._write)

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        prefix = f"{topic}@{group}".encode() + b"\x00"
        return {QUEUE.unpack_from(k, len(prefix))[0]: U64.unpack(v)[0] for k, v in self._scan("offsets", prefix)}

    def group_topics(self, group: str) -> list[str]:
        prefix = group.encode() + b"\x00"
        return [key[len(prefix) :].decode() for key, _ in self._scan("subscriptions", prefix)]

    def flush(self) -> None:
        """Move the memtables into table files (the WAL already makes every change durable)."""
        self._rocks.flush()

    def close(self) -> None:
        self._rocks.close()
