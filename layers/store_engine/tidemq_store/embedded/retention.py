"""Retention of the embedded store: what it removes, and the background round that removes it.

Messages expire past their topic's retention: each queue's minimum moves past them. A commit-log segment goes once
no topic can still need it (every record in it older than the longest retention of any topic), or once a cold tier
holds it whole and it is old enough (the tier's `ReleasePolicy`), or when a broker past its disk quota releases it
(`release_segments`, RIP-31's forcible clean-up). Queue minimums move first, and are flushed, so that no
ConsumeQueue entry points into a deleted segment; the segment's key-index entries go with it. A segment is archived
before it goes when a tier asked for it (`set_segment_archive`: the tier's id directory), and kept if that fails.
Each round also forgets the idempotency keys of sends older than their window (sends.py).

The background round (one thread): a checkpoint every `checkpoint_interval_s` (recovery.py), retention every
`clean_interval_s`. A round that fails is logged and the next one tries again. A failed fsync is different: the
commit log fails (commitlog.py), and the round stops checkpointing, as a checkpoint would claim data durable that
is not.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time

from tidemq_protocol import clock
from tidemq_protocol.errors import StoreFailed

from ..api import CleanReport
from ..cq_entry import CqEntry
from ..errors import StoreClosed
from ..hot import ReleasePolicy, SegmentArchive
from .commitlog import SegmentRange
from .metadata import FOREVER
from .parts import StoreParts

log = logging.getLogger("tidemq.store")


class Retention(StoreParts):
    """Clean-up of `EmbeddedMessageStore` and its background round (which needs `_write_checkpoint`)."""

    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        """Expire messages past their topic's retention; delete segments no topic can still need (see the module
        docstring)."""
        with self._clean_lock:
            return self._clean_expired(clock.now_ms() if now_ms is None else now_ms)

    def release_segments(self, wanted_bytes: int, safe_before: int) -> CleanReport:
        """Remove the oldest whole segments that end at or below `safe_before` (everything below it is safe in a
        cold tier), until `wanted_bytes` are freed or none is left that may go: RocketMQ's forcible clean-up, for a
        broker past its disk quota (RIP-31). Retention would have removed them later."""
        with self._clean_lock:
            segments = self.commitlog.segments()
            keep_from, freed = segments[0].start, 0
            for segment in segments[:-1]:
                if freed >= wanted_bytes or segment.end > safe_before:
                    break
                keep_from, freed = segment.end, freed + segment.end - segment.start
            if keep_from == segments[0].start:
                return CleanReport(0, 0)
            return self._clean_expired(clock.now_ms(), floor=keep_from)

    def disk_usage(self) -> int:
        """Bytes this store's messages take: its commit log and ConsumeQueue (with the key index), what RIP-31
        counts against a broker's disk quota (metadata and checkpoints are left out, as RocketMQ leaves them)."""
        log_bytes = sum(segment.end - segment.start for segment in self.commitlog.segments())
        return log_bytes + _table_bytes(self.config.home / "consumequeue")

    def set_release_policy(self, policy: ReleasePolicy) -> None:
        self._release_policy = policy

    def set_segment_archive(self, archive: SegmentArchive) -> None:
        self._segment_archive = archive

    def _clean_expired(self, now: int, floor: int = 0) -> CleanReport:
        longest = self.meta.longest_retention_ms()
        segments = self.commitlog.segments()
        keep_from = segments[0].start
        if longest is None:
            keep_from = segments[-1].start
        elif longest != FOREVER:
            for _, (next_start, _) in itertools.pairwise(segments):
                first = self.commitlog.first_store_timestamp(next_start)
                if first is None or first >= now - longest:
                    break
                keep_from = next_start
        if self._release_policy is not None:
            keep_from = max(keep_from, self._released_before(self._release_policy, segments, now))
        keep_from = max(keep_from, floor)
        expired = 0
        for topic, queue, max_offset in list(self.cq.queues()):
            config = self.meta.get_topic(topic)
            if config is None:
                with self._write_lock:
                    self.cq.drop_topic(topic)
                continue
            min_offset = self.cq.min_offset(topic, queue)
            cutoff = -1 if config.retention_ms is None else now - config.retention_ms

            def live(entry: CqEntry, cutoff: int = cutoff) -> bool:
                return entry.store_timestamp >= cutoff and entry.position >= keep_from

            oldest = self.cq.entry(topic, queue, min_offset) if min_offset < max_offset else None
            if oldest is None or live(oldest):
                continue  # the common case: nothing to expire in this queue, one lookup
            new_min = self.cq.first_offset(topic, queue, min_offset, max_offset, live)
            if new_min > min_offset:
                self.cq.advance_min(topic, queue, min_offset, new_min)
                expired += new_min - min_offset
        with self._write_lock:  # the idempotency keys past their window (sends.py), by age
            self.cq.forget_sends(now - self.config.send_dedup_window_ms)
        deleted = []
        keep_from = self._archived_before(segments, keep_from)
        if keep_from > segments[0].start:
            self.cq.flush()
            deleted = self.commitlog.delete_segments_before(keep_from)
            for start, end in deleted:
                self.cq.drop_key_index(start, end)
        return CleanReport(len(deleted), expired)

    def _archived_before(self, segments: list[SegmentRange], keep_from: int) -> int:
        """Where the segments that may go and were archived (`SegmentArchive`: the tier's id directory) end: a
        segment whose archive failed is kept, with those after it, until the next round."""
        if self._segment_archive is None:
            return keep_from
        for start, end in segments[:-1]:
            if end > keep_from:
                break
            try:
                self._segment_archive(start, end, self.commitlog.read)
            except Exception:
                log.exception("commit-log segment %s was not archived; it is kept until the next round", start)
                return start
        return keep_from

    def _released_before(self, policy: ReleasePolicy, segments: list[SegmentRange], now: int) -> int:
        """Where the segments the release policy lets go end: uploaded wholly and old enough."""
        frontier = policy.uploaded_before()
        release_from = segments[0].start
        for _, (next_start, _) in itertools.pairwise(segments):
            first = self.commitlog.first_store_timestamp(next_start)
            if next_start > frontier or first is None or first >= now - policy.min_age_ms:
                break
            release_from = next_start
        return release_from

    def _maintain(self) -> None:
        """Background: checkpoint and clean on their intervals until closed (see the module docstring)."""
        next_clean = time.monotonic() + self.config.clean_interval_s
        while not self._stop.wait(self.config.checkpoint_interval_s):
            if self.commitlog.failure is not None:
                continue
            try:
                self._write_checkpoint(clean=False)
            except StoreClosed:
                return
            except StoreFailed:
                continue  # logged when the commit log failed
            except Exception:
                log.exception(
                    "checkpoint of %s failed; the next is due in %s s",
                    self.config.home,
                    self.config.checkpoint_interval_s,
                )
            if time.monotonic() < next_clean:
                continue
            next_clean = time.monotonic() + self.config.clean_interval_s
            try:
                self.clean_expired()
            except StoreClosed:
                return
            except Exception:
                log.exception(
                    "retention of %s failed; it runs again in %s s", self.config.home, self.config.clean_interval_s
                )


def _table_bytes(directory: os.PathLike) -> int:
    """The size of a RocksDB's table files (its data; not its info log, manifest or options files)."""
    total = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(".sst"):
                with contextlib.suppress(FileNotFoundError):  # compaction removed it meanwhile
                    total += entry.stat().st_size
    return total
