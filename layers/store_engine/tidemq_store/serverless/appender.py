"""The serverless backend's put: a batch validated against its topic, appended to this process's segment file
(segments.py: each queue's records together, one write and one fsync), then sequenced all or nothing
(queue_index.py), and only then acknowledged, each message with its id (file and place) and its offset.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemq_protocol import clock
from tidemq_protocol.errors import QueueOutOfRange
from tidemq_protocol.message import Message
from tidemq_protocol.record import message_id

from ..batch import ValidatedBatch, validate_batch, validate_records
from ..config import StoreConfig
from ..model import PutResult, check_queue
from .metadata import Metadata
from .queue_index import BatchRef, ExtraWrite, QueueIndex, QueueMissing
from .segments import SegmentWriter, physical_offset


class Appender:
    """Puts of one process: into its `writer`'s segment files, sequenced in `index`."""

    def __init__(self, config: StoreConfig, metadata: Metadata, writer: SegmentWriter, index: QueueIndex) -> None:
        self.config, self.metadata, self.writer, self.index = config, metadata, writer, index

    def put(self, topic: str, messages: Sequence[Message]) -> list[PutResult]:
        try:
            batch = validate_batch(self.config, self.metadata.cached_topic(topic), messages)
        except QueueOutOfRange:
            batch = validate_batch(self.config, self.metadata.cached_topic(topic, fresh=True), messages)
        return self._append(topic, batch)

    def put_records(self, topic: str, records: bytes, default_queue: int = 0) -> list[PutResult]:
        try:
            batch = validate_records(self.config, self.metadata.cached_topic(topic), records, default_queue)
        except QueueOutOfRange:
            batch = validate_records(self.config, self.metadata.cached_topic(topic, fresh=True), records, default_queue)
        return self._append(topic, batch)

    def _append(self, topic: str, batch: ValidatedBatch) -> list[PutResult]:
        by_queue: dict[int, list[int]] = {}
        for index, queue in enumerate(batch.queues):
            by_queue.setdefault(queue, []).append(index)
        queues = sorted(by_queue)
        grouped = batch.take([index for queue in queues for index in by_queue[queue]])  # each queue's together
        relative = [i for queue in queues for i in range(len(by_queue[queue]))]  # offsets within each queue's part
        store_timestamp = clock.now_ms()
        appended = self.writer.append(lambda start: grouped.stamped(relative, start, store_timestamp))
        parts, at = {}, appended.position
        for queue in queues:
            indexes = by_queue[queue]
            length = sum(batch.sizes[index] for index in indexes)
            has_keys = any(batch.keys[index] for index in indexes)
            parts[queue] = BatchRef(0, len(indexes), appended.file, at, length, store_timestamp, has_keys)
            at += length
        firsts = self.sequence(topic, parts)
        results: list[PutResult | None] = [None] * len(batch)
        for queue, part in parts.items():
            at = part.position
            for i, index in enumerate(by_queue[queue]):
                size = batch.sizes[index]
                msg_id = message_id(physical_offset(appended.file, at), size)
                results[index] = PutResult(msg_id, queue, firsts[queue] + i, store_timestamp)
                at += size
        return results  # type: ignore[return-value]

    def sequence(self, topic: str, parts: dict[int, BatchRef], also: ExtraWrite | None = None) -> dict[int, int]:
        """Give each queue's part of the batch its offsets, all or none (queue_index.py); the first of each.
        `also`: another item's conditional write in the same transaction (a transaction's commit)."""
        try:
            return self.index.sequence(topic, parts, also)
        except QueueMissing as missing:  # a queue's first put, or the topic is gone (or lost it): look again
            config = self.metadata.cached_topic(topic, fresh=True)
            for queue in missing.queues:
                check_queue(config, queue)
                self.index.create(topic, queue)
            return self.index.sequence(topic, parts, also)


__all__ = ["Appender"]
