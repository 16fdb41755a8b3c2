"""ConsumeQueue in RocksDB (RIP-66): every queue's index into the commit log, plus the key index.

One RocksDB instance, written without WAL: everything here can be rebuilt from the commit log, so a
crash only costs a replay from the last checkpoint (see `Checkpoint`). Column families and formats
(big-endian keys, so a prefix scan returns offsets in order; little-endian values):

    cq       topic 0x00 queue:u32 offset:u64  ->  a 24-byte ConsumeQueue entry (cq_entry.py): position in the
                                                 commit log, size, tag code, store timestamp
    cq_min   topic 0x00 queue:u32             ->  min_offset:u64   (absent: 0)
    cq_max   topic 0x00 queue:u32             ->  max_offset:u64   (the next offset; absent: 0)
    keys     segment_start:u64 topic 0x00 key 0x00 physical_offset:u64  ->  size:u32
    sends    topic 0x00 idempotency_key           ->  )  the records of idempotent sends, written with their
    sent_at  stored_at:u64 topic 0x00 idempotency_key  ->  )  batches' entries (send_records.py)

Topic names cannot contain 0x00, so `topic 0x00` is an unambiguous prefix. Min and max live in their
own families so that the writer (max) and the retention cleaner (min) never overwrite each other.
The key index is grouped by commit-log segment so that deleting a segment drops its entries with one
range delete; a lookup seeks once per live segment.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from rocksdict import ReadOptions, WriteBatch, WriteOptions

from ..cq_entry import CqEntries, CqEntry, pack_entry, unpack_entry
from ..hot import QueueExtent, StoredBatch
from ..rocks import Families
from ..sends import SentBatch
from .files import fsync_directory
from .send_records import SEND_FAMILIES, SendRecords

QUEUE = struct.Struct(">I")
QUEUE_OFFSET = struct.Struct(">IQ")
U64_BE = struct.Struct(">Q")
U64 = struct.Struct("<Q")
U32 = struct.Struct("<I")
FAMILIES = ("cq", "cq_min", "cq_max", "keys", *SEND_FAMILIES)


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
        self._sends = SendRecords(self._rocks)

    # ---- writing ---------------------------------------------------------------------------------

    def dispatch(
        self,
        stored: StoredBatch,
        segment_start: int,
        tag_codes: list[int],
        keys: list[tuple[str, ...]],
        sent: tuple[str, SentBatch] | None = None,
    ) -> None:
        """Index the messages of one put (or of one replayed batch), whose records lie in the commit-log segment
        starting at `segment_start`; message i has tag code `tag_codes[i]` and message keys `keys[i]`. `sent`: the
        put's idempotency key and what a send of it again is answered (sends.py), written in the same batch."""
        batch = WriteBatch(raw_mode=True)
        if sent is not None:
            self._sends.add(batch, stored.topic, *sent)
        batch.set_default_column_family(self._handles["cq"])
        keys_family = self._handles["keys"]
        prefix = stored.topic.encode() + b"\x00"
        segment = U64_BE.pack(segment_start)
        maxes: dict[int, int] = {}
        pack_key, put, timestamp = QUEUE_OFFSET.pack, batch.put, stored.store_timestamp
        for queue, offset, position, size, tag_code, message_keys in zip(
            stored.queues, stored.queue_offsets, stored.positions, stored.sizes, tag_codes, keys, strict=True
        ):
            put(prefix + pack_key(queue, offset), pack_entry(position, size, tag_code, timestamp))
            maxes[queue] = offset + 1
            for key in message_keys:
                put(segment + prefix + key.encode() + b"\x00" + U64_BE.pack(position), U32.pack(size), keys_family)
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

    def forget_sends(self, before_ms: int) -> int:
        """Delete the sends stored before `before_ms` (their window has passed); how many. A key sent again since
        keeps its newer record."""
        return self._sends.forget(before_ms, self._no_wal)

    def sent(self, topic: str, key: str) -> SentBatch | None:
        """What the topic's send of idempotency `key` stored, if its record is still kept."""
        return self._sends.sent(topic, key)

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
        return unpack_entry(raw) if raw else None

    def first_offset(self, topic: str, queue: int, low: int, high: int, predicate: Callable[[CqEntry], bool]) -> int:
        """The first offset in [low, high) whose entry satisfies a predicate monotonic in offset (else high): a
        binary search, for a time (`offset_for_timestamp`), a retention cut-off, the end of the log."""
        while low < high:
            middle = (low + high) // 2
            entry = self.entry(topic, queue, middle)
            if entry is not None and predicate(entry):
                high = middle
            else:
                low = middle + 1
        return low

    def entries(self, topic: str, queue: int, start: int, end: int) -> CqEntries:
        """Entries for offsets [start, end), in offset order (dense: entry i is offset start + i, unless
        retention removed some meanwhile)."""
        prefix = _queue_key(topic, queue)
        bounds = ReadOptions()
        bounds.set_iterate_upper_bound(prefix + U64_BE.pack(end))
        return CqEntries(b"".join(self._cq.values(from_key=prefix + U64_BE.pack(start), read_opt=bounds)))

    def queues(self) -> Iterator[QueueExtent]:
        """Every queue that has ever held a message."""
        for key, value in self._families["cq_max"].items():
            topic, queue = key[:-5].decode(), QUEUE.unpack_from(key, len(key) - 4)[0]
            yield QueueExtent(topic, queue, U64.unpack(value)[0])

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


class CheckpointState(NamedTuple):
    position: int
    clean: bool
    store_timestamp: int


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

    def read(self) -> CheckpointState:
        """The last checkpoint; a store without one replays from the start."""
        try:
            state = json.loads(self.path.read_text())
        except FileNotFoundError:
            return CheckpointState(0, False, 0)
        return CheckpointState(int(state["position"]), bool(state["clean"]), int(state.get("store_timestamp", 0)))

    def write(self, state: CheckpointState) -> None:
        temp = self.path.with_suffix(".tmp")
        with open(temp, "w") as file:
            json.dump(state._asdict(), file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, self.path)
        fsync_directory(self.path.parent)
