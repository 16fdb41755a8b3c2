"""What the embedded store's jobs share: the files, indexes and locks `EmbeddedMessageStore` opens (store.py), named
once for the modules that each do one job over them (admin.py, retention.py, recovery.py, replication.py).
"""

from __future__ import annotations

import threading

from ..config import StoreConfig
from ..errors import StoreClosed
from ..hot import PutListener, ReleasePolicy, SegmentArchive, StoredBatch
from .commitlog import CommitLog
from .consumequeue import Checkpoint, ConsumeQueueStore
from .metadata import MetadataStore


class StoreParts:
    """The state `EmbeddedMessageStore.__init__` sets up, which each of its jobs reads and changes."""

    config: StoreConfig
    commitlog: CommitLog
    cq: ConsumeQueueStore
    meta: MetadataStore
    _checkpoint: Checkpoint
    _write_lock: threading.Lock
    """One writer at a time: puts, metadata changes and a slave's replica chunks."""
    _clean_lock: threading.Lock
    """One clean-up at a time: retention and a forcible release."""
    _next_offsets: dict[tuple[str, int], int]
    """The writer's cache of each queue's max offset (only the writer fills it)."""
    _last_store_timestamp: int
    _arrivals: threading.Condition
    """Notified after every acknowledged put (long polling)."""
    _closed: bool
    _put_listeners: list[PutListener]
    _release_policy: ReleasePolicy | None
    _segment_archive: SegmentArchive | None
    _stop: threading.Event
    """Set when the store closes: the background round stops."""

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def _acknowledge(self, end: int, stored: list[StoredBatch]) -> None:
        """What follows a write to the log, outside the write lock (a put, a slave's replica chunk): wait until the
        log is durable up to `end` (SYNC), wake the long polls, and tell the put listeners of each batch."""
        if self.commitlog.sync:
            self.commitlog.wait_durable(end)
        with self._arrivals:
            self._arrivals.notify_all()
        for batch in stored:
            for listener in self._put_listeners:
                listener(batch)
