"""The read-ahead cache (tiered/cache.py) against a fake tier queue: windows, sharing, coalescing, expiry, bounds."""

from __future__ import annotations

import threading
import time

import pytest

from tidemq_store.cq_entry import CqEntries, pack_entry
from tidemq_store.tiered.cache import ReadAheadCache
from tidemq_store.tiered.container import TierRun

SIZE = 10  # bytes per fake record


class FakeQueue:
    """A tier queue of `length` records of SIZE bytes; counts the fetches; can be held or made to fail."""

    topic, queue = "t", 0
    key_compacted_end = 0

    def __init__(self, length: int = 100_000, segment: int = 10**9) -> None:
        self.length, self.segment = length, segment
        self.fetched: list[tuple[int, int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()
        self.failing: set[int] = set()  # fetches starting here fail, once

    def entries(self, start: int, end: int) -> CqEntries:
        self.waiting.set()
        self.gate.wait(5)
        if start in self.failing:
            self.failing.discard(start)
            raise OSError("S3 said no")
        self.fetched.append((start, end))
        return CqEntries(b"".join(pack_entry(i * SIZE, SIZE, 0, 1_000 + i) for i in range(start, end)))

    def read(self, position: int, length: int) -> bytes:
        return b"".join(f"{i:09d}|".encode() for i in range(position // SIZE, (position + length) // SIZE))

    def run(self, first: int, end: int) -> TierRun:
        entries = self.entries(first, end)
        start = entries[0].position
        return TierRun(first, entries, self.read(start, entries[len(entries) - 1].end - start))

    def segment_end_offset(self, offset: int) -> int:
        return (offset // self.segment + 1) * self.segment


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make_cache():
    caches = []

    def make(**options) -> ReadAheadCache:
        options = {"max_bytes": 1 << 30, "ttl_s": 30.0, "min_window": 10, "max_window": 80, "max_block": 20} | options
        cache = ReadAheadCache(options.pop("max_bytes"), options.pop("ttl_s"), **options)
        caches.append(cache)
        return cache

    yield make
    for cache in caches:
        cache.close()


def settle(cache: ReadAheadCache) -> None:
    """Wait for every background fetch to finish."""
    for queue in list(cache._queues.values()):
        for _, future in list(queue.in_flight.values()):
            future.exception(5)


def consume(cache: ReadAheadCache, tier: FakeQueue, offset: int, count: int, clock: Clock | None = None) -> int:
    """One read as the access layer does it: read, then advance past what was taken."""
    block = cache.read(tier, offset, count, tier.length)
    taken = min(count, block.end - offset)
    cache.advance(tier, offset, offset + taken, tier.length)
    settle(cache)
    return offset + taken


def stream_of(cache: ReadAheadCache, position: int):
    return next(s for q in cache._queues.values() for s in q.streams if s.position == position)


def test_a_first_read_fetches_what_it_asks_for_and_the_window_after_it_in_the_background(make_cache):
    cache, tier = make_cache(), FakeQueue()
    block = cache.read(tier, 100, 10, tier.length)
    assert (block.first, block.end) == (100, 110)
    assert block.records(105 * SIZE, 2 * SIZE) == b"000000105|000000106|"
    settle(cache)
    assert sorted(tier.fetched) == [(100, 110), (110, 120)]  # and the window (10) after it
    assert cache.stats["misses"] == 1


def test_sequential_reads_open_the_window_by_slow_start_then_additive_increase(make_cache):
    cache, tier = make_cache(max_window=1000, max_block=1000), FakeQueue()
    offset = consume(cache, tier, 0, 10)
    windows = []
    for _ in range(6):
        offset = consume(cache, tier, offset, 10)
        windows.append(stream_of(cache, offset).window)
    assert windows == [20, 40, 80, 160, 320, 640]  # doubling while below the threshold
    stream_of(cache, offset).threshold = 640
    offset = consume(cache, tier, offset, 10)
    assert stream_of(cache, offset).window == 650  # then + min_window per read
    assert cache.stats["hits"] >= 6


def test_a_stream_whose_read_ahead_was_dropped_backs_off(make_cache):
    cache, tier = make_cache(max_window=1000, max_block=1000), FakeQueue()
    offset = 0
    for _ in range(5):
        offset = consume(cache, tier, offset, 10)
    stream = stream_of(cache, offset)
    assert stream.window == 160
    queue = cache._queues[("t", 0)]
    for block in list(queue.blocks):  # what was fetched ahead is gone (as eviction would do)
        cache._drop(queue, block)
    consume(cache, tier, offset, 10)
    assert (stream.threshold, stream.window) == (80, 10)  # threshold half the window, window from the start
    assert cache.stats["misses"] == 2


def test_two_readers_of_the_same_missing_range_cause_one_fetch(make_cache):
    cache, tier = make_cache(), FakeQueue()
    tier.gate.clear()
    first = threading.Thread(target=cache.read, args=(tier, 0, 10, tier.length))
    first.start()
    assert tier.waiting.wait(5)
    results = []
    second = threading.Thread(target=lambda: results.append(cache.read(tier, 5, 5, tier.length)))
    second.start()
    deadline = time.monotonic() + 5  # hold the fetch until the second reader is in (a busy machine may start it
    while not cache.stats["waits"] and time.monotonic() < deadline:  # late: it would find the block, not wait)
        time.sleep(0.001)
    tier.gate.set()
    first.join(5)
    second.join(5)
    settle(cache)
    assert results[0].first == 0 and results[0].end == 10  # the second reader got the first one's block
    assert tier.fetched.count((0, 10)) == 1 and (5, 10) not in tier.fetched
    assert cache.stats["waits"] == 1


def test_groups_reading_the_same_queue_share_its_blocks(make_cache):
    cache, tier = make_cache(), FakeQueue()
    offset = 0
    for _ in range(3):
        offset = consume(cache, tier, offset, 10)
    fetched = len(tier.fetched)
    consume(cache, tier, 20, 10)  # a second group, behind the first
    assert cache.stats["hits"] >= 3
    assert all(start >= 30 for start, _ in tier.fetched[fetched:])  # only read-ahead for it, nothing it read


def test_blocks_no_reader_will_reach_before_they_expire_are_dropped_early(make_cache):
    clock = Clock()
    cache, tier = make_cache(ttl_s=10.0, max_window=400, max_block=40, clock=clock), FakeQueue()
    offset = 0
    for _ in range(6):  # 10 messages a second: in 10 s the reader gets 100 messages further
        clock.now += 1.0
        offset = consume(cache, tier, offset, 10, clock)
    queue = cache._queues[("t", 0)]
    assert stream_of(cache, offset).rate == pytest.approx(10.0)
    assert cache.stats["expired_early"] > 0
    starts = [block.first for block in queue.blocks]
    assert starts and all(first - offset <= 100 for first in starts), (offset, starts)  # none out of reach
    assert all(block.end > offset for block in queue.blocks)  # and none behind the reader


def test_the_cache_stays_within_its_bytes_and_evicting_unread_blocks_backs_off(make_cache):
    cache, tier = make_cache(max_bytes=600, max_window=1000, max_block=20), FakeQueue()
    offset = 0
    for _ in range(8):
        offset = consume(cache, tier, offset, 10)
        assert cache.cached_bytes <= 600
    assert cache.stats["evicted_unread"] > 0
    assert stream_of(cache, offset).window < 1000


def test_without_bytes_there_is_no_read_ahead(make_cache):
    cache, tier = make_cache(max_bytes=0), FakeQueue()
    block = cache.read(tier, 7, 5, tier.length)
    cache.advance(tier, 7, 12, tier.length)
    assert (block.first, block.end) == (7, 12) and tier.fetched == [(7, 12)]
    assert cache.cached_bytes == 0 and not cache._queues


def test_a_failed_fetch_reaches_the_reader_and_the_next_read_tries_again(make_cache):
    cache, tier = make_cache(), FakeQueue()
    tier.failing.add(0)
    with pytest.raises(OSError, match="S3 said no"):
        cache.read(tier, 0, 10, tier.length)
    settle(cache)
    block = cache.read(tier, 0, 10, tier.length)
    assert (block.first, block.end) == (0, 10)


def test_blocks_never_straddle_a_tier_segment(make_cache):
    cache, tier = make_cache(max_window=1000, max_block=1000), FakeQueue(segment=25)
    offset = 0
    for _ in range(6):
        offset = consume(cache, tier, offset, 10)
    assert all(start // 25 == (end - 1) // 25 for start, end in tier.fetched), tier.fetched


def test_forgetting_a_topic_drops_its_blocks(make_cache):
    cache, tier = make_cache(), FakeQueue()
    consume(cache, tier, 0, 10)
    assert cache.cached_bytes > 0
    cache.forget("t")
    assert cache.cached_bytes == 0 and not cache._queues
