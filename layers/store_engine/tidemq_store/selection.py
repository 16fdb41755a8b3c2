"""What one read returns, chosen from ConsumeQueue entries alone: the hot store and the cold tier share it.

Entries are `CqEntries` of consecutive offsets (cq_entry.py), from either ConsumeQueue. Tag codes filter here,
so bodies that do not match are never read; records adjacent at their source are merged into runs, so
a read costs one I/O per run. Tag codes can collide: decoding the records confirms the real tag (reads.py). A SQL92
filter reads properties, which entries do not hold: its read chooses every record of the scan (up to SCAN_BYTES),
and the records read are filtered then (reads.py), up to the limits the read asked for (`Selection.wanted`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from tidemq_protocol.filter import MessageFilter, SqlFilter, TagFilter
from tidemq_protocol.limits import MIB
from tidemq_protocol.record import SHORTEST_HEADER

from .cq_entry import CqEntries

SCAN_LIMIT = 4096
"""Most entries a filtered read examines, however few of them match."""
SCAN_BYTES = 8 * MIB
"""Most bytes of records a SQL92-filtered read reads to evaluate them (besides its first record)."""


def scan_size(max_messages: int, message_filter: MessageFilter | None) -> int:
    return max_messages if message_filter is None else max(max_messages, SCAN_LIMIT)


def bytes_may_cut(topic: str, entries: int, max_bytes: int) -> bool:
    """Whether `max_bytes` could cut a read of `entries` records of `topic` short, whatever their sizes: if not (a
    read of a few), guessing where its scan ends would cost a lookup for nothing."""
    return entries * (SHORTEST_HEADER + len(topic)) > max_bytes


def likely_scan_end(offset: int, scan_end: int, max_bytes: int, first_size: int | None) -> int:
    """Where an unfiltered read's scan of entries likely ends: past as many records as `max_bytes` holds if they
    are the size of the first (`first_size`; None or 0: unknown, the whole scan) and an eighth more. A read that
    asks for 10,000 records of 1 KiB but takes the 4 MiB that fit would otherwise read 2.5 times the entries it
    uses; the store scans on to `scan_end` if the guess falls short, so the answer is the same either way."""
    if not first_size:
        return scan_end
    return min(scan_end, offset + max_bytes // first_size * 9 // 8 + 2)


@dataclass(slots=True)
class Runs:
    """The records a read chose, as runs of consecutive offsets lying back to back at their source (one I/O
    each): run i holds offsets from `first_offsets[i]`, `lengths[i]` bytes at `positions[i]`. Iterating gives
    (first_offset, position, length) per run. Kept as columns: a read of scattered records makes a run per
    message, and an object per run would cost as much as the selection itself."""

    first_offsets: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return zip(self.first_offsets, self.positions, self.lengths, strict=True)

    def __len__(self) -> int:
        return len(self.first_offsets)


class Selection(NamedTuple):
    """What a read returns: the `runs` of the chosen records, how many (`count`), and `next_offset`, past every
    entry examined, matching or not; `wanted`, the (max_messages, max_bytes) the read asked for, which a SQL92
    filter's read applies to the records it selects of those chosen."""

    runs: Runs
    count: int
    next_offset: int
    wanted: tuple[int, int]


def select_runs(
    entries: CqEntries,
    offset: int,
    max_messages: int,
    max_bytes: int,
    message_filter: MessageFilter | None,
    readable: int | None = None,
) -> Selection:
    """Choose from `entries` (the first one being `offset`'s) what a read returns.

    Records ending past `readable` (written but not acknowledged; None: no such bound) stop the read. The first
    record is taken even above `max_bytes`. An entry of size 0 is an offset key compaction removed: it is passed
    over, and ends the run before it (the records after it are at later offsets). A SQL92 filter's read chooses
    every record of `entries`, up to SCAN_BYTES.
    """
    wanted = (max_messages, max_bytes)
    codes = message_filter.codes if isinstance(message_filter, TagFilter) else None
    if isinstance(message_filter, SqlFilter):
        max_messages, max_bytes = len(entries), max(max_bytes, SCAN_BYTES)
    runs = Runs()
    add_first, add_position, add_length = runs.first_offsets.append, runs.positions.append, runs.lengths.append
    next_offset, taken, taken_bytes = offset, 0, 0
    run_start = run_end = -1  # the run being gathered
    for queue_offset, (position, size, tag_code, _) in enumerate(entries.fields(), offset):
        if readable is not None and position + size > readable:
            break
        if not size:  # removed by key compaction (a compacted topic): the read goes on past it
            if run_end >= 0:
                add_length(run_end - run_start)
                run_end = -1
            next_offset = queue_offset + 1
            continue
        if codes is None or tag_code in codes:
            if taken and taken_bytes + size > max_bytes:
                break
            if position != run_end:
                if run_end >= 0:
                    add_length(run_end - run_start)
                add_first(queue_offset)
                add_position(position)
                run_start = position
            run_end = position + size
            taken += 1
            taken_bytes += size
        next_offset = queue_offset + 1
        if taken == max_messages:
            break
    if run_end >= 0:
        add_length(run_end - run_start)
    return Selection(runs, taken, next_offset, wanted)
