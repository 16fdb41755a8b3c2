"""The serverless backend's cold tier: each queue's tier files (tiered/container.py) on S3 (or a POSIX
directory), with the same layout and record bytes as the embedded engine's tier.

Only the maintenance run writes them (maintenance.py, one uploader per queue at a time under a lease);
every other process holds read-only views, listed on first use and listed again when the queue's hot
boundary shows that an upload went further than the view. Reads go through the read-ahead cache
(tiered/cache.py) exactly as the embedded engine's cold reads do; lookups by id and key through the tier's
index (tiered/lookup.py), as the embedded engine's do, a lookup by id in the one queue its record is of (named
by the record while its segment file is there, by the tier's id directory once maintenance deleted the file).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from tidemq_protocol.errors import OffsetOutOfRange
from tidemq_protocol.filter import MessageFilter
from tidemq_protocol.message import StoredMessage

from ..config import StoreConfig
from ..tiered import open_driver
from ..tiered.cache import ColdSelection, ReadAheadCache, read_cold
from ..tiered.container import TieredQueue
from ..tiered.directory import write_directory
from ..tiered.lookup import ColdLookup, QueuePlace
from .segments import physical_offset

VIEW_TTL_S = 5.0
"""How long a view stands before it is listed again, whatever it holds: how soon a compaction is seen."""


class TierRange(NamedTuple):
    """The offsets [min_offset, max_offset) a queue's tier files hold (None, None: none)."""

    min_offset: int | None
    max_offset: int | None


class ColdTier:
    """Each queue's tier files, for the processes of the serverless backend (see the module docstring)."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.driver = open_driver(config)
        self.medium = self.driver.describe()
        self.cache = ReadAheadCache(config.tier_cache_bytes, config.tier_cache_ttl_s)
        self.lookup = ColdLookup(self.driver)
        self._views: dict[tuple[str, int], tuple[TieredQueue, float]] = {}  # view, when listed
        self._lock = threading.Lock()

    def view(self, topic: str, queue: int, holds_until: int | None = None) -> TieredQueue:
        """This process's read-only view of the queue's tier files, listed again if it ends before
        `holds_until` (None: list again now) or is `VIEW_TTL_S` old (a compaction switched the queue, say: what
        was cached from the generation before is dropped then)."""
        key = (topic, queue)
        now = time.monotonic()
        with self._lock:
            view, listed_at = self._views.get(key, (None, 0.0))
        if view is None or holds_until is None or (view.max_offset or 0) < holds_until or now - listed_at > VIEW_TTL_S:
            old, view = view, TieredQueue(self.driver, topic, queue, self.config.tier_segment_bytes, writer=False)
            if old is not None and old.generation != view.generation:
                self.cache.forget(topic, queue)
            with self._lock:
                self._views[key] = (view, now)
        return view

    def writer(self, topic: str, queue: int) -> TieredQueue:
        """The queue's tier files for uploading (recovered from an unfinished upload first)."""
        return TieredQueue(self.driver, topic, queue, self.config.tier_segment_bytes)

    def read(
        self,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int,
        max_bytes: int,
        message_filter: MessageFilter | None,
        hot_offset: int,
        max_offset: int,
    ) -> ColdSelection:
        """The records a read from `offset` chooses, `offset` being below the queue's hot boundary."""
        view = self.view(topic, queue, hot_offset)
        low = view.min_offset
        if low is None or not low <= offset < view.max_offset:
            raise OffsetOutOfRange(topic, queue, offset, hot_offset if low is None else low, max_offset)
        return read_cold(self.cache, view, offset, max_messages, max_bytes, message_filter)

    def min_offset(self, topic: str, queue: int, hot_offset: int) -> int:
        """The oldest offset the tier holds (the hot boundary when it holds none)."""
        low = self.view(topic, queue, hot_offset).min_offset
        return hot_offset if low is None else min(low, hot_offset)

    def range(self, topic: str, queue: int) -> TierRange:
        view = self.view(topic, queue)
        return TierRange(view.min_offset, view.max_offset)

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int, hot_offset: int) -> int | None:
        """The first offset below the hot boundary stored at or after the time (None: none is)."""
        view = self.view(topic, queue, hot_offset)
        low, high = view.min_offset, min(view.max_offset or 0, hot_offset)
        if low is None or low >= high:
            return None
        found = view.first_offset_stored_at(timestamp_ms, low, high)
        return None if found == high else found

    def message_by_id(self, msg_id: str, places: list[QueuePlace] | None = None) -> StoredMessage | None:
        """The message with this id (None: the tier has none) in the queue of `places` (its record's header named
        it: its file is still there) or else the one the tier's id directory lists for the place the id names
        (tiered/directory.py); views younger than `VIEW_TTL_S` are searched as they are."""
        if places is None:
            places = self.lookup.queues_at(msg_id)
        return self.lookup.by_id(((self.view(topic, queue, 0), None) for topic, queue in places), msg_id)

    def list_ids(self, file: str, size: int, read: Callable[[int, int], bytes]) -> None:
        """Write the id directory object of segment file `file` (`size` bytes, read with `read(position, length)`),
        which maintenance is about to delete."""
        first = physical_offset(file, 0)
        write_directory(self.driver, first, first + size, lambda at, length: read(at - first, length))

    def messages_by_key(self, topic: str, hot_offsets: dict[int, int], key: str, limit: int) -> list[StoredMessage]:
        """The newest `limit` messages carrying `key` of each queue of `hot_offsets` (queue: its hot boundary)."""
        queues = ((self.view(topic, queue, hot), hot) for queue, hot in hot_offsets.items())
        return self.lookup.by_key(queues, key, limit)

    def forget(self, topic: str) -> None:
        """Delete a topic's tier files (topic deletion)."""
        with self._lock:
            for key in [key for key in self._views if key[0] == topic]:
                del self._views[key]
        self.cache.forget(topic)
        self.driver.delete_topic(topic)

    def close(self) -> None:
        self.cache.close()
