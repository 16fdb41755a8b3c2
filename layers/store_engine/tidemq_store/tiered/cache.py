"""The read-ahead cache for cold reads (the 5.1 design's, with its two open problems addressed).

A cold read fetches a *block*: the ConsumeQueue entries of consecutive offsets and their records, which
sit back to back in the queue's tier commit log, so a block costs two ranged reads however many
messages it holds. Blocks are shared by every reader of the queue (any number of consumer groups).

Readers are tracked as *streams*: a read at the offset where an earlier read ended continues that
stream; any other read starts a new one. Each stream has a prefetch window, in messages, that works
like TCP Tahoe's congestion window: it starts at `min_window` (or the read's size) and, with every read
that continues the stream from what was fetched ahead, doubles while below its threshold (slow start)
and then grows by `min_window` (additive increase); when a stream's next read finds nothing fetched
ahead (it was dropped) or a block is evicted before anyone read it, the threshold becomes half the
window and the window starts over (multiplicative decrease). After each read the cache
fetches ahead, in the background, until a window's worth past the stream's position is cached or in
flight, in blocks of at most `max_block` messages that never straddle a tier segment (so a block is
one request for entries and one for records), so that several fetches run at once and S3's latency
is paid in parallel. Two readers that need the same block wait for one fetch (coalesced).

Expiry is consumption-rate aware: each stream's rate (messages/s, smoothed) gives when it will reach a
block; a block no live stream will reach before its TTL ends, or that every stream has passed, is
dropped at once instead of sitting in memory until the TTL (the article's open problem). The cache is
bounded in bytes: over the bound it drops blocks nobody needs first, then the least recently used.
With `max_bytes` 0 there is no read-ahead: each read fetches just what it asks for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

from tidemq_protocol.filter import MessageFilter

from ..cq_entry import CqEntries
from ..selection import SCAN_LIMIT, Selection, scan_size, select_runs
from .container import TieredQueue

QueueKey = tuple[str, int]
RATE_SMOOTHING = 0.3
MAX_STREAMS = 64  # per queue; the least recently seen goes first


@dataclass(slots=True, eq=False)
class Block:
    """Offsets [first, first + len(entries)) of one queue with their records (`data` starts at `entries[0]`)."""

    first: int
    entries: CqEntries
    data: bytes
    expires_at: float = 0.0
    last_used: float = 0.0
    reads: int = 0

    @property
    def end(self) -> int:
        return self.first + len(self.entries)

    @property
    def nbytes(self) -> int:
        return len(self.data) + len(self.entries.data)

    def records(self, position: int, length: int) -> bytes:
        """`length` bytes of records at `position` of the queue's tier commit log."""
        start = position - self.entries[0].position
        return self.data[start : start + length]


@dataclass(slots=True, eq=False)
class Stream:
    """One reader going through a queue in order (usually one consumer group)."""

    position: int
    window: int
    last_seen: float
    read_size: int  # messages the reader asks for at a time: a block is never smaller
    threshold: int = 2**62  # slow start below it, additive increase above it
    rate: float | None = None  # messages per second, smoothed; None until measured


@dataclass(slots=True)
class QueueCache:
    blocks: list[Block] = field(default_factory=list)  # sorted by first offset, not overlapping
    in_flight: dict[int, tuple[int, Future]] = field(default_factory=dict)  # first -> (end, fetch)
    streams: list[Stream] = field(default_factory=list)


def fetch_block(tiered: TieredQueue, first: int, end: int) -> Block:
    """Read offsets [first, end) (or fewer, see `TieredQueue.run`) from the tier: one read of entries, one of
    records."""
    run = tiered.run(first, end)
    return Block(first, run.entries, run.records)


class ReadAheadCache:
    def __init__(
        self,
        max_bytes: int,
        ttl_s: float,
        *,
        min_window: int = 4096,
        max_window: int = 65_536,
        max_block: int = 4096,
        fetch_threads: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes, self.ttl_s = max_bytes, ttl_s
        self.min_window, self.max_window, self.max_block = min_window, max_window, max_block
        self.clock = clock
        self._queues: dict[QueueKey, QueueCache] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(fetch_threads, thread_name_prefix="tier-read-ahead")
        self.stats = {"hits": 0, "misses": 0, "waits": 0, "prefetches": 0, "evicted_unread": 0, "expired_early": 0}

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    # ---- reads ----

    def read(self, tiered: TieredQueue, offset: int, count: int, end: int) -> Block:
        """A block starting at or before `offset` that holds it (it may hold fewer than `count` after it)."""
        if not self.enabled:
            return fetch_block(tiered, offset, min(end, offset + count))
        key = (tiered.topic, tiered.queue)
        now = self.clock()
        owned = None
        with self._lock:
            cache = self._queues.setdefault(key, QueueCache())
            stream = self._stream(cache, offset, count, now)
            block = self._cached(cache, offset)
            pending = None if block else self._in_flight(cache, offset)
            if block is None and pending is None:
                # just what this read needs, now; the rest of the window in the background meanwhile
                fetch_end = min(end, offset + count, self._next_start(cache, offset), tiered.segment_end_offset(offset))
                owned = pending = self._register(cache, offset, fetch_end)
                self._fetch_ahead(key, cache, tiered, stream, fetch_end, end)
        sequential = stream.rate is not None  # it has read before: this read continues it
        if owned is not None:
            self.stats["misses"] += 1
            self._fill(key, cache, tiered, offset, fetch_end, owned)
        else:
            self.stats["hits" if block is not None else "waits"] += 1
        if sequential and owned is not None:  # what was fetched ahead for it is gone: back off
            self._back_off(stream)
        elif sequential:  # read in order from what was fetched ahead (or is arriving): reach further
            grown = stream.window * 2 if stream.window < stream.threshold else stream.window + self.min_window
            stream.window = min(self.max_window, grown)
        if block is None:
            block = pending.result()
        block.reads += 1
        block.last_used = now
        return block

    def advance(self, tiered: TieredQueue, offset: int, next_offset: int, end: int) -> None:
        """The read at `offset` ended at `next_offset`: move its stream, and fetch ahead of it."""
        if not self.enabled or next_offset <= offset:
            return
        key = (tiered.topic, tiered.queue)
        now = self.clock()
        with self._lock:
            cache = self._queues.get(key)
            if cache is None:
                return
            stream = next((s for s in cache.streams if s.position == offset), None)
            if stream is None:
                return
            elapsed = now - stream.last_seen
            if elapsed > 0 and stream.rate is not None:
                measured = (next_offset - offset) / elapsed
                stream.rate = measured if stream.rate == 0 else stream.rate + RATE_SMOOTHING * (measured - stream.rate)
            elif stream.rate is None:
                stream.rate = 0.0
            stream.position, stream.last_seen = next_offset, now
            self._fetch_ahead(key, cache, tiered, stream, next_offset, end)
            self._expire(key, cache, now)

    def _fetch_ahead(
        self, key: QueueKey, cache: QueueCache, tiered: TieredQueue, stream: Stream, position: int, end: int
    ) -> None:
        """Start background fetches until a window past `position` is cached or in flight."""
        ahead = self._covered_until(cache, position)
        while ahead < end and ahead - position < stream.window:
            fetch_end = min(end, ahead + self._block_size(stream), tiered.segment_end_offset(ahead))
            self._start_fetch(key, cache, tiered, ahead, fetch_end)
            self.stats["prefetches"] += 1
            ahead = fetch_end

    # ---- bookkeeping (under the lock) ----

    def _back_off(self, stream: Stream) -> None:
        stream.threshold = max(self.min_window, stream.window // 2)
        stream.window = max(self.min_window, stream.read_size)

    def _block_size(self, stream: Stream) -> int:
        """Blocks hold whole reads: a read never ends a few messages short of what it asked for."""
        return stream.read_size * max(1, min(stream.window, self.max_block) // stream.read_size)

    def _stream(self, cache: QueueCache, offset: int, count: int, now: float) -> Stream:
        for stream in cache.streams:
            if stream.position == offset:
                stream.read_size = count
                return stream
        stream = Stream(offset, max(self.min_window, count), now, count)
        cache.streams.append(stream)
        if len(cache.streams) > MAX_STREAMS:
            cache.streams.remove(min(cache.streams, key=lambda s: s.last_seen))
        return stream

    @staticmethod
    def _cached(cache: QueueCache, offset: int) -> Block | None:
        for block in cache.blocks:
            if block.first <= offset < block.end:
                return block
        return None

    @staticmethod
    def _in_flight(cache: QueueCache, offset: int) -> Future | None:
        for first, (end, future) in cache.in_flight.items():
            if first <= offset < end:
                return future
        return None

    def _covered_until(self, cache: QueueCache, offset: int) -> int:
        """How far from `offset` on the queue is cached or being fetched without a gap."""
        spans = sorted([(b.first, b.end) for b in cache.blocks] + [(f, e) for f, (e, _) in cache.in_flight.items()])
        for first, end in spans:
            if first <= offset < end:
                offset = end
        return offset

    @staticmethod
    def _next_start(cache: QueueCache, offset: int) -> int:
        """The first offset after `offset` already cached or in flight (a fetch stops there)."""
        starts = [b.first for b in cache.blocks] + list(cache.in_flight)
        return min((first for first in starts if first > offset), default=2**63)

    @staticmethod
    def _register(cache: QueueCache, first: int, end: int) -> Future:
        future: Future = Future()
        cache.in_flight[first] = (end, future)
        return future

    def _start_fetch(self, key: QueueKey, cache: QueueCache, tiered: TieredQueue, first: int, end: int) -> None:
        self._pool.submit(self._fill, key, cache, tiered, first, end, self._register(cache, first, end))

    def _fill(
        self, key: QueueKey, cache: QueueCache, tiered: TieredQueue, first: int, end: int, future: Future
    ) -> None:
        """Fetch [first, end) into the cache and complete `future` with the block (or the error)."""
        try:
            block = fetch_block(tiered, first, end)
        except BaseException as error:
            with self._lock:
                cache.in_flight.pop(first, None)
            future.set_exception(error)
            return
        with self._lock:
            cache.in_flight.pop(first, None)
            self._insert(key, cache, block)
        future.set_result(block)

    def _insert(self, key: QueueKey, cache: QueueCache, block: Block) -> None:
        now = self.clock()
        block.expires_at, block.last_used = now + self.ttl_s, now
        if any(b.first < block.end and block.first < b.end for b in cache.blocks):
            return  # raced with another fetch of an overlapping range: keep what is there
        cache.blocks.append(block)
        cache.blocks.sort(key=lambda b: b.first)
        self._bytes += block.nbytes
        self._expire(key, cache, now)
        while self._bytes > self.max_bytes and self._evict_one(now):
            pass

    def _needed(self, cache: QueueCache, block: Block, now: float) -> bool:
        """Whether a live stream is expected to read `block` before it expires."""
        for stream in cache.streams:
            if now - stream.last_seen > self.ttl_s or stream.position >= block.end:
                continue  # gone quiet, or already past it
            if stream.rate is None or stream.rate <= 0 or stream.position >= block.first:
                return True  # reading it now, or its pace is not known yet
            if now + (block.first - stream.position) / stream.rate <= block.expires_at:
                return True
        return False

    def _expire(self, key: QueueKey, cache: QueueCache, now: float) -> None:
        for block in list(cache.blocks):
            if now >= block.expires_at or not self._needed(cache, block, now):
                if now < block.expires_at:
                    self.stats["expired_early"] += 1
                self._drop(cache, block)
        cache.streams[:] = [s for s in cache.streams if now - s.last_seen <= self.ttl_s]
        if not cache.blocks and not cache.in_flight and not cache.streams:
            self._queues.pop(key, None)

    def _evict_one(self, now: float) -> bool:
        """Drop one block, preferring those no stream needs, then the least recently used."""
        candidates = [(cache, block) for cache in self._queues.values() for block in cache.blocks]
        if not candidates:
            return False
        cache, block = min(candidates, key=lambda cb: (self._needed(cb[0], cb[1], now), cb[1].last_used))
        if block.reads == 0:  # fetched for nothing: back off the windows of that queue
            self.stats["evicted_unread"] += 1
            for stream in cache.streams:
                self._back_off(stream)
        self._drop(cache, block)
        return True

    def _drop(self, cache: QueueCache, block: Block) -> None:
        cache.blocks.remove(block)
        self._bytes -= block.nbytes

    def forget(self, topic: str, queue: int | None = None) -> None:
        """Drop everything cached for a topic (deleted, or its tier segments expired), or one of its queues."""
        with self._lock:
            for key in [k for k in self._queues if k[0] == topic and queue in (None, k[1])]:
                for block in list(self._queues[key].blocks):
                    self._drop(self._queues[key], block)
                del self._queues[key]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class ColdSelection(NamedTuple):
    """One cold read through the read-ahead cache: the records `selection` chose, all in `block`."""

    block: Block
    selection: Selection

    def records(self) -> bytes:
        return b"".join(self.block.records(position, length) for _, position, length in self.selection.runs)


def read_cold(
    cache: ReadAheadCache,
    tiered: TieredQueue,
    offset: int,
    max_messages: int,
    max_bytes: int,
    message_filter: MessageFilter | None,
) -> ColdSelection:
    """One read of a queue's tier files through the read-ahead cache, as the embedded engine's and the serverless
    backend's cold reads both make it."""
    end = tiered.max_offset
    scan = scan_size(max_messages, message_filter)
    if offset < tiered.key_compacted_end:  # removed offsets are passed over: look as far as a filtered read does
        scan = max(scan, SCAN_LIMIT)
    scan_end = min(end, offset + scan)
    block = cache.read(tiered, offset, scan_end - offset, end)
    entries = block.entries[offset - block.first : scan_end - block.first]
    selection = select_runs(entries, offset, max_messages, max_bytes, message_filter)
    cache.advance(tiered, offset, selection.next_offset, end)
    return ColdSelection(block, selection)
