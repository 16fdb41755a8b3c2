"""A ConsumeQueue entry: where one message of a queue is, in 24 bytes (RocketMQ's CQ unit, with the store time).

    offset size  field
       0     8   position          where the message's record starts: in the hot commit log (the embedded
                                   ConsumeQueue) or in the queue's own tier commit log (the tier's ConsumeQueue)
       8     4   size              the record's total size
      12     4   tag_code          `message.tag_hash` of its tag (0: none): reads filter by tag from entries alone
      16     8   store_timestamp   ms since the epoch: time lookups and retention read it here, not in the record

All little-endian. The embedded ConsumeQueue keeps one entry per RocksDB value (embedded/consumequeue.py); the
tier stores them back to back in its ConsumeQueue segments (tiered/container.py). This module is the one that
packs and unpacks them. Reads get entries of consecutive offsets as `CqEntries`: the packed bytes as stored,
turned into objects only when one is looked at, because a read scans up to thousands of them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple, overload

from tidemq_protocol.message import tag_hash
from tidemq_protocol.record import read_header

ENTRY = struct.Struct("<QIIQ")
ENTRY_SIZE = ENTRY.size  # 24


class CqEntry(NamedTuple):
    """One message's entry (see the module docstring)."""

    position: int
    size: int
    tag_code: int
    store_timestamp: int

    @property
    def end(self) -> int:
        """Just past the record."""
        return self.position + self.size


pack_entry = ENTRY.pack
"""pack_entry(position, size, tag_code, store_timestamp) -> the entry's 24 bytes."""


def unpack_entry(raw: bytes) -> CqEntry:
    return CqEntry._make(ENTRY.unpack(raw))


class CqEntries:
    """The entries of consecutive offsets, packed as stored: `entries[i]` is the `CqEntry` of the i-th offset.

    `fields()` iterates them as plain (position, size, tag_code, store_timestamp) tuples, in `CqEntry`'s order,
    for the loops that scan thousands (selection.py), where building an object per entry would cost more than
    the scan itself.
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes | memoryview = b"") -> None:
        if len(data) % ENTRY_SIZE:
            raise ValueError(f"{len(data)} bytes are not a whole number of {ENTRY_SIZE}-byte entries")
        self.data = data

    def __len__(self) -> int:
        return len(self.data) // ENTRY_SIZE

    @overload
    def __getitem__(self, index: int) -> CqEntry: ...

    @overload
    def __getitem__(self, index: slice) -> CqEntries: ...

    def __getitem__(self, index: int | slice) -> CqEntry | CqEntries:
        count = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(count)
            if step != 1:
                raise ValueError("entries are sliced in steps of 1")
            return CqEntries(memoryview(self.data)[start * ENTRY_SIZE : max(start, stop) * ENTRY_SIZE])
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"entry {index} of {count}")
        return CqEntry._make(ENTRY.unpack_from(self.data, index * ENTRY_SIZE))

    def __iter__(self) -> Iterator[CqEntry]:
        return map(CqEntry._make, ENTRY.iter_unpack(self.data))

    def fields(self) -> Iterator[tuple[int, int, int, int]]:
        return ENTRY.iter_unpack(self.data)

    def __repr__(self) -> str:
        return f"CqEntries({list(self)!r})"


def entries_of(data: bytes) -> CqEntries:
    """The ConsumeQueue entries of the records in `data` (verified records back to back), positions counted from
    the start of `data`."""
    packed, position = [], 0
    while position < len(data):
        header = read_header(data, position)
        packed.append(pack_entry(position, header.size, tag_hash(header.tag), header.store_timestamp))
        position += header.size
    return CqEntries(b"".join(packed))
