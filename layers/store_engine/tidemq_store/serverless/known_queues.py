"""`KnownQueues`: what this process read of each queue's item and `batches` items (queue_index.py) lately, so that
reads of messages it knows are there cost no DynamoDB request (a pop's receive read its queue item and queried
its batches each time: two requests of the five a receive and its ack cost).

It serves a read only when the read lies wholly below the `next_offset` of an item read within QUEUE_CACHE_S,
and the batches it knows tile the read's offsets. That is safe because below `next_offset` nothing changes: a
sequenced batch keeps its offsets, file, position and length for good (queue_index.py), so a read served here
returns what a fresh one would, and never misses a newer message (a read that reaches the end it knew reads the
item afresh). What can move meanwhile is the queue's low end: retention (`min_offset`) and the hot boundary
(`hot_offset`). Within QUEUE_CACHE_S of another process moving them a read may still return a message that
retention passed (as a deleted topic stays readable for that long), and a segment file deleted meanwhile fails
its read (OSError), on which the store forgets the queue and reads afresh. This process's own maintenance
forgets each queue it moves (`QueueIndex.drop_below`), and its own deletion of a topic each of its queues
(`QueueIndex.drop`); a topic another process deleted, and made again under its name, may be read as the old one
for up to QUEUE_CACHE_S (while its segment files last), as its config is served from the cache that long.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .queue_index import BatchRef, QueueState

QUEUE_CACHE_S = 5.0
"""How long a queue's item, once read, serves reads below its end (as long as a topic's config: metadata.py)."""
MOST_QUEUES = 1024
"""Queues known at once (the least recently used is forgotten)."""
MOST_BATCHES = 4096
"""Batches known of one queue: past it, those known before its item was last read are forgotten."""


class KnownQueue:
    """One queue as read at `read_at` (monotonic seconds): its item's state, and the batches seen since, by offset."""

    def __init__(self, state: QueueState) -> None:
        self.read_at, self.state = time.monotonic(), state
        self.starts: list[int] = []
        self.batches: dict[int, BatchRef] = {}
        self.learn(state.pending)

    def learn(self, refs: list[BatchRef]) -> None:
        for ref in refs:
            if ref.first_offset not in self.batches:
                bisect.insort(self.starts, ref.first_offset)
                self.batches[ref.first_offset] = ref

    def tiling(self, start: int, end: int) -> list[BatchRef] | None:
        """The known batches holding offsets [start, end) in order, or None if some offset there is in none."""
        at = bisect.bisect_right(self.starts, start) - 1
        refs: list[BatchRef] = []
        offset = start
        while offset < end:
            if at < 0 or at >= len(self.starts):
                return None
            ref = self.batches[self.starts[at]]
            if not ref.first_offset <= offset < ref.end_offset:
                return None
            refs.append(ref)
            offset, at = ref.end_offset, at + 1
        return refs


class KnownQueues:
    """The queues this process read lately (see the module docstring); safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: OrderedDict[tuple[str, int], KnownQueue] = OrderedDict()

    def get(self, topic: str, queue: int, through: int) -> KnownQueue | None:
        """The queue as read within QUEUE_CACHE_S, if offsets up to `through` were all there then."""
        with self._lock:
            known = self._queues.get((topic, queue))
            if known is None or time.monotonic() - known.read_at > QUEUE_CACHE_S:
                return None
            if through > known.state.next_offset:
                return None
            self._queues.move_to_end((topic, queue))
            return known

    def read(self, topic: str, queue: int, state: QueueState) -> KnownQueue:
        """Keep `state`, just read (and the batches known of the queue before, which stay where they are)."""
        fresh = KnownQueue(state)
        with self._lock:
            before = self._queues.pop((topic, queue), None)
            if before is not None and len(before.batches) < MOST_BATCHES:
                low = max(state.min_offset, state.hot_offset)  # below: read elsewhere, or gone
                fresh.learn([ref for ref in before.batches.values() if ref.first_offset >= low])
            self._queues[(topic, queue)] = fresh
            while len(self._queues) > MOST_QUEUES:
                self._queues.popitem(last=False)
        return fresh

    def tiling(self, known: KnownQueue, start: int, end: int) -> list[BatchRef] | None:
        with self._lock:
            return known.tiling(start, end)

    def learn(self, known: KnownQueue, refs: list[BatchRef]) -> None:
        with self._lock:
            known.learn(refs)

    def forget(self, topic: str, queue: int) -> None:
        with self._lock:
            self._queues.pop((topic, queue), None)
