"""The dispatcher: every queue's new messages uploaded to the tier in quasi-real time.

The hot store calls `dispatch` after each acknowledged put with references to the new records
(`hot.StoredBatch`: queues, offsets, sizes; never the bodies), and it only counts them: the put path does
no I/O for the tier. A queue's waiting messages are uploaded once they reach `tier_upload_messages`, or
`tier_upload_bytes`, or are `tier_upload_age_ms` old (1 s by default), by a small pool of uploader
threads, each upload reading the records back from the hot commit log (page cache, usually).

Per queue, two offsets are persisted in the tier's own metadata (progress.py): the *dispatch offset*,
up to which messages were handed to an upload, and the *commit offset*, up to which the tier holds
them. The tier itself has the last word: after a crash the queue's tier ConsumeQueue says where the
upload really got to (container.py), so an upload that finished just before the crash is not repeated
and one that did not finish is redone: every message lands in the tier exactly once.

S3 errors are retried with backoff for as long as it takes (botocore retries each call first, see
s3.py); the uploader never skips a message. Every background loop (the dispatcher, the upload
threads) logs an unexpected error with the queue it concerns and carries on: the queue is tried again.
A queue whose oldest waiting messages expired from the hot tier before they could be uploaded (topic
retention shorter than an S3 outage) restarts its tier files at the hot minimum: what it skips had
expired anyway, and so has everything older in the tier.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tidemq_protocol import clock
from tidemq_protocol.errors import OffsetOutOfRange, TopicNotFound

from ..config import StoreConfig
from ..errors import StoreClosed
from ..hot import HotStore, StoredBatch
from ..threads import background_thread
from .container import TieredQueue
from .progress import ProgressStore, UploadProgress
from .segment import TierDriver

log = logging.getLogger("tidemq.tier")
QueueKey = tuple[str, int]
MAX_BACKOFF_S = 5.0


@dataclass(slots=True)
class Waiting:
    """Messages of one queue dispatched and not yet uploaded."""

    since: float  # monotonic time of the oldest
    count: int = 0
    nbytes: int = 0


@dataclass(slots=True, frozen=True)
class UploadLag:
    messages: int
    seconds: float


class TieredDispatcher:
    """Uploads every queue of `hot` to the tier on `driver`, keeping its progress in `progress`."""

    def __init__(
        self, hot: HotStore, driver: TierDriver, progress: ProgressStore, config: StoreConfig, upload_threads: int = 4
    ) -> None:
        self.hot, self.driver, self.progress, self.config = hot, driver, progress, config
        self._queues: dict[QueueKey, TieredQueue] = {}
        self._waiting: dict[QueueKey, Waiting] = {}
        self._busy: set[QueueKey] = set()
        self._queue_locks: dict[QueueKey, threading.RLock] = {}  # uploads, deletes, first open
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.upload_lags_ms: deque[int] = deque(maxlen=100_000)
        """Store-to-tier latency of recently uploaded messages (ms), for benchmarks and metrics."""
        self.uploaded_messages = 0
        self._pool = ThreadPoolExecutor(upload_threads, thread_name_prefix="tier-upload")
        if progress.created:
            self._rebuild_progress()
        self._resume()
        self._thread = background_thread(self._run, "tier-dispatcher")
        self._thread.start()

    # ---- the tier's queues ----

    def tiered_queue(self, topic: str, queue: int) -> TieredQueue:
        """The queue's files in the tier (listed and recovered on first use)."""
        key = (topic, queue)
        with self._lock:
            tiered = self._queues.get(key)
            lock = self._queue_locks.setdefault(key, threading.RLock())
        if tiered is None:
            with lock:
                tiered = self._queues.get(key) or TieredQueue(self.driver, topic, queue, self.config.tier_segment_bytes)
                with self._lock:
                    self._queues[key] = tiered
        return tiered

    def has_tier_data(self, topic: str, queue: int) -> bool:
        """Whether the queue ever uploaded (cheap: the tier's progress, not the medium)."""
        return self.progress.get(topic, queue) is not None

    def queue_lock(self, topic: str, queue: int) -> threading.RLock:
        with self._lock:
            return self._queue_locks.setdefault((topic, queue), threading.RLock())

    # ---- dispatch (the put path) ----

    def dispatch(self, stored: StoredBatch) -> None:
        """Count the records of an acknowledged put; wake the uploader when a queue has enough."""
        now = time.monotonic()
        limits, topic = self.config, stored.topic
        with self._lock:
            for queue, size in zip(stored.queues, stored.sizes, strict=True):
                waiting = self._waiting.get((topic, queue))
                if waiting is None:
                    waiting = self._waiting[(topic, queue)] = Waiting(now)
                waiting.count += 1
                waiting.nbytes += size
                if waiting.count >= limits.tier_upload_messages or waiting.nbytes >= limits.tier_upload_bytes:
                    self._wake.set()

    def _resume(self) -> None:
        """After a restart: every queue whose hot messages are not all in the tier is due now."""
        for topic, queue, max_offset in self.hot.queues():
            progress = self.progress.get(topic, queue)
            committed = progress.commit_offset if progress else 0
            if committed < max_offset:
                self._waiting[(topic, queue)] = Waiting(0.0, max_offset - committed)

    def _rebuild_progress(self) -> None:
        """The progress database is new: learn each queue's progress from the medium (one listing per queue;
        see progress.py)."""
        rebuilt = 0
        for topic, queue, _ in self.hot.queues():
            uploaded = self.tiered_queue(topic, queue).max_offset
            if uploaded is not None:
                self.progress.set(topic, queue, UploadProgress(uploaded, uploaded))
                rebuilt += 1
        if rebuilt:
            log.info("tier upload progress rebuilt from %s for %d queues", self.driver.describe(), rebuilt)

    # ---- upload ----

    def _run(self) -> None:
        """The dispatcher thread: hand each due queue to an upload thread, until closed."""
        age_s = self.config.tier_upload_age_ms / 1000
        while not self._stop.is_set():
            self._wake.wait(min(0.1, age_s / 4))
            self._wake.clear()
            try:
                self._start_due(age_s)
            except Exception:
                if self._stop.is_set():
                    return  # the pool shut down under us
                log.exception("the tier dispatcher failed to start uploads; it tries again")
                self._stop.wait(1.0)

    def _start_due(self, age_s: float) -> None:
        now = time.monotonic()
        limits = self.config
        with self._lock:
            due = [
                key
                for key, w in self._waiting.items()
                if key not in self._busy
                and (
                    now - w.since >= age_s
                    or w.count >= limits.tier_upload_messages
                    or w.nbytes >= limits.tier_upload_bytes
                )
            ]
            for key in due:
                del self._waiting[key]
                self._busy.add(key)
        for key in due:
            self._pool.submit(self._upload_due, key)

    def _upload_due(self, key: QueueKey) -> None:
        try:
            self.upload(*key)
        except (TopicNotFound, StoreClosed):
            pass
        except Exception:  # the queue stays due: it is tried again after a pause
            log.exception("tier upload of %s:%s failed; retrying", *key)
            time.sleep(1.0)
            with self._lock:
                self._waiting.setdefault(key, Waiting(0.0))
        finally:
            with self._lock:
                self._busy.discard(key)

    def upload(self, topic: str, queue: int, *, everything: bool = False) -> int:
        """Upload the queue's acknowledged messages not yet in the tier, in uploads of at most the upload
        limits; return how many. Stops after an upload below the limits (what arrived meanwhile waits for
        its own trigger, so uploads stay large) unless `everything`."""
        total = 0
        with self.queue_lock(topic, queue):
            while not self._stop.is_set():
                uploaded, full = self._upload_chunk(topic, queue)
                total += uploaded
                if not uploaded or not (full or everything):
                    return total
        return total

    def _upload_chunk(self, topic: str, queue: int) -> tuple[int, bool]:
        """Upload the next messages of the queue: (how many, whether the upload limits stopped it)."""
        hot = self.hot
        tiered = self.tiered_queue(topic, queue)
        hot.get_topic(topic)  # TopicNotFound once deleted
        hot_min = hot.min_offset(topic, queue)
        start = tiered.max_offset
        if start is None:
            progress = self.progress.get(topic, queue)
            start = max(progress.commit_offset if progress else hot_min, hot_min)
        elif start < hot_min:
            log.warning(
                "tier %s:%s: offsets %s..%s expired before upload; restarting at %s",
                topic,
                queue,
                start,
                hot_min,
                hot_min,
            )
            tiered = self._restart(topic, queue)
            start = hot_min
        most = min(self.config.tier_upload_messages, self.config.max_get_messages)
        try:
            batch = hot.read_records(topic, queue, start, most, self.config.tier_upload_bytes)
        except OffsetOutOfRange:
            return (0, False) if start >= hot.max_offset(topic, queue) else self._upload_chunk(topic, queue)
        if not batch.count:
            return 0, False
        end = start + batch.count
        entries = hot.entries(topic, queue, start, end)
        self.progress.set(topic, queue, UploadProgress(end, start))
        tiered.append(start, batch.records, entries)
        self._commit(tiered)
        self.progress.set(topic, queue, UploadProgress(end, end))
        now = clock.now_ms()
        self.upload_lags_ms.extend(now - entry.store_timestamp for entry in entries)
        self.uploaded_messages += batch.count
        cut_by_bytes = len(batch.records) * 2 > self.config.tier_upload_bytes and batch.next_offset < batch.max_offset
        full = batch.count == most or cut_by_bytes
        return batch.count, full

    def _commit(self, tiered: TieredQueue) -> None:
        """Commit the queue's upload, retrying with backoff until it succeeds or the store closes."""
        backoff = 0.05
        while True:
            try:
                tiered.commit()
                return
            except Exception as error:
                if self._stop.is_set():
                    raise StoreClosed("closing with an upload unfinished; it resumes on restart") from error
                log.warning(
                    "tier upload of %s:%s failed (%s); retrying in %.2f s", tiered.topic, tiered.queue, error, backoff
                )
                self._stop.wait(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)

    def _restart(self, topic: str, queue: int) -> TieredQueue:
        self.tiered_queue(topic, queue).clear()
        fresh = TieredQueue(self.driver, topic, queue, self.config.tier_segment_bytes)
        with self._lock:
            self._queues[(topic, queue)] = fresh
        return fresh

    def upload_now(self, topic: str | None = None) -> int:
        """Upload every waiting message (of `topic`, or of all topics) now; return how many went."""
        with self._lock:
            keys = [key for key in self._waiting if topic is None or key[0] == topic]
        if topic is not None:
            keys += [(topic, q) for q in range(self.hot.get_topic(topic).queues) if (topic, q) not in keys]
        total = 0
        for key in keys:
            total += self.upload(*key, everything=True)
            with self._lock:
                self._waiting.pop(key, None)
        return total

    # ---- status ----

    def lag(self, topic: str, queue: int) -> UploadLag:
        """How many acknowledged messages of the queue the tier lacks, and how old the oldest is."""
        committed = self._committed(topic, queue)
        max_offset = self.hot.readable_max_offset(topic, queue)
        if committed >= max_offset:
            return UploadLag(0, 0.0)
        oldest = max(committed, self.hot.min_offset(topic, queue))
        waiting = self.hot.entries(topic, queue, oldest, oldest + 1)
        age_ms = clock.now_ms() - waiting[0].store_timestamp if waiting else 0
        return UploadLag(max_offset - committed, max(0.0, age_ms / 1000))

    def _committed(self, topic: str, queue: int) -> int:
        progress = self.progress.get(topic, queue)
        return progress.commit_offset if progress else self.hot.min_offset(topic, queue)

    def uploaded_before(self) -> int:
        """The hot commit-log position below which every record is in the tier (or expired): what hot release
        may remove (`hot.ReleasePolicy`)."""
        lowest = self.hot.written_position
        for topic, queue, max_offset in self.hot.queues():
            committed = max(self._committed(topic, queue), self.hot.min_offset(topic, queue))
            if committed < max_offset:
                waiting = self.hot.entries(topic, queue, committed, committed + 1)
                if waiting:
                    lowest = min(lowest, waiting[0].position)
        return lowest

    # ---- topics and lifecycle ----

    def forget(self, topic: str) -> None:
        """Drop a deleted topic: its waiting counts, its tier files and its progress."""
        with self._lock:
            for key in [k for k in self._waiting if k[0] == topic]:
                del self._waiting[key]
            for key in [k for k in self._queues if k[0] == topic]:
                del self._queues[key]
        self.driver.delete_topic(topic)
        self.progress.drop_topic(topic)

    def known_queues(self) -> list[TieredQueue]:
        with self._lock:
            return list(self._queues.values())

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
