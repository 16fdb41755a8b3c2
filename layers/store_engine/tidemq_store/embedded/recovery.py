"""Recovery of the embedded store: the ConsumeQueue brought back in line with the commit log when the store opens.

The ConsumeQueue is written without a WAL, so a crash can lose its latest writes; the checkpoint says how far the
log is indexed for sure (consumequeue.Checkpoint: written by `flush`, the background round and `close`). Recovery
replays the log from there, indexing each whole batch as the write path did (and recording the idempotency key a
batch's SEND_KEY record names, sends.py); a torn batch at the log's tail is cut
off (a batch is kept or dropped whole; damage inside a sealed segment raises CorruptStore instead, commitlog.py).
After a crash (no clean checkpoint) it also drops entries that point past the log's new end, and runs retention.
"""

from __future__ import annotations

from tidemq_protocol import clock
from tidemq_protocol.message import tag_hash
from tidemq_protocol.record import SEND_KEY, RecordHeader, decode_message

from ..hot import StoredBatch
from ..sends import SentBatch, decode_send_mark
from .consumequeue import CheckpointState
from .parts import StoreParts


class Recovery(StoreParts):
    """Checkpoints and recovery of `EmbeddedMessageStore` (which gives `clean_expired`)."""

    def recover(self) -> None:
        """Replay the log from the checkpoint into the ConsumeQueue, cut a torn tail, repair maxima."""
        checkpoint = self._checkpoint.read()
        self._last_store_timestamp = checkpoint.store_timestamp
        commitlog = self.commitlog
        end = start = max(min(checkpoint.position, commitlog.written_position), commitlog.min_position)
        for batch in commitlog.iter_batches(start):
            self._dispatch_logged(batch)
            end = batch[-1].physical_offset + batch[-1].size
        if end < commitlog.written_position:
            commitlog.truncate(end)
        if not checkpoint.clean:
            self._repair_maxima(end)
        self._next_offsets.clear()
        self.cq.flush()
        self._checkpoint.write(CheckpointState(end, False, self._last_store_timestamp))
        if not checkpoint.clean:
            self.clean_expired()

    def _write_checkpoint(self, clean: bool) -> None:
        """Make everything written so far durable, the ConsumeQueue included, and record that recovery may start
        there (`clean`: nothing will be written after it, the store is closing)."""
        with self._write_lock:
            position, store_timestamp = self.commitlog.written_position, self._last_store_timestamp
        self.commitlog.wait_durable(position)
        self.cq.flush()
        self._checkpoint.write(CheckpointState(position, clean, store_timestamp))

    def _dispatch_logged(self, batch: list[RecordHeader]) -> StoredBatch | None:
        """Index one batch read back from the log (recovery, a slave's replica), as the write path indexed it when
        it was written; None if its topic is gone (deleted, or made again since)."""
        first = batch[0]
        self._last_store_timestamp = max(self._last_store_timestamp, first.store_timestamp)
        config = self.meta.get_topic(first.topic)
        if config is None or first.store_timestamp < config.created_at:
            return None
        mark = batch[-1] if batch[-1].flags & SEND_KEY else None
        if mark is not None:
            batch = batch[:-1]
        stored = StoredBatch(
            first.topic,
            first.store_timestamp,
            [r.queue for r in batch],
            [r.queue_offset for r in batch],
            [r.physical_offset for r in batch],
            [r.size for r in batch],
            0 if mark is None else mark.size,
        )
        tag_codes, keys = [tag_hash(r.tag) for r in batch], [r.keys for r in batch]
        sent = None if mark is None else self._logged_send(mark, stored)
        self.cq.dispatch(stored, self.commitlog.segment_start(first.physical_offset), tag_codes, keys, sent)
        return stored

    def _logged_send(self, mark: RecordHeader, stored: StoredBatch) -> tuple[str, SentBatch] | None:
        """The idempotency key a batch's SEND_KEY record names, with what a send of it again is answered; None once
        its window has passed (sends.py)."""
        if stored.store_timestamp < clock.now_ms() - self.config.send_dedup_window_ms:
            return None
        send = decode_send_mark(decode_message(self.commitlog.read(mark.physical_offset, mark.size)).body)
        durable_at = mark.physical_offset + mark.size
        return send.key, SentBatch(send.digest, stored.store_timestamp, durable_at, tuple(stored.put_results()))

    def _repair_maxima(self, log_end: int) -> None:
        """Drop ConsumeQueue entries that point past the end of the log (the log lost its tail)."""
        for topic, queue, max_offset in list(self.cq.queues()):
            last = self.cq.entry(topic, queue, max_offset - 1) if max_offset else None
            if max_offset and (last is None or last.end > log_end):
                low = self.cq.min_offset(topic, queue)
                keep = self.cq.first_offset(topic, queue, low, max_offset, lambda e: e.end > log_end)
                self.cq.truncate_queue(topic, queue, keep)
