"""The tier's container layer: each queue's own commit log and ConsumeQueue, as runs of segments.

    <topic>/<queue>/commitlog/      the queue's records, back to back, byte for byte as the hot commit
                                    log holds them (`tidemq_protocol.record`, CRC included), so a message
                                    read cold is identical to the one read hot, id included
    <topic>/<queue>/consumequeue/   a 24-byte ConsumeQueue entry per queue offset (cq_entry.py), from the
                                    tier's first offset on, `position` being regenerated: the record's
                                    place in this queue's tier commit log, not in the hot one
    <topic>/<queue>/index/          the ids and keys of the queue's messages, one object per upload
                                    (index.py, which owns the format), for lookups by id and key

A segment of the ConsumeQueue is named by its byte position, offset * 24; one of the commit log by
its tier position. An upload appends the records to the commit log, then their entries to the
ConsumeQueue, and commits in that order, writing the upload's index object in between: the ConsumeQueue is the
commit point (an index object written by an upload that did not commit only points to offsets a later upload
fills with the same messages; one that is missing is rebuilt at the next lookup, index.py). A crash can leave
commit-log bytes no entry points to (recovery drops them) but never an entry without its record, so
after recovery the tier holds every uploaded message exactly once.

Compaction replaces the front of both files with large segments that a per-queue manifest lists (manifest.py);
a queue is read as its manifest's segments, then the plain segments from the manifest's boundary on.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.record import decode_run

from ..cq_entry import ENTRY_SIZE, CqEntries, pack_entry
from .index import encode_index, entries_of, index_key, index_prefix, parse_index_key
from .manifest import KINDS, Manifest, load_manifest, write_manifest
from .segment import FileSegment, SegmentGone, TierDriver

LISTING_RETRIES = 3
"""Times a read lists the queue again after finding a segment replaced under it."""

log = logging.getLogger("tidemq.tier")


class FileQueue:
    """One logical tier file: segments in order, appends to the last, reads across them."""

    def __init__(self, driver: TierDriver, path: str, segment_bytes: int) -> None:
        self.driver, self.path, self.segment_bytes = driver, path, segment_bytes
        self._segments: list[FileSegment] = []
        self._bases: list[int] = []
        self._lock = threading.Lock()

    def reload(self, segments: list[FileSegment]) -> None:
        """Take `segments` as the file's committed segments, keeping a last segment still being written."""
        with self._lock:
            last = self._segments[-1] if self._segments else None
            if last is not None and (last.pending_bytes or not last.size):
                segments = [segment for segment in segments if segment.base < last.base] + [last]
            self._segments = segments
            self._bases = [segment.base for segment in segments]

    @property
    def empty(self) -> bool:
        return not self._segments

    @property
    def start(self) -> int | None:
        return self._segments[0].base if self._segments else None

    @property
    def end(self) -> int | None:
        """Just past the last committed byte (None while the file holds nothing)."""
        return self._segments[-1].end if self._segments else None

    def append(self, data: bytes, position: int, *, after_gap: bool = False) -> None:
        """Buffer `data` to go at `position`, which must follow everything appended so far (or, `after_gap`, come
        later: a key-compacted front ends before the positions the plain file goes on from)."""
        with self._lock:
            last = self._segments[-1] if self._segments else None
            expected = last.end + last.pending_bytes if last else position
            gap = after_gap and last is not None and not last.pending_bytes and position > expected
            if position != expected and not gap:
                raise CorruptStore(f"{self.path}: append at {position}, but the file ends at {expected}")
            if gap or last is None or last.sealed or (last.size and not self.driver.appendable):
                last = self._add(position)
            elif last.size + last.pending_bytes >= self.segment_bytes and not last.pending_bytes:
                last.seal()
                last = self._add(position)
            last.append(data)

    def _add(self, base: int) -> FileSegment:
        segment = self.driver.create(self.path, base)
        self._segments.append(segment)
        self._bases.append(base)
        return segment

    def commit(self) -> None:
        """Make what was appended durable; retry after an error by calling it again."""
        if self._segments:
            self._segments[-1].commit()

    @property
    def pending(self) -> bool:
        return bool(self._segments and self._segments[-1].pending_bytes)

    def read(self, position: int, length: int) -> bytes:
        with self._lock:
            index = bisect.bisect_right(self._bases, position) - 1
            segments = self._segments[max(index, 0) :]
        parts, end = [], position + length
        for segment in segments:
            if position >= end:
                break
            if position < segment.base or position >= segment.end:
                raise CorruptStore(f"{self.path}: no committed bytes at {position}")
            take = min(end, segment.end) - position
            parts.append(segment.read(position, take))
            position += take
        if position < end:
            raise CorruptStore(f"{self.path}: committed bytes end before {end}")
        return b"".join(parts)

    def segment_end(self, position: int) -> int:
        """Where the segment holding `position` ends (reads that stop there cost one request)."""
        with self._lock:
            index = bisect.bisect_right(self._bases, position) - 1
            return self._segments[index].end if index >= 0 else position

    def truncate(self, end: int) -> None:
        """Keep only the bytes before `end` (recovery)."""
        with self._lock:
            while self._segments and self._segments[-1].base >= end:
                self._segments.pop().delete()
                self._bases.pop()
            if self._segments and self._segments[-1].end > end:
                self._segments[-1].truncate(end - self._segments[-1].base)

    def delete_through(self, predicate: Callable[[FileSegment], bool]) -> list[FileSegment]:
        """Delete leading segments while `predicate(segment)` holds (never one with uncommitted bytes)."""
        deleted = []
        while True:
            with self._lock:
                if not self._segments or self._segments[0].pending_bytes or not predicate(self._segments[0]):
                    return deleted
                segment = self._segments.pop(0)
                self._bases.pop(0)
            segment.delete()
            deleted.append(segment)

    def first_segments(self) -> list[FileSegment]:
        with self._lock:
            return list(self._segments)


class TierRun(NamedTuple):
    """Consecutive offsets from `first` with their records (`records` starts at `entries[0].position`)."""

    first: int
    entries: CqEntries
    records: bytes


class TieredQueue:
    """One queue in the tier: its commit log and ConsumeQueue (see the module docstring)."""

    def __init__(self, driver: TierDriver, topic: str, queue: int, segment_bytes: int, *, writer: bool = True) -> None:
        """`writer=False` opens a read-only view for a process that does not upload: it leaves an unfinished
        upload's bytes alone (recovering would race the uploader that is finishing it)."""
        self.driver, self.topic, self.queue = driver, topic, queue
        self.path = f"{topic}/{queue}"
        self.commitlog = FileQueue(driver, f"{self.path}/commitlog", segment_bytes)
        self.consumequeue = FileQueue(driver, f"{self.path}/consumequeue", segment_bytes // 16 or ENTRY_SIZE)
        self.manifest: Manifest | None = None
        self._pending_index: list[tuple[str, bytes]] = []  # (key, object) of uploads appended, not committed
        self._listing = 0  # listings taken in, odd while one is: reads that saw it change read again
        self._listing_lock = threading.Lock()  # one listing at a time
        self.refresh()
        if writer:
            self.recover()

    def refresh(self) -> None:
        """List the queue's files again: the plain segments first, then the manifest (see manifest.py)."""
        with self._listing_lock:
            self._list()

    def _list_again_unless_listed_since(self, listing: int) -> None:
        """List again, unless another reader did since `listing` (or is doing it now: this waits for it)."""
        with self._listing_lock:
            if self._listing == listing:
                self._list()

    def _list(self) -> None:
        plain = [self.driver.segments(self.commitlog.path), self.driver.segments(self.consumequeue.path)]
        manifest = load_manifest(self.driver, self.path)
        self._listing += 1
        try:
            for file, segments, kind in zip((self.commitlog, self.consumequeue), plain, KINDS, strict=True):
                if manifest is not None:
                    listed = [self.driver.segment(file.path, s.name, s.base, s.size) for s in manifest.segments(kind)]
                    segments = listed + [s for s in segments if s.base >= manifest.boundary(kind)]
                file.reload(segments)
            self.manifest = manifest
        finally:
            self._listing += 1

    def run(self, first: int, end: int) -> TierRun:
        """Offsets [first, end) with their records, in two reads. A run that starts in a key-compacted region
        stops at its end, where records stop lying back to back. Read as one listing of the queue saw it: a
        segment replaced meanwhile (compaction) makes it read again from a new listing. Readers sharing the view
        take one listing in between them: a read that another reader's listing overtook reads again without
        counting, so only a queue that changes under every listing of this reader's (LISTING_RETRIES of them)
        fails the read."""
        listed = 0
        while True:
            listing = self._listing
            if listing % 2:  # being taken in: wait for it
                self._list_again_unless_listed_since(listing)
                continue
            boundary = self.key_compacted_end
            stop = min(end, boundary) if first < boundary else end
            try:
                entries = self.entries(first, stop)
                start = entries[0].position
                records = self.read(start, entries[len(entries) - 1].end - start)
            except (SegmentGone, CorruptStore):
                if listing != self._listing:
                    continue
                if listed == LISTING_RETRIES:
                    raise
                listed += 1
                self._list_again_unless_listed_since(listing)
                continue
            if listing == self._listing:
                return TierRun(first, entries, records)

    # ---- offsets ----

    @property
    def min_offset(self) -> int | None:
        start = self.consumequeue.start
        return None if start is None else start // ENTRY_SIZE

    @property
    def max_offset(self) -> int | None:
        end = self.consumequeue.end
        return None if end is None else end // ENTRY_SIZE

    def entries(self, start: int, end: int) -> CqEntries:
        """The entries of offsets [start, end), all committed."""
        if end <= start:
            return CqEntries()
        return CqEntries(self.consumequeue.read(start * ENTRY_SIZE, (end - start) * ENTRY_SIZE))

    def read(self, position: int, length: int) -> bytes:
        return self.commitlog.read(position, length)

    def first_offset_stored_at(self, timestamp_ms: int, low: int, high: int) -> int:
        """The first offset in [low, high) stored at or after `timestamp_ms` (high if none is): a binary search
        of the entries, one ranged read each."""
        while low < high:
            middle = (low + high) // 2
            if self.entries(middle, middle + 1)[0].store_timestamp >= timestamp_ms:
                high = middle
            else:
                low = middle + 1
        return low

    def segment_end_offset(self, offset: int) -> int:
        """The end of the ConsumeQueue segment holding `offset`: S3 uploads put a queue's records and their
        entries in one segment each, so offsets up to here cost one request for each."""
        return self.consumequeue.segment_end(offset * ENTRY_SIZE) // ENTRY_SIZE

    # ---- upload ----

    def append(self, first_offset: int, records: bytes, entries: CqEntries) -> None:
        """Buffer the records of offsets first_offset.. with their entries as the hot store has them (positions
        are regenerated: the records go back to back in the tier commit log); `commit` uploads."""
        max_offset = self.max_offset
        if max_offset is not None and first_offset != max_offset:
            raise CorruptStore(f"tier {self.topic}:{self.queue} ends at {max_offset}, cannot append {first_offset}")
        start = position = self.commitlog_end
        packed = []
        for entry in entries:
            packed.append(pack_entry(position, entry.size, entry.tag_code, entry.store_timestamp))
            position += entry.size
        self.commitlog.append(records, start, after_gap=start == self._resume_at)
        self.consumequeue.append(b"".join(packed), first_offset * ENTRY_SIZE)
        self.add_index(first_offset, first_offset + len(entries), records)

    def add_index(self, first: int, end: int, records: bytes) -> None:
        """Buffer the index object of offsets [first, end), whose records (of this queue, from `first` on, where
        key compaction may have removed some) are `records`; `commit` writes it."""
        messages = decode_run(records, self.topic, self.queue, first)
        data = encode_index(first, end, entries_of(messages))
        self._pending_index.append((index_key(self.path, first, end), data))

    @property
    def generation(self) -> int:
        """The generation of the manifest this listing found (0: the queue was never compacted)."""
        return self.manifest.generation if self.manifest is not None else 0

    @property
    def key_compacted_end(self) -> int:
        """The offset where a key-compacted front ends (0: none)."""
        manifest = self.manifest
        return manifest.consumequeue_from // ENTRY_SIZE if manifest is not None and manifest.key_compacted else 0

    @property
    def _resume_at(self) -> int | None:
        """Where the plain commit log goes on after a key-compacted front (None: no such front)."""
        manifest = self.manifest
        return manifest.commitlog_from if manifest is not None and manifest.key_compacted else None

    @property
    def commitlog_end(self) -> int:
        """Where the next uploaded record goes in the tier commit log."""
        end = self.commitlog.end or 0
        resume = self._resume_at
        return end if resume is None or self.commitlog.pending else max(end, resume)

    def commit(self) -> None:
        """Upload what `append` buffered: records first, then their index objects, then the entries that make
        them visible."""
        self.commitlog.commit()
        self.commit_index()
        self.consumequeue.commit()

    def commit_index(self) -> None:
        """Write the index objects buffered (one already there, from an upload retried, is left as it is)."""
        while self._pending_index:
            key, data = self._pending_index[0]
            self.driver.create_object(key, data)
            self._pending_index.pop(0)

    @property
    def pending(self) -> bool:
        return self.commitlog.pending or self.consumequeue.pending

    # ---- recovery and retention ----

    def clear(self) -> None:
        """Delete every segment (the tier restarts at a later offset: what it held expired)."""
        self.consumequeue.delete_through(lambda segment: True)
        self.commitlog.delete_through(lambda segment: True)
        self.delete_index_below(None)

    def delete_index_below(self, offset: int | None) -> int:
        """Delete the index objects wholly below `offset` (None: every one); return how many went."""
        doomed = [
            item
            for item in map(parse_index_key, self.driver.objects(index_prefix(self.path)))
            if item is not None and (offset is None or item.end <= offset)
        ]
        for item in doomed:
            self.driver.delete_object(item.key)
        return len(doomed)

    def recover(self) -> None:
        """Cut a torn ConsumeQueue tail and drop commit-log bytes no entry points to."""
        cq = self.consumequeue
        if cq.end is not None and cq.end % ENTRY_SIZE:
            cq.truncate(cq.end - cq.end % ENTRY_SIZE)
        if cq.empty or cq.end == cq.start:
            self.commitlog.truncate(0)
            return
        expected = self.entries(self.max_offset - 1, self.max_offset)[0].end
        if (self.commitlog.end or 0) < expected:
            raise CorruptStore(f"tier {self.topic}:{self.queue}: entries point past the commit log's end")
        if self.commitlog.end > expected:
            log.info(
                "tier %s:%s: dropping %d bytes an unfinished upload left",
                self.topic,
                self.queue,
                self.commitlog.end - expected,
            )
        self.commitlog.truncate(expected)

    def delete_expired(self, before_timestamp: int) -> int:
        """Delete segments whose every message was stored before `before_timestamp`; return how many
        messages went. ConsumeQueue segments go first, so no entry ever points to a deleted record; segments a
        manifest lists leave it first (a new manifest generation), or stay if another writer switched it."""
        self.refresh()
        last_end = 0
        doomed: list[FileSegment] = []
        for segment in self.consumequeue.first_segments():
            if segment.size < ENTRY_SIZE or segment.pending_bytes:
                break
            last = CqEntries(segment.read(segment.end - ENTRY_SIZE, ENTRY_SIZE))[0]
            if last.store_timestamp >= before_timestamp:
                break
            last_end = last.end
            doomed.append(segment)
        if not doomed:
            return 0
        manifest = self.manifest
        if manifest is not None and doomed[0].base < manifest.consumequeue_from:
            cut = doomed[-1].end
            kept = dataclasses.replace(
                manifest,
                generation=manifest.generation + 1,
                consumequeue=tuple(s for s in manifest.consumequeue if s.base >= cut),
                commitlog=tuple(s for s in manifest.commitlog if s.end > last_end),
            )
            if not write_manifest(self.driver, self.path, kept):
                return 0  # compaction switched the queue meanwhile: the next run looks again
        doomed_bases = {segment.base for segment in doomed}
        deleted = self.consumequeue.delete_through(lambda segment: segment.base in doomed_bases)
        self.commitlog.delete_through(lambda segment: segment.end <= last_end)
        if manifest is not None:
            self.refresh()
        self.delete_index_below(self.min_offset)
        return sum(segment.size for segment in deleted) // ENTRY_SIZE
