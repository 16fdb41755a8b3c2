"""Lookups by message id and by key in the cold tier, through each queue's index objects (index.py).

Both backends' stores ask here when the hot tier does not have what is looked for: the embedded engine's
`TieredMessageStore` and the serverless `ServerlessMessageStore` hand in the tier queues to search
(`TieredQueue` views), and merge what is found with what the hot tier found.

What one lookup reads, per queue searched (the bound the tests count, docs/tiered-storage.md):

    1 listing of the queue's index objects (per 1,000 of them)
    per index object: 1 read of its header and slot table (none once cached: the objects never change),
                      and 1 ranged read of one slot's entries when that slot holds any
    per candidate offset: 2 reads (its ConsumeQueue entry, its record)

A lookup by id searches one queue: the one its record is of, named by the record's header while the hot file
that holds it is there, else by the tier's id directory (directory.py: 1 listing and at most 3 reads), so its cost
does not grow with the number of topics or queues. A lookup by key searches the queues of its topic (the API takes
the topic with the key), newest index objects first, until `limit` messages are found in each. Only offsets below
the hot tier's minimum are searched (the hot tier was asked about the rest), so a queue the hot tier still holds
whole costs nothing. Index objects are one per upload until compaction (spark_emr) merges them, which is what keeps
their number, and so the reads, small.
Offsets no index object covers (an upload that crashed before writing its object, an object deleted by hand, a
tier uploaded before the index existed) are indexed again from the tier's own files first (`rebuild`), in
objects of at most REBUILD_OFFSETS offsets, which the next lookups use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tidemq_protocol.errors import CorruptStore, OffsetOutOfRange
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import decode_run, parse_message_id

from .container import TieredQueue
from .directory import IdDirectory
from .index import (
    IndexGone,
    IndexRange,
    IndexReader,
    SlotTables,
    cover,
    encode_index,
    entries_of,
    gaps,
    id_hash,
    index_key,
    index_prefix,
    key_hash,
    parse_index_key,
)
from .segment import SegmentGone, TierDriver

QueuePlace = tuple[str, int]
"""A queue by its topic and number."""
ColdQueue = tuple[TieredQueue, int | None]
"""A tier queue to search, and the offset from which the hot tier holds its messages (None: search it all)."""

REBUILD_OFFSETS = 10_000
"""Most offsets one rebuilt index object covers."""

log = logging.getLogger("tidemq.tier")


class ColdLookup:
    """Lookups by id and key over tier queues on `driver` (see the module docstring)."""

    def __init__(self, driver: TierDriver, tables: SlotTables | None = None) -> None:
        self.driver = driver
        self.reader = IndexReader(driver, tables or SlotTables())
        self.directory = IdDirectory(self.reader)

    def forget(self) -> None:
        """Drop what is kept in memory (slot tables, the id directory's objects and names), as a new process has
        none of it."""
        self.reader.tables = SlotTables(self.reader.tables.capacity)
        self.directory = IdDirectory(self.reader)

    def queues_at(self, msg_id: str) -> list[QueuePlace]:
        """The queue(s) the tier's id directory lists the record `msg_id` names under (none: no object covers its
        place, or the record there has another size)."""
        return self.directory.queues_at(*parse_message_id(msg_id))

    def by_id(self, queues: Iterable[ColdQueue], msg_id: str) -> StoredMessage | None:
        """The message with id `msg_id` in the first of `queues` holding it (None: none does): the queue its record
        is of (`queues_at`)."""
        hashed = id_hash(msg_id)
        wanted = msg_id.lower()
        for tiered, below in queues:
            for message in self._search(tiered, below, hashed, 1, lambda m: m.msg_id.lower() == wanted):
                return message
        return None

    def by_key(self, queues: Iterable[ColdQueue], key: str, limit: int) -> list[StoredMessage]:
        """The newest `limit` messages carrying `key` of each of `queues` (unordered)."""
        hashed = key_hash(key)
        found: list[StoredMessage] = []
        for tiered, below in queues:
            found += self._search(tiered, below, hashed, limit, lambda m: key in m.keys)
        return found

    def _search(self, tiered: TieredQueue, below: int | None, hashed: int, limit: int, wanted) -> list[StoredMessage]:
        """Up to `limit` messages of the queue below offset `below`, newest first, listed under `hashed` and passing
        `wanted`."""
        for attempt in range(2):
            try:
                return self._search_listed(tiered, below, hashed, limit, wanted)
            except (IndexGone, SegmentGone):  # compaction or retention removed an object meanwhile
                if attempt:
                    raise
                tiered.refresh()
        return []

    def _search_listed(
        self, tiered: TieredQueue, below: int | None, hashed: int, limit: int, wanted
    ) -> list[StoredMessage]:
        low, high = tiered.min_offset, tiered.max_offset
        if low is None:
            return []
        high = high if below is None else min(high, below)
        if low >= high:
            return []  # the hot tier holds all the tier does: it was asked
        found: list[StoredMessage] = []
        seen: set[int] = set()
        for item in reversed([item for item in self.ranges(tiered, low, high) if item.first < high]):
            for offset in self.reader.offsets(item, hashed):
                if offset in seen or not low <= offset < high:
                    continue
                seen.add(offset)
                message = message_at(tiered, offset)
                if message is not None and wanted(message):
                    found.append(message)
                    if len(found) == limit:
                        return found
        return found

    def ranges(self, tiered: TieredQueue, low: int, high: int) -> list[IndexRange]:
        """The index objects covering the queue's offsets [low, high), those missing rebuilt first."""
        listed = [item for item in map(parse_index_key, self.driver.objects(index_prefix(tiered.path))) if item]
        chosen = cover(item for item in listed if item.end > low)
        missing = gaps(chosen, low, high)
        if not missing:
            return chosen
        for first, end in missing:
            chosen += rebuild(self.driver, tiered, first, end)
        return cover(chosen)


def message_at(tiered: TieredQueue, offset: int) -> StoredMessage | None:
    """The message at `offset` of the queue's tier files (None: key compaction removed it)."""
    run = tiered.run(offset, offset + 1)
    if not len(run.entries) or run.entries[0].size == 0:
        return None
    return decode_run(run.records, tiered.topic, tiered.queue, offset)[0]


def rebuild(driver: TierDriver, tiered: TieredQueue, first: int, end: int) -> list[IndexRange]:
    """Index offsets [first, end) of the queue again from its tier files, in objects of at most REBUILD_OFFSETS
    offsets; return them. Offsets retention removed meanwhile are left out."""
    log.info("tier %s:%s: indexing offsets %s..%s again from the tier's files", tiered.topic, tiered.queue, first, end)
    made = []
    at = first
    while at < end:
        stop = min(end, at + REBUILD_OFFSETS)
        try:
            run = tiered.run(at, stop)
        except (OffsetOutOfRange, CorruptStore):
            log.warning("tier %s:%s: offsets from %s are gone; not indexed", tiered.topic, tiered.queue, at)
            break
        covered = run.first + len(run.entries)
        kept = [entry for entry in run.entries if entry.size]
        messages = decode_run(run.records, tiered.topic, tiered.queue, at) if kept else []
        key = index_key(tiered.path, at, covered)
        driver.create_object(key, encode_index(at, covered, entries_of(messages)))
        made.append(IndexRange(key, at, covered))
        at = covered
    return made


def newest(hot: list[StoredMessage], cold: list[StoredMessage], limit: int) -> list[StoredMessage]:
    """The newest `limit` of the messages both tiers found (one found in both counted once), oldest first: what a
    lookup by key returns."""
    found = {(m.queue, m.queue_offset): m for m in cold}
    found.update({(m.queue, m.queue_offset): m for m in hot})
    ordered = sorted(found.values(), key=lambda m: (m.store_timestamp, m.queue, m.queue_offset))
    return ordered[-limit:]
