"""The tier's IndexFile: each queue's message ids and keys, so lookups reach what only the cold tier holds.

RocketMQ's tiered store keeps an IndexFile beside the per-queue CommitLog and ConsumeQueue (container.py); this is
TideMQ's. Every upload writes one index object for the offsets it uploads, and compaction (spark_emr) merges a
queue's index objects into larger ones; each is immutable once written:

    <topic>/<queue>/index/<first:020d>-<end:020d>     the ids and keys of the queue's offsets [first, end)

The name says what the object covers, so one listing tells a reader which objects to read, which offsets no
object covers (those are rebuilt from the tier's own ConsumeQueue and commit log: `TieredIndex.rebuild`), and how
large the object's slot table is. An object is, little-endian:

    header      40 bytes: magic b"TIX1", version (1), 3 bytes zero, first offset (u64), end offset (u64),
                entry count (u32), slot count (u32), CRC32C of the slot table (u32), CRC32C of the 36 bytes before
    slot table  (slots + 1) u32: the index of the first entry of each slot, then the entry count
    entries     16 bytes each: hash (u64), queue offset (u64), sorted by (slot, hash)

An entry's hash is the first 8 bytes of BLAKE2b over b"i\\0" + message id, or b"k\\0" + key (one entry per key of a
message); its slot is `hash % slots`, `slots` being `slot_count(end - first)`: about four per offset, at most
MAX_SLOTS, so the header and slot table are at most 64 KiB. A lookup in one object costs at most two reads: one
of the header and slot table (checked against both CRCs, then kept in memory: the object never changes) and, only
when the slot holds entries, one ranged read of that slot's entries. An entry is a hint, not an answer: the
record at its offset is read and must carry the id or key (a hash collision, or an offset key compaction emptied,
is passed over), so a damaged entry can cost a read but never give a wrong message.

Retention deletes an object once every offset it covers is below the queue's tier minimum; topic deletion
deletes it with the rest of the topic's tier files.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from crc32c import crc32c

from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.message import StoredMessage

from .segment import NAME_DIGITS, StoredObject, TierDriver, segment_name

MAGIC = b"TIX1"
VERSION = 1
HEADER = struct.Struct("<4sB3xQQIIII")
HEADER_SIZE = HEADER.size  # 40
SLOT = struct.Struct("<I")
ENTRY = struct.Struct("<QQ")
MAX_SLOTS = 1 << 14
"""Most slots an object has: its header and slot table stay within 64 KiB, one small read."""
TABLE_CACHE_BYTES = 32 * 1024 * 1024
"""Slot tables kept in memory (the objects never change): a repeated lookup skips their reads."""


def id_hash(msg_id: str) -> int:
    return _hash(b"i\0" + msg_id.lower().encode())


def key_hash(key: str) -> int:
    return _hash(b"k\0" + key.encode())


def position_hash(physical: int) -> int:
    """The hash a record's physical offset is listed under in the id directory (directory.py)."""
    return _hash(b"p\0" + physical.to_bytes(8, "little"))


def _hash(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def slot_count(offsets: int) -> int:
    """Slots of an object covering `offsets` offsets: a power of two of about four per offset, at most MAX_SLOTS."""
    wanted = max(1, 4 * offsets)
    return min(MAX_SLOTS, 1 << (wanted - 1).bit_length())


def table_size(slots: int) -> int:
    """Bytes of the header and slot table: what a lookup reads first."""
    return HEADER_SIZE + (slots + 1) * SLOT.size


@dataclass(frozen=True, slots=True)
class IndexRange:
    """An index object as a listing shows it: `key` covers the offsets [first, end)."""

    key: str
    first: int
    end: int
    modified_s: float = 0.0

    @property
    def slots(self) -> int:
        return slot_count(self.end - self.first)


def index_prefix(queue_path: str) -> str:
    return f"{queue_path}/index/"


def index_key(queue_path: str, first: int, end: int) -> str:
    return f"{index_prefix(queue_path)}{segment_name(first)}-{segment_name(end)}"


def parse_index_key(item: StoredObject) -> IndexRange | None:
    """The range an object's key names (None: not an index object, e.g. a scratch file)."""
    first, dash, end = item.key.rsplit("/", 1)[-1].partition("-")
    digits = NAME_DIGITS
    if dash and len(first) == digits and len(end) == digits and first.isdigit() and end.isdigit():
        return IndexRange(item.key, int(first), int(end), item.modified_s) if int(end) > int(first) else None
    return None


def entries_of(messages: Iterable[StoredMessage]) -> Iterator[tuple[int, int]]:
    """(hash, offset) of each message's id and of each of its keys."""
    for message in messages:
        yield id_hash(message.msg_id), message.queue_offset
        for key in dict.fromkeys(message.keys):
            yield key_hash(key), message.queue_offset


def encode_index(first: int, end: int, entries: Iterable[tuple[int, int]]) -> bytes:
    """The index object covering offsets [first, end) holding `entries` ((hash, offset) pairs)."""
    slots = slot_count(end - first)
    ordered = sorted(set(entries), key=lambda entry: (entry[0] % slots, entry[0], entry[1]))
    starts = [0] * (slots + 1)
    for hashed, _ in ordered:
        starts[hashed % slots + 1] += 1
    for slot in range(slots):
        starts[slot + 1] += starts[slot]
    table = struct.pack(f"<{slots + 1}I", *starts)
    fields = HEADER.pack(MAGIC, VERSION, first, end, len(ordered), slots, crc32c(table), 0)[: HEADER_SIZE - 4]
    body = b"".join(ENTRY.pack(hashed, offset) for hashed, offset in ordered)
    return fields + struct.pack("<I", crc32c(fields)) + table + body


def decode_entries(data: bytes) -> list[tuple[int, int]]:
    """Every (hash, offset) of a whole index object (compaction merges them), its header and table checked."""
    header = _check_table(data, "index object")
    start = table_size(header.slots)
    return [ENTRY.unpack_from(data, start + i * ENTRY.size) for i in range(header.entries)]


@dataclass(frozen=True, slots=True)
class IndexHeader:
    first: int
    end: int
    entries: int
    slots: int


def _check_table(data: bytes, where: str) -> IndexHeader:
    if len(data) < HEADER_SIZE:
        raise CorruptStore(f"{where}: {len(data)} bytes, shorter than an index header")
    magic, version, first, end, entries, slots, table_crc, header_crc = HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION or crc32c(data[: HEADER_SIZE - 4]) != header_crc:
        raise CorruptStore(f"{where}: not an index object of version {VERSION}, or its header is damaged")
    if len(data) < table_size(slots) or crc32c(data[HEADER_SIZE : table_size(slots)]) != table_crc:
        raise CorruptStore(f"{where}: its slot table is damaged")
    return IndexHeader(first, end, entries, slots)


class SlotTables:
    """The slot tables of index objects read so far, by key, within `TABLE_CACHE_BYTES` (least recently used go)."""

    def __init__(self, capacity: int = TABLE_CACHE_BYTES) -> None:
        self.capacity = capacity
        self._tables: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[int, ...] | None:
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
            return table

    def put(self, key: str, table: tuple[int, ...]) -> None:
        with self._lock:
            if key not in self._tables:
                self._tables[key] = table
                self._bytes += len(table) * SLOT.size
            while self._bytes > self.capacity and self._tables:
                _, dropped = self._tables.popitem(last=False)
                self._bytes -= len(dropped) * SLOT.size


class IndexReader:
    """Lookups in index objects on one medium (two reads at most per object; see the module docstring)."""

    def __init__(self, driver: TierDriver, tables: SlotTables) -> None:
        self.driver, self.tables = driver, tables

    def offsets(self, item: IndexRange, hashed: int) -> list[int]:
        """The offsets `item` lists under `hashed`, newest first (None of them checked against their records)."""
        table = self._table(item)
        slot = hashed % item.slots
        low, high = table[slot], table[slot + 1]
        if low == high:
            return []
        start = table_size(item.slots) + low * ENTRY.size
        data = self._read(item, start, (high - low) * ENTRY.size)
        found = [ENTRY.unpack_from(data, i * ENTRY.size) for i in range(high - low)]
        return sorted((offset for h, offset in found if h == hashed), reverse=True)

    def entries_end(self, item: IndexRange) -> int:
        """Where the object's entries end: what follows them is the object's own (directory.py's queue names)."""
        return table_size(item.slots) + self._table(item)[-1] * ENTRY.size

    def _table(self, item: IndexRange) -> tuple[int, ...]:
        table = self.tables.get(item.key)
        if table is None:
            data = self._read(item, 0, table_size(item.slots))
            header = _check_table(data, item.key)
            if (header.first, header.end, header.slots) != (item.first, item.end, item.slots):
                raise CorruptStore(f"{item.key}: its header covers [{header.first}, {header.end}), not its name's")
            table = struct.unpack_from(f"<{header.slots + 1}I", data, HEADER_SIZE)
            self.tables.put(item.key, table)
        return table

    def _read(self, item: IndexRange, start: int, length: int) -> bytes:
        data = self.driver.read_range(item.key, start, length)
        if data is None:
            raise IndexGone(f"tier index object {item.key} is gone")
        if len(data) != length:
            raise CorruptStore(f"{item.key}: read {len(data)} of {length} bytes at {start}")
        return data


class IndexGone(CorruptStore):
    """An index object listed a moment ago is gone (compaction or retention removed it): list again."""


def cover(items: Iterable[IndexRange]) -> list[IndexRange]:
    """The objects a reader uses: from the lowest offset up, at each point the one reaching furthest (compaction's
    merged objects over the small ones they replace), never two for one offset."""
    chosen: list[IndexRange] = []
    covered = -1
    for item in sorted(items, key=lambda i: (i.first, -i.end)):
        if item.first >= covered:
            chosen.append(item)
            covered = item.end
    return chosen


def gaps(chosen: list[IndexRange], low: int, high: int) -> list[tuple[int, int]]:
    """The offset ranges within [low, high) that no object of `chosen` (as `cover` made it) covers."""
    found, at = [], low
    for item in chosen:
        if item.end <= at:
            continue
        if item.first > at:
            found.append((at, min(item.first, high)))
        at = max(at, item.end)
        if at >= high:
            break
    if at < high:
        found.append((at, high))
    return [(a, b) for a, b in found if a < b]
