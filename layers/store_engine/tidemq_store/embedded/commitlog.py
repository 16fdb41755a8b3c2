"""CommitLog: the append-only log every message of every topic is written to first.

The log is a run of segment files in one directory, each named by the 20-digit commit-log position of
its first byte (RocketMQ's naming), so positions are dense across segments. A put is appended whole
to the active segment; when it would not fit, the active segment is fsync'd and a new one started,
so a batch never straddles two files. The record format lives in `tidemq_protocol.record`.

Preallocation (`preallocate_bytes`, 0: off): a background thread, the preallocator, keeps that many bytes of zeros
written and fdatasync'd ahead of the writer in the active segment, a chunk at a time, then readies a spare next
segment (the file `preallocated`, renamed when the log rolls). An append then lands inside a file whose size is
already on disk, so its fdatasync persists data alone (ext4 journals a size change or an unwritten extent's
conversion: zeros are written, not fallocate'd). The writer never waits for its fdatasync: an append past the
zeros grows the file, waiting at most for one chunk of zeros to reach the page cache. Only the active segment has
zeros after its data: a roll cuts them off before the next segment starts, and so does a clean close; after a
crash recovery reads to the first zero size field (`unwritten_at`) or torn batch and truncates there, which drops
whatever a torn write left beyond it, so a later put never meets it.

Group commit has no timer: a lone writer's put runs its fdatasync at once (below).

Durability follows `FlushDiskType`. `wait_durable(end)` implements group commit: the first caller
that finds no fsync under way becomes the leader, fsyncs everything written so far, and wakes every
caller whose data that fsync covered; callers arriving meanwhile wait for the next one. Under `ASYNC`
a background thread fsyncs every `flush_interval_ms` instead.

A failed fsync fails the log for good (`failure`): no later append or fsync is attempted, every waiter gets
`StoreFailed`. Retrying cannot be trusted: after a failed writeback Linux may drop the dirty pages and report
the next fsync as a success (PostgreSQL's "fsyncgate"). What an earlier fsync covered is safe, and a restart
recovers the log from the disk.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

from tidemq_protocol.errors import CorruptStore, DependencyUnavailable, ReplicaDiverged, StoreFailed
from tidemq_protocol.limits import KIB
from tidemq_protocol.record import (
    SHORTEST_HEADER,
    RecordHeader,
    read_header,
    scan_batches,
    size_at,
    store_timestamp_at,
    unwritten_at,
)

from ..config import FlushDiskType
from ..health import DiskFailing, DiskWatch, Probe
from ..threads import background_thread
from .files import cut, fsync_directory, pwrite_all, raise_again

log = logging.getLogger("tidemq.store")
SCAN_WINDOW = 8 * 1024 * 1024
PREALLOCATE_CHUNK = 256 * KIB
PREALLOCATE_PAUSE_S = 5.0  # after a write of zeros failed (a full disk), before the preallocator tries again
"""The preallocator writes and fdatasyncs zeros this much at a time: a writer's fdatasync of the same file flushes
at most one chunk of zeros besides its data."""
ZEROS = bytes(PREALLOCATE_CHUNK)
SPARE = "preallocated"
"""The next segment, zero-filled ahead; its name is not a position, so it is never taken for a segment."""


class SegmentRange(NamedTuple):
    """Commit-log positions [start, end) of one segment file."""

    start: int
    end: int


@dataclass(slots=True)
class Segment:
    start: int
    path: Path
    fd: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


class CommitLog:
    """Segment files plus the written/flushed positions that readers and writers agree on.

    `append` must be called by one thread at a time (the store's write lock); reads are lock-free.
    """

    def __init__(
        self,
        directory: Path,
        segment_bytes: int,
        flush_disk_type: FlushDiskType,
        flush_interval_ms: int,
        preallocate_bytes: int = 0,
        disk_reserve_bytes: int = 0,
    ):
        self.directory = directory
        self.disk = DiskWatch(directory, disk_reserve_bytes)
        """Whether the last write failed for want of room (health.py)."""
        self.probe = Probe("disk", True, self._check_disk)
        """The disk as `GET /health` reports it: failing once the log failed, or while its last write found no room."""
        self.segment_bytes = segment_bytes
        self.sync = flush_disk_type is FlushDiskType.SYNC
        self.preallocate_bytes = min(preallocate_bytes, segment_bytes)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / SPARE).unlink(missing_ok=True)  # a crash's leftover: readied again when wanted
        self._segments: list[Segment] = []
        for path in sorted(p for p in directory.iterdir() if p.name.isdigit()):
            fd = os.open(path, os.O_RDWR)
            self._segments.append(Segment(int(path.name), path, fd, os.fstat(fd).st_size))
        if not self._segments:
            self._segments.append(self._create_segment(0))
        self._starts = [s.start for s in self._segments]
        self._retired: list[int] = []
        self._allocated = self._segments[-1].size  # the active segment's file length: its data, then any zeros
        self._spare: tuple[int, int] | None = None  # (fd, length) of the next segment, zero-filled
        self._prealloc_lock = threading.Lock()  # the preallocator's zeros against an append past `_allocated`
        self._prealloc_sync = threading.Lock()  # the preallocator's fdatasync against a close of its file
        self._prealloc_wanted = threading.Event()
        self._written = self._segments[-1].end
        self._flushed = self._written
        self._flush_cond = threading.Condition()
        self._flushing = False
        self._failure: str | None = None
        self._closed = threading.Event()
        self._flusher: threading.Thread | None = None
        if not self.sync:
            self._flusher = background_thread(self._flush_every, "commitlog-flush", (flush_interval_ms / 1000,))
            self._flusher.start()
        self._preallocator: threading.Thread | None = None
        if self.preallocate_bytes:
            self._preallocator = background_thread(self._preallocate, "commitlog-preallocate")
            self._preallocator.start()

    # ---- positions -------------------------------------------------------------------------------

    @property
    def min_position(self) -> int:
        return self._segments[0].start

    @property
    def written_position(self) -> int:
        return self._written

    @property
    def flushed_position(self) -> int:
        return self._flushed

    @property
    def failure(self) -> str | None:
        """Why the log failed (it then takes no more writes), or None."""
        return self._failure

    @property
    def readable_position(self) -> int:
        """Readers see only acknowledged data: fsync'd under SYNC, written under ASYNC."""
        return self._flushed if self.sync else self._written

    def segment_start(self, position: int) -> int:
        """Start of the segment holding `position`."""
        return self._starts[bisect.bisect_right(self._starts, position) - 1]

    def segments(self) -> list[SegmentRange]:
        """Every segment, oldest first; the last one is active."""
        return [SegmentRange(s.start, s.end) for s in self._segments]

    # ---- writing ---------------------------------------------------------------------------------

    def _check_disk(self) -> str:
        if self._failure is not None:
            raise DiskFailing(errno.EIO, f"the commit log takes no writes: {self._failure}")
        return self.disk.check()

    def append(self, data: bytes | bytearray) -> int:
        """Write one encoded put at the end of the log and return its start position (not yet durable).

        A put that would leave less than `disk_reserve_bytes` free is refused (DependencyUnavailable: the room is
        kept for the indexes, offsets and acks beside the log). A disk with no room for it all the same (ENOSPC,
        EDQUOT) refuses the put too, DependencyUnavailable, and the log goes on:
        nothing of it counts (the log's end has not moved; a partial write past it is overwritten by the next
        put, or cut off by recovery), and puts are taken again as soon as there is room. Any other failed write
        fails the log, as a failed fsync does (the module docstring)."""
        if self._failure is not None:
            raise StoreFailed(self._failure)
        self.disk.admit(len(data))
        try:
            active = self._segments[-1]
            if active.size and active.size + len(data) > self.segment_bytes:
                active = self._roll()
            start = active.end
            self._write_at_end(active, data)
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                self.disk.failed(error)
                reason = f"a write to the commit log failed: {error.strerror}; nothing was stored"
                raise DependencyUnavailable("disk", reason, retry_after_s=5) from error
            self._sync(partial(raise_again, error), f"a write to the commit log in {self.directory}")
            raise  # unreachable: _sync raised StoreFailed
        self.disk.wrote()
        return start

    def append_replica(self, data: bytes, position: int, segment_start: int) -> None:
        """Write a master's bytes where the master wrote them (a slave's log, `replica.py`): at `position`, in a
        segment that starts where the master's does. An empty log starts at the master's first position."""
        if self._failure is not None:
            raise StoreFailed(self._failure)
        active = self._segments[-1]
        if position != self._written:
            if self._written != 0 or active.size or len(self._segments) > 1 or position != segment_start:
                raise ReplicaDiverged(f"this log ends at {self._written}; the master sent data from {position}")
            with self._prealloc_sync, self._prealloc_lock:
                os.close(active.fd)
                active.path.unlink()
                active = self._create_segment(position)
                self._segments, self._starts = [active], [position]
                self._written = self._flushed = position
                self._allocated = 0
        elif segment_start != active.start:
            if segment_start != self._written:
                raise ReplicaDiverged(f"the master's segment starts at {segment_start}, inside this log's")
            active = self._roll()
        self._write_at_end(active, data)

    def _write_at_end(self, active: Segment, data: bytes | bytearray) -> None:
        """Write `data` after the active segment's last byte: into zeros written ahead without a lock (the
        preallocator writes only past `_allocated`), past them holding the preallocator's lock (neither may
        overwrite the other)."""
        end = active.size + len(data)
        if end <= self._allocated:
            pwrite_all(active.fd, data, active.size)
        else:
            with self._prealloc_lock:
                pwrite_all(active.fd, data, active.size)
                self._allocated = end
        active.size = end
        self._written = active.end
        if self._preallocator is not None and end + self.preallocate_bytes // 2 > self._allocated:
            self._prealloc_wanted.set()

    def _create_segment(self, start: int) -> Segment:
        path = self.directory / f"{start:020d}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._sync(partial(fsync_directory, self.directory), f"the commit-log directory {self.directory}")
        return Segment(start, path, fd, 0)

    def _sync(self, fsync: Callable[[], None], what: str) -> None:
        """Run `fsync`; if it fails, fail the log (see the module docstring) and raise StoreFailed."""
        try:
            fsync()
        except OSError as error:
            with self._flush_cond:
                if self._failure is None:
                    self._failure = f"fsync of {what} failed: {error}"
                    log.critical("commit log failed, no more writes are taken: %s", self._failure)
                self._flush_cond.notify_all()
            raise StoreFailed(self._failure) from error

    def _roll(self) -> Segment:
        old = self._segments[-1]
        with self._prealloc_lock:
            if os.fstat(old.fd).st_size > old.size:  # a sealed segment's file ends where its data does (docstring)
                self._sync(partial(cut, old.fd, old.size), f"commit-log segment {old.path}")
            else:  # the flusher syncs the active one
                self._sync(partial(os.fdatasync, old.fd), f"commit-log segment {old.path}")
            segment = self._take_spare(old.end) or self._create_segment(old.end)
            self._segments = [*self._segments, segment]
            self._starts = [*self._starts, segment.start]
        if self._preallocator is not None:
            self._prealloc_wanted.set()
        return segment

    def _take_spare(self, start: int) -> Segment | None:
        """The spare segment, made the one starting at `start` (its zeros now the active segment's), or None if
        none is ready. Called holding the preallocator's lock."""
        if self._spare is None:
            self._allocated = 0
            return None
        (fd, self._allocated), self._spare = self._spare, None
        path = self.directory / f"{start:020d}"
        os.rename(self.directory / SPARE, path)
        self._sync(partial(fsync_directory, self.directory), f"the commit-log directory {self.directory}")
        return Segment(start, path, fd, 0)

    def _preallocate(self) -> None:
        """The preallocator (module docstring): whenever the writer asks, write zeros ahead of it, then ready the
        spare segment. An error other than a failed fdatasync (which fails the log) pauses it, with a warning:
        appends grow their files meanwhile, as they would without it."""
        while True:
            self._prealloc_wanted.wait()
            self._prealloc_wanted.clear()
            try:
                while not self._closed.is_set() and self._zero_chunk_ahead():
                    pass
                if not self._closed.is_set():
                    self._ready_spare()
            except StoreFailed:
                return  # logged when it failed; puts now fail with the reason
            except OSError as error:  # a full disk, say: appends grow their files meanwhile, and it tries again
                log.warning("commit-log preallocation paused for %.0f s: %s", PREALLOCATE_PAUSE_S, error)
                self._closed.wait(PREALLOCATE_PAUSE_S)
            if self._closed.is_set():
                return

    def _zero_chunk_ahead(self) -> bool:
        """Write and fdatasync one chunk of zeros past the active segment's end, if fewer than `preallocate_bytes`
        are there; whether it wrote one. An append past the zeros waits at most for the write of one chunk to the
        page cache, never for its fdatasync."""
        with self._prealloc_sync:
            with self._prealloc_lock:
                if self._failure is not None or not self._segments:
                    return False
                active = self._segments[-1]
                start = max(self._allocated, active.size)
                length = min(PREALLOCATE_CHUNK, min(self.segment_bytes, active.size + self.preallocate_bytes) - start)
                if length <= 0:
                    return False
                pwrite_all(active.fd, memoryview(ZEROS)[:length], start)
                self._allocated = start + length
            self._sync(partial(os.fdatasync, active.fd), f"commit-log segment {active.path}")
            return True

    def _ready_spare(self) -> None:
        """Zero-fill the spare segment's first `preallocate_bytes` once the active one is zero-filled to its end."""
        if self._spare is not None or self._allocated < self.segment_bytes:
            return
        path = self.directory / SPARE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for start in range(0, self.preallocate_bytes, PREALLOCATE_CHUNK):
                pwrite_all(fd, memoryview(ZEROS)[: min(PREALLOCATE_CHUNK, self.preallocate_bytes - start)], start)
            os.fsync(fd)
        except OSError:
            os.close(fd)
            raise
        with self._prealloc_lock:
            self._spare = (fd, self.preallocate_bytes)

    def wait_durable(self, end: int) -> None:
        """Return once everything before `end` is fsync'd, sharing one fsync among concurrent callers."""
        with self._flush_cond:
            while self._flushed < end:
                if self._failure is not None:
                    raise StoreFailed(self._failure)
                if self._flushing:
                    self._flush_cond.wait()
                    continue
                self._flushing = True
                target = self._written  # read before the fd: a roll between the two already synced `target`
                active = self._segments[-1]
                self._flush_cond.release()
                try:
                    self._sync(partial(os.fdatasync, active.fd), f"commit-log segment {active.path}")
                finally:
                    self._flush_cond.acquire()
                    self._flushing = False
                    self._flush_cond.notify_all()
                self._flushed = max(self._flushed, target)

    def flush(self) -> None:
        """fsync everything written so far."""
        self.wait_durable(self._written)

    def _flush_every(self, interval: float) -> None:
        """ASYNC's flusher: fsync every `interval` until closed, or until an fsync fails the log (then going on
        would be pointless: the log takes no more writes)."""
        while not self._closed.wait(interval):
            try:
                self.flush()
            except StoreFailed:
                return  # logged when it failed; puts now fail with the reason
            except Exception:
                log.exception("the commit-log flusher failed unexpectedly; it tries again in %.3f s", interval)

    # ---- reading ---------------------------------------------------------------------------------

    def read(self, position: int, length: int) -> bytes:
        """Read `length` bytes at `position`, crossing segment boundaries if needed."""
        segments, starts = self._segments, self._starts
        index = bisect.bisect_right(starts, position) - 1
        if index < 0:
            raise CorruptStore(f"commit-log position {position} is below the first segment at {starts[0]}")
        chunks = []
        while length > 0:
            segment = segments[index]
            data = os.pread(segment.fd, min(length, segment.end - position), position - segment.start)
            if not data:
                raise CorruptStore(f"commit-log position {position} is past the end of the log")
            chunks.append(data)
            position += len(data)
            length -= len(data)
            index += 1
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def first_store_timestamp(self, segment_start: int) -> int | None:
        """Store timestamp of the first record in the segment starting at `segment_start`."""
        data = self.read(segment_start, SHORTEST_HEADER) if segment_start < self._written else b""
        return store_timestamp_at(data) if len(data) == SHORTEST_HEADER else None

    def read_record_header(self, position: int) -> RecordHeader:
        """The verified header of the record at `position` (reads the whole record)."""
        size = size_at(self.read(position, SHORTEST_HEADER))
        return read_header(self.read(position, size))

    def iter_batches(self, start: int) -> Iterator[list[RecordHeader]]:
        """Yield every complete, intact batch from `start` to the end of the log, stopping at a torn tail.

        Used by recovery. Damage inside a sealed segment is not a torn tail (segments are fsync'd
        before the next one starts), so it raises CorruptStore instead of silently dropping data.
        """
        for segment in list(self._segments):
            position = max(start, segment.start)
            window = SCAN_WINDOW
            while position < segment.end:
                length = min(window, segment.end - position)
                data = os.pread(segment.fd, length, position - segment.start)
                advanced = position
                for batch in scan_batches(data, position):
                    advanced = batch[-1].physical_offset + batch[-1].size
                    yield batch
                if advanced > position:
                    position = advanced
                elif segment is self._segments[-1] and (unwritten_at(data) or position + length >= segment.end):
                    return  # the zeros written ahead, or a torn batch at the tail
                elif position + length < segment.end:
                    window *= 2  # a batch larger than the window
                else:
                    raise CorruptStore(f"sealed commit-log segment {segment.path} is damaged at position {position}")

    # ---- repair and retention --------------------------------------------------------------------

    def truncate(self, position: int) -> None:
        """Drop everything from `position` on (recovery cuts a torn tail here) and fsync the result. The file is
        cut there, zeros written ahead with the rest: whatever a torn write left past `position` is gone."""
        with self._prealloc_sync, self._prealloc_lock:
            keep = [s for s in self._segments if s.start < position] or self._segments[:1]
            for segment in self._segments[len(keep) :]:
                os.close(segment.fd)
                segment.path.unlink()
            last = keep[-1]
            if last.end != position or last is not self._segments[-1]:
                os.ftruncate(last.fd, position - last.start)
                last.size = self._allocated = position - last.start
            self._sync(partial(os.fsync, last.fd), f"commit-log segment {last.path}")
            self._sync(partial(fsync_directory, self.directory), f"the commit-log directory {self.directory}")
            self._segments, self._starts = keep, [s.start for s in keep]
            self._written = self._flushed = position

    def delete_segments_before(self, position: int) -> list[SegmentRange]:
        """Delete whole segments that end at or before `position` (never the active one).

        Their descriptors stay open until the next deletion, so a read that looked a segment up just
        before it went still reads the right file rather than a reused descriptor.
        """
        doomed = [s for s in self._segments[:-1] if s.end <= position]
        for fd in self._retired:
            os.close(fd)
        self._retired = [s.fd for s in doomed]
        if not doomed:
            return []
        self._segments = self._segments[len(doomed) :]
        self._starts = [s.start for s in self._segments]
        for segment in doomed:
            segment.path.unlink()
        fsync_directory(self.directory)
        return [SegmentRange(s.start, s.end) for s in doomed]

    def close(self) -> None:
        """fsync what was written and close the files, the active one cut where its data ends and the spare
        segment removed (so a clean log holds data alone)."""
        self._closed.set()
        self._prealloc_wanted.set()
        for thread in (self._flusher, self._preallocator):
            if thread is not None:
                thread.join()
        if self._failure is None and self._segments:
            self.flush()
            active = self._segments[-1]
            if os.fstat(active.fd).st_size > active.size:
                self._sync(partial(cut, active.fd, active.size), f"commit-log segment {active.path}")
        if self._spare is not None:
            os.close(self._spare[0])
            (self.directory / SPARE).unlink()
            self._spare = None
        for fd in [*self._retired, *(s.fd for s in self._segments)]:
            os.close(fd)
        self._segments, self._retired = [], []
