"""The serverless backend's maintenance run: what the scheduled function (functions/maintenance) does in AWS
(every minute, an EventBridge schedule) and a timer does inside `make run`.

1. Upload. The queues holding messages not yet in the cold tier are exactly those whose item carries
   `dirty` (every sequencing sets it), and the sparse index `dirty` lists only those. For each, under a
   lease on its queue item (leases.py: one maintenance run per queue at a time, however runs overlap):
   - index its pending entries (queue_index.py, step 3), so every batch on the shared directory is
     findable through a `batches` item, and so through the `by_file` index;
   - append [tier end, next_offset) to the queue's tier files (tiered/container.py) in uploads of at most
     `tier_upload_bytes`, the records given their real offsets first, so the tier holds them byte for
     byte as readers get them; the tier's ConsumeQueue says how far uploads got, as for the embedded engine;
   - move the hot boundary (`hot_offset`) over what is uploaded and older than `efs_hot_ms`, clear
     `dirty` if nothing arrived meanwhile, release the lease: one conditional UpdateItem;
   - delete the `batches` items below the new boundary (readers go to the tier there).
2. Deleting files. A segment file nobody has written for `efs_segment_grace_s` whose name neither `by_file`
   index (the batches', the pending timers') shows is deleted: what it held is in the tier, expired, was never
   sequenced (a writer that died between its append and its sequencing) or was a timer since moved or recalled.
   Skipped when an upload failed (its queue may still point into files), and for files whose entries this run
   itself indexed (the index is eventually consistent). With a cold tier, the file's id directory object is
   written first (tiered/directory.py: which queue each of its records is of, for lookups by id); a file whose
   object could not be written is kept until a run writes it.
3. Retention (`retention`, its own schedule): per queue, expired cold segments are deleted and
   `min_offset` moves past expired batches; id directory objects older than every topic's retention go.

Nothing new, nothing done: the marker file `<efs>/maintenance.json` says when the last run started and
whether it left work. A run that finds no segment file written since (by a margin that covers a put's
sequencing and the index's lag) and nothing left returns after one directory scan, with no request to
DynamoDB or S3.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tidemq_protocol import clock
from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.record import rebase
from tidemq_store.cq_entry import entries_of

from ..api import CleanReport, MaintenanceReport
from ..config import StoreConfig
from ..cq_entry import CqEntries
from ..tiered.container import TieredQueue
from ..tiered.directory import expire_directories
from .cold import ColdTier
from .leases import Leases
from .metadata import Metadata
from .queue_index import QueueIndex, QueueState, queue_key
from .segments import newest_write, read_segment, read_segment_at
from .tables import DIRTY, Tables

log = logging.getLogger("tidemq.maintenance")
SKIP_MARGIN_S = 120.0  # a put is sequenced within a minute of its append, and `dirty` is listed within seconds
COMMIT_ATTEMPTS = 5


@dataclass
class RunReport:
    """What one maintenance run did."""

    skipped: bool = False
    queues: int = 0
    messages: int = 0
    failed: list[str] = field(default_factory=list)
    files_deleted: int = 0
    left_work: bool = False
    touched_files: set[str] = field(default_factory=set)
    oldest_waiting_ms: int | None = None  # the store time of the oldest message found not yet in the tier

    def waiting(self, store_timestamp: int) -> None:
        if self.oldest_waiting_ms is None or store_timestamp < self.oldest_waiting_ms:
            self.oldest_waiting_ms = store_timestamp

    def summary(self) -> MaintenanceReport:
        lag = 0.0 if self.oldest_waiting_ms is None else max(0.0, (clock.now_ms() - self.oldest_waiting_ms) / 1000)
        return MaintenanceReport(
            self.skipped, self.queues, self.messages, self.files_deleted, tuple(self.failed), round(lag, 3)
        )


class Maintenance:
    """The run's steps, over just the parts of a serverless store they work on (the store hands them over:
    `ServerlessMessageStore.maintenance`): its config, its topics, its tables (the queues' items, the batches'
    `by_file` index), its queue index, its segment files' directory and its cold tier (None: there is none)."""

    def __init__(
        self,
        config: StoreConfig,
        metadata: Metadata,
        tables: Tables,
        index: QueueIndex,
        segments: Path,
        tier: ColdTier | None,
        skip_margin_s: float = SKIP_MARGIN_S,
    ) -> None:
        self.config, self.metadata, self.index, self.segments, self.tier = config, metadata, index, segments, tier
        self.queues, self.batches, self.timers = tables.queues, tables.batches, tables.timers
        self.skip_margin_s = skip_margin_s
        self.marker = config.efs_directory / "maintenance.json"
        self.leases = Leases(self.queues, config.efs_directory / "leases")

    # ---- the scheduled run -----------------------------------------------------------------------

    def run(self) -> RunReport:
        """Upload, then delete unreferenced files; nothing at all when nothing changed (module docstring)."""
        started = time.time()
        last = self._read_marker()
        idle = last is not None and not last["left_work"] and time.time() < last["gc_at"] and not self.leases.left()
        if idle and newest_write(self.segments) < last["started"] - self.skip_margin_s:
            return RunReport(skipped=True)
        report = self.upload()
        gc_at = float("inf")
        if not report.failed:
            report.files_deleted, gc_at = self.delete_unreferenced_files(report.touched_files)
        self._write_marker(started, report.left_work or bool(report.failed), gc_at)
        return report

    def upload(self, topic: str | None = None) -> RunReport:
        """Step 1 for every dirty queue (or every queue of `topic`)."""
        if topic is None:
            queues = self.dirty_queues()
        else:
            queues = [(topic, queue) for queue in range(self.metadata.get_topic(topic).queues)]
        report = RunReport()
        self.leases.give_back_left()
        for name, queue in queues:
            self.upload_queue(name, queue, report)
        return report

    def dirty_queues(self) -> list[tuple[str, int]]:
        """(topic, queue) of every queue with messages not uploaded yet (the `by_dirty` index)."""
        keys = [item.key for item in self.queues.by_dirty.query(DIRTY)]
        return [(name, int(queue)) for name, _, queue in (key.rpartition("|") for key in keys)]

    def upload_queue(self, topic: str, queue: int, report: RunReport) -> None:
        """Step 1 for one queue, into `report` (a failure is logged and listed in `report.failed`, for the next run
        to retry). The Spark migration job runs it for many queues at once."""
        try:
            self._upload_queue(topic, queue, report)
        except Exception:
            log.exception("maintenance of %s failed; the next run retries it", queue_key(topic, queue))
            report.failed.append(queue_key(topic, queue))

    def _upload_queue(self, topic: str, queue: int, report: RunReport) -> None:
        leased = self.leases.take(topic, queue)
        if leased is None:  # held by another run, or the queue is gone
            report.left_work = True
            return
        lease, state = leased
        try:
            end = state.next_offset
            before = {ref.file for ref in state.pending}
            state = self.index.index_through(topic, queue, state, end)
            report.touched_files |= before
            report.queues += 1
            if self.tier is None:  # nothing to move: indexed is all there is to do
                hot = state.hot_offset
            else:
                report.messages += self._upload_to_tier(topic, queue, state, end, report)
                hot = self._hot_boundary(topic, queue, state, end)
                report.left_work |= hot < end  # kept hot for efs_hot_ms: a later run moves it
            self.leases.give_back(topic, queue, lease, hot, end, clean=self.tier is None or hot >= end)
            lease = None
            if hot > state.hot_offset:
                self.index.drop_below(topic, queue, hot)
        finally:
            if lease is not None:
                self.leases.release(topic, queue, lease, state.hot_offset)

    def _upload_to_tier(self, topic: str, queue: int, state: QueueState, end: int, report: RunReport) -> int:
        """Append [tier end, end) to the queue's tier files; return how many messages went. The first batch
        found is the queue's oldest waiting one: `report` keeps its store time, uploaded or not."""
        tiered = self.tier.writer(topic, queue)
        start = tiered.max_offset
        if start is None or start < state.min_offset:
            if start is not None:
                log.warning(
                    "tier %s:%s ends at %s, below the queue's minimum %s: restarting it there",
                    topic,
                    queue,
                    start,
                    state.min_offset,
                )
                tiered.clear()
                tiered = self.tier.writer(topic, queue)
            start = state.min_offset
        if start > end:
            raise CorruptStore(f"tier {topic}:{queue} ends at {start}, past the queue's end {end}")
        first, parts, entries, size = start, [], [], 0
        for ref in self.index.walk(topic, queue, state, _batch_start(self.index, topic, queue, state, start)):
            if ref.first_offset >= end:
                break
            if not parts and first == start:
                report.waiting(ref.store_timestamp)
            data = rebase(read_segment(self.segments, ref.file, ref.position, ref.length), ref.first_offset)
            records = entries_of(data)
            skip = max(0, start - ref.first_offset)  # the tier restarted inside this batch
            cut = records[skip].position if skip < len(records) else len(data)
            parts.append(data[cut:])
            entries.append(records[skip:].data)
            size += len(data) - cut
            if size >= self.config.tier_upload_bytes:
                first = self._commit(tiered, first, parts, CqEntries(b"".join(entries)))
                parts, entries, size = [], [], 0
        if parts:
            first = self._commit(tiered, first, parts, CqEntries(b"".join(entries)))
        return first - start

    def _commit(self, tiered: TieredQueue, first: int, parts: list[bytes], entries: CqEntries) -> int:
        tiered.append(first, b"".join(parts), entries)
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                tiered.commit()
                break
            except Exception as error:
                if attempt == COMMIT_ATTEMPTS - 1:
                    raise
                log.warning("tier upload of %s:%s failed (%s); retrying", tiered.topic, tiered.queue, error)
                time.sleep(0.1 * 2**attempt)
        return first + len(entries)

    def _hot_boundary(self, topic: str, queue: int, state: QueueState, uploaded_end: int) -> int:
        """Past every batch from the current boundary on that is uploaded and older than efs_hot_ms."""
        hot = max(state.hot_offset, state.min_offset)
        if not self.config.efs_hot_ms:
            return max(hot, uploaded_end)
        cutoff = clock.now_ms() - self.config.efs_hot_ms
        for ref in self.index.walk(topic, queue, state, hot):
            if ref.end_offset > uploaded_end or ref.store_timestamp >= cutoff:
                break
            hot = ref.end_offset
        return hot

    # ---- files -----------------------------------------------------------------------------------

    def delete_unreferenced_files(self, spared: set[str]) -> tuple[int, float]:
        """Step 2: delete idle files no `batches` item points into; (how many, when to look again)."""
        deleted, look_again = 0, float("inf")
        grace, now = self.config.efs_segment_grace_s, time.time()
        by_file = self.batches.by_file
        try:
            entries = list(os.scandir(self.segments))
        except FileNotFoundError:
            return 0, look_again
        for entry in entries:
            try:
                idle_since = entry.stat().st_mtime
            except FileNotFoundError:
                continue
            if idle_since > now - grace or entry.name in spared:
                look_again = min(look_again, max(idle_since + grace, now))
                continue
            if next(iter(by_file.query(entry.name, limit=1)), None) is not None:
                continue  # still hot: the upload that moves its batches cold makes the next run look again
            if next(iter(self.timers.by_file.query(entry.name, limit=1)), None) is not None:
                continue  # a timer not yet due has its record there (timers.py): its move makes a run look again
            if self.tier is not None and not self._list_ids(entry.name, entry.path):
                continue  # its id directory object could not be written: the next run tries again
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                deleted += 1
        return deleted, look_again

    def _list_ids(self, file: str, path: str) -> bool:
        """Write the tier's id directory object of a segment file about to be deleted (tiered/directory.py), so
        that an id naming it is looked up in one queue; whether it is written (or the file is already gone)."""
        try:
            self.tier.list_ids(file, os.path.getsize(path), partial(read_segment_at, Path(path)))
        except FileNotFoundError:
            return True
        except Exception:
            log.exception("the id directory object of segment file %s was not written; it is kept", file)
            return False
        return True

    # ---- retention -------------------------------------------------------------------------------

    def retention(self, now_ms: int | None = None) -> CleanReport:
        """Step 3 for every topic with a retention: expired cold segments go, `min_offset` moves past
        expired batches (and their `batches` items go)."""
        now = clock.now_ms() if now_ms is None else now_ms
        segments = messages = 0
        longest: int | None = 0  # the longest retention of any topic (None: one keeps its messages forever)
        self.leases.give_back_left()
        for config in self.metadata.all_topics():
            if config.retention_ms is None:
                longest = None
                continue
            longest = None if longest is None else max(longest, config.retention_ms)
            for queue in range(config.queues):
                try:
                    expired = self.expire_queue(config.name, queue, now - config.retention_ms)
                except Exception:
                    log.exception("retention of %s:%s failed; the next run retries it", config.name, queue)
                    continue
                if expired is not None:
                    segments += expired.segments_deleted
                    messages += expired.messages_expired
        if self.tier is not None and longest is not None:
            expire_directories(self.tier.driver, (now - longest) / 1000)
        return CleanReport(segments, messages)

    def expire_queue(self, topic: str, queue: int, cutoff: int) -> CleanReport | None:
        """Step 3 for one queue, under its lease: delete the cold segments wholly stored before `cutoff` and move
        `min_offset` past every expired message; None when another run holds the queue (the next run takes it).
        The Spark retention job runs it for many queues at once."""
        leased = self.leases.take(topic, queue)
        if leased is None:
            return None
        lease, state = leased
        low, segments = state.min_offset, 0
        try:
            if self.tier is not None and state.hot_offset > low:
                tiered = self.tier.writer(topic, queue)
                before = len(tiered.consumequeue.first_segments())
                tiered.delete_expired(cutoff)
                segments = before - len(tiered.consumequeue.first_segments())
                cold_min = tiered.min_offset
                low = max(low, state.hot_offset if cold_min is None else min(cold_min, state.hot_offset))
            if low >= state.hot_offset or self.tier is None:
                for ref in self.index.walk(topic, queue, state, _batch_start(self.index, topic, queue, state, low)):
                    if ref.store_timestamp >= cutoff:
                        break
                    low = max(low, ref.end_offset)
            if low > state.min_offset:
                queues = self.queues
                self.queues(queue_key(topic, queue)).update(
                    actions=[queues.min_offset.set(low)], condition=queues.uploading == lease
                )
                self.index.drop_below(topic, queue, low)
        finally:
            self.leases.release(topic, queue, lease, max(state.hot_offset, low))
        return CleanReport(segments, low - state.min_offset)

    # ---- the marker ------------------------------------------------------------------------------

    def _read_marker(self) -> dict | None:
        try:
            return json.loads(self.marker.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def _write_marker(self, started: float, left_work: bool, gc_at: float) -> None:
        temporary = self.marker.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"started": started, "left_work": left_work, "gc_at": gc_at}))
        os.replace(temporary, self.marker)


def _batch_start(index, topic: str, queue: int, state: QueueState, offset: int) -> int:
    """The first offset of the batch holding `offset` (walks start at batch boundaries)."""
    if offset >= state.next_offset:
        return offset
    refs = index.batches(topic, queue, state, offset, offset + 1, 1)
    return refs[0].first_offset if refs else offset
