"""ConsumeQueue in RocksDB (RIP-66): every queue's index into the commit log, plus the key index.

One RocksDB instance, written without WAL: everything here can be rebuilt from the commit log, so a
crash only costs a replay from the last checkpoint (see `Checkpoint`). Column families and formats
(big-endian keys, so a prefix scan returns offsets in order; little-endian values):

    cq       topic 0x00 queue:u32 offset:u64  ->  physical_offset:u64 size:u32 tag_code:u32 store_timestamp:u64
    cq_min   topic 0x00 queue:u32             ->  min_offset:u64   (absent: 0)
    cq_max   topic 0x00 queue:u32             ->  max_offset:u64   (the next offset; absent: 0)
    keys     segment_start:u64 topic 0x00 key 0x00 physical_offset:u64  ->  size:u32

Topic names cannot contain 0x00, so `topic 0x00` is an unambiguous prefix. Min and max live in their
own families so that the writer (max) and the retention cleaner (min) never overwrite each other.
The key index is grouped by commit-log segment so that deleting a segment drops its entries with one
range delete; a lookup seeks once per live segment.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from rocksdict import ReadOptions, WriteBatch, WriteOptions

from .rocks import Families

QUEUE = struct.Struct(">I")
QUEUE_OFFSET = struct.Struct(">IQ")
U64_BE = struct.Struct(">Q")
U64 = struct.Struct("<Q")
U32 = struct.Struct("<I")
ENTRY = struct.Struct("<QIIQ")
FAMILIES = ("cq", "cq_min", "cq_max", "keys")


class CqEntry(NamedTuple):
    physical_offset: int
    size: int
    tag_code: int
    store_timestamp: int


class Dispatch(NamedTuple):
    """One stored message as the ConsumeQueue and key index need it."""

    queue: int
    queue_offset: int
    physical_offset: int
    size: int
    tag_code: int
    keys: tuple[str, ...]


def _queue_key(topic: str, queue: int) -> bytes:
    return topic.encode() + b"\x00" + QUEUE.pack(queue)


class ConsumeQueueStore:
    """Reads and writes the ConsumeQueue families. Writes come from one thread (the store's writer
    or the cleaner under the store's write lock); reads come from anywhere."""

    def __init__(self, path: Path) -> None:
        self._rocks = Families(path, FAMILIES, atomic_flush=True)
        self._db, self._families, self._handles = self._rocks.db, self._rocks.views, self._rocks.handles
        self._cq = self._families["cq"]
        self._no_wal = WriteOptions()
        self._no_wal.disable_wal = True

    # ---- writing ---------------------------------------------------------------------------------

    def dispatch(self, topic: str, segment_start: int, store_timestamp: int, messages: Iterable[tuple]) -> None:
        """Index the messages of one put (or of one replayed batch), all stored at `store_timestamp` in
        the segment starting at `segment_start`. Each message is a `Dispatch` or a plain tuple in its
        order (queue, queue_offset, physical_offset, size, tag_code, keys)."""
        batch = WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._handles["cq"])
        keys_family = self._handles["keys"]
        prefix = topic.encode() + b"\x00"
        segment = U64_BE.pack(segment_start)
        maxes: dict[int, int] = {}
        pack_key, pack_entry, put = QUEUE_OFFSET.pack, ENTRY.pack, batch.put
        for queue, offset, physical, size, tag_code, keys in messages:
            put(prefix + pack_key(queue, offset), pack_entry(physical, size, tag_code, store_timestamp))
            maxes[queue] = offset + 1
            for key in keys:
                put(segment + prefix + key.encode() + b"\x00" + U64_BE.pack(physical), U32.pack(size), keys_family)
        max_family = self._handles["cq_max"]
        for queue, next_offset in maxes.items():
            put(prefix + QUEUE.pack(queue), U64.pack(next_offset), max_family)
        self._db.write(batch, self._no_wal)

    def truncate_queue(self, topic: str, queue: int, new_max: int) -> None:
        """Drop entries at and above `new_max` (recovery, for entries that point past the log's end)."""
        prefix = _queue_key(topic, queue)
        self._cq.delete_range(prefix + U64_BE.pack(new_max), prefix + b"\xff" * 9, self._no_wal)
        self._families["cq_max"].put(prefix, U64.pack(new_max), self._no_wal)

    def advance_min(self, topic: str, queue: int, old_min: int, new_min: int) -> None:
        """Forget entries below `new_min` (retention)."""
        prefix = _queue_key(topic, queue)
        self._cq.delete_range(prefix + U64_BE.pack(old_min), prefix + U64_BE.pack(new_min), self._no_wal)
        self._families["cq_min"].put(prefix, U64.pack(new_min), self._no_wal)

    def drop_topic(self, topic: str) -> None:
        start, end = topic.encode() + b"\x00", topic.encode() + b"\x01"
        for name in ("cq", "cq_min", "cq_max"):
            self._families[name].delete_range(start, end, self._no_wal)

    def drop_key_index(self, segment_start: int, segment_end: int) -> None:
        self._families["keys"].delete_range(U64_BE.pack(segment_start), U64_BE.pack(segment_end), self._no_wal)

    # ---- reading ---------------------------------------------------------------------------------

    def min_offset(self, topic: str, queue: int) -> int:
        raw = self._families["cq_min"].get(_queue_key(topic, queue))
        return U64.unpack(raw)[0] if raw else 0

    def max_offset(self, topic: str, queue: int) -> int:
        raw = self._families["cq_max"].get(_queue_key(topic, queue))
        return U64.unpack(raw)[0] if raw else 0

    def entry(self, topic: str, queue: int, offset: int) -> CqEntry | None:
        raw = self._cq.get(_queue_key(topic, queue) + U64_BE.pack(offset))
        return CqEntry._make(ENTRY.unpack(raw)) if raw else None

    def entries(self, topic: str, queue: int, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """Entries for offsets [start, end) as plain `CqEntry`-ordered tuples, in offset order (dense:
        entry i is offset start + i, unless retention removed some meanwhile)."""
        prefix = _queue_key(topic, queue)
        bounds = ReadOptions()
        bounds.set_iterate_upper_bound(prefix + U64_BE.pack(end))
        values = self._cq.values(from_key=prefix + U64_BE.pack(start), read_opt=bounds)
        return list(ENTRY.iter_unpack(b"".join(values)))

    def queues(self) -> Iterator[tuple[str, int, int]]:
        """(topic, queue, max_offset) for every queue that has ever held a message."""
        for key, value in self._families["cq_max"].items():
            topic, queue = key[:-5].decode(), QUEUE.unpack_from(key, len(key) - 4)[0]
            yield topic, queue, U64.unpack(value)[0]

    def key_lookup(self, segment_starts: Iterable[int], topic: str, key: str) -> list[tuple[int, int]]:
        """(physical_offset, size) of every message with `key` in `topic`, oldest first."""
        found = []
        keys_family = self._families["keys"]
        for segment_start in segment_starts:
            prefix = U64_BE.pack(segment_start) + topic.encode() + b"\x00" + key.encode() + b"\x00"
            bounds = ReadOptions()
            bounds.set_iterate_upper_bound(prefix[:-1] + b"\x01")
            for raw_key, value in keys_family.items(from_key=prefix, read_opt=bounds):
                found.append((U64_BE.unpack_from(raw_key, len(raw_key) - 8)[0], U32.unpack(value)[0]))
        return found

    # ---- durability ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Persist every family's memtable (the ConsumeQueue has no WAL)."""
        self._rocks.flush()

    def close(self) -> None:
        self._rocks.close()


class Checkpoint:
    """Where ConsumeQueue replay starts after a restart, in the file `checkpoint` (JSON):

        {"position": <commit-log position>, "clean": <bool>, "store_timestamp": <ms>}

    Every record below `position` is in the ConsumeQueue's flushed (durable) state. `clean` is true
    only after an orderly close; a store opened without it checks queue maxima against the log.
    `store_timestamp` is the newest store time written, so store times never go back across restarts.
    The file is replaced atomically (write, fsync, rename, fsync the directory).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[int, bool, int]:
        """(position, clean, store_timestamp); a store without a checkpoint replays from the start."""
        try:
            state = json.loads(self.path.read_text())
        except FileNotFoundError:
            return 0, False, 0
        return int(state["position"]), bool(state["clean"]), int(state.get("store_timestamp", 0))

    def write(self, position: int, clean: bool, store_timestamp: int) -> None:
        temp = self.path.with_suffix(".tmp")
        with open(temp, "w") as file:
            json.dump({"position": position, "clean": clean, "store_timestamp": store_timestamp}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
