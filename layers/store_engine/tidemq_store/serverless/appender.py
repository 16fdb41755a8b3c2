"""The serverless backend's put: a batch validated against its topic, appended to this process's segment file
(segments.py: each queue's records together, one write and one fsync), then sequenced all or nothing
(queue_index.py), and only then acknowledged, each message with its id (file and place) and its offset. A DELAY
topic's batch is kept until due instead (timers.py), which appends it here then. A batch with an idempotency key is
sequenced with its key's record (sends.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidemq_protocol import clock
from tidemq_protocol.errors import QueueOutOfRange
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.record import message_id

from ..batch import ValidatedBatch, validate_batch, validate_records
from ..config import StoreConfig
from ..model import PutResult, TopicConfig, check_queue
from ..sends import SendKey, batch_digest, keyed
from .metadata import Metadata
from .queue_index import BatchRef, ExtraWrite, QueueIndex, QueueMissing
from .segments import SegmentWriter, physical_offset
from .sends import SendRecords

Delayed = Callable[[TopicConfig, ValidatedBatch, SendKey | None], list[PutResult]]
"""What stores a DELAY topic's checked batch, once for its key if it has one (timer/plan.py `put_delayed`, over the
store's timers)."""
Also = Callable[[list[str]], ExtraWrite]
"""Given a batch's message ids (where its records will be), the writes to make with its sequencing."""


class Appender:
    """Puts of one process: into its `writer`'s segment files, sequenced in `index`; a DELAY topic's batches go to
    `delayed`."""

    def __init__(
        self,
        config: StoreConfig,
        metadata: Metadata,
        writer: SegmentWriter,
        index: QueueIndex,
        delayed: Delayed,
        sends: SendRecords,
    ) -> None:
        self.config, self.metadata, self.writer, self.index = config, metadata, writer, index
        self.delayed, self.sends = delayed, sends

    def put(self, topic: str, messages: Sequence[Message], send: SendKey | None = None) -> list[PutResult]:
        config = self.metadata.cached_topic(topic)
        try:
            batch = validate_batch(self.config, config, messages)
        except QueueOutOfRange:
            config = self.metadata.cached_topic(topic, fresh=True)
            batch = validate_batch(self.config, config, messages)
        return self._store(config, batch, send)

    def put_records(
        self, topic: str, records: bytes, default_queue: int = 0, send: SendKey | None = None
    ) -> list[PutResult]:
        config = self.metadata.cached_topic(topic)
        try:
            batch = validate_records(self.config, config, records, default_queue)
        except QueueOutOfRange:
            config = self.metadata.cached_topic(topic, fresh=True)
            batch = validate_records(self.config, config, records, default_queue)
        return self._store(config, batch, send)

    def _store(self, config: TopicConfig, batch: ValidatedBatch, send: SendKey | None) -> list[PutResult]:
        if config.message_type is MessageType.DELAY:
            return self.delayed(config, batch, keyed(send, batch))
        if send is not None:
            return self.sends.append_once(config, batch, SendKey(send.key, batch_digest(batch)), self.append)
        return self.append(config.name, batch)

    def append(
        self, topic: str, batch: ValidatedBatch, also: Also | None = None, store_timestamp: int | None = None
    ) -> list[PutResult]:
        """Append a checked batch (stored at `store_timestamp`, else now); `also` adds writes to make with its
        sequencing or not at all (`QueueIndex.sequence`: ItemChanged when one of their conditions fails)."""
        by_queue: dict[int, list[int]] = {}
        for index, queue in enumerate(batch.queues):
            by_queue.setdefault(queue, []).append(index)
        queues = sorted(by_queue)
        grouped = batch.take([index for queue in queues for index in by_queue[queue]])  # each queue's together
        relative = [i for queue in queues for i in range(len(by_queue[queue]))]  # offsets within each queue's part
        store_timestamp = clock.now_ms() if store_timestamp is None else store_timestamp
        appended = self.writer.append(lambda start: grouped.stamped(relative, start, store_timestamp))
        parts, at = {}, appended.position
        for queue in queues:
            indexes = by_queue[queue]
            length = sum(batch.sizes[index] for index in indexes)
            has_keys = any(batch.keys[index] for index in indexes)
            parts[queue] = BatchRef(0, len(indexes), appended.file, at, length, store_timestamp, has_keys)
            at += length
        ids: list[str] = [""] * len(batch)
        for queue, part in parts.items():
            at = part.position
            for index in by_queue[queue]:
                ids[index] = message_id(physical_offset(appended.file, at), batch.sizes[index])
                at += batch.sizes[index]
        firsts = self.sequence(topic, parts, also(ids) if also is not None else None)
        results: list[PutResult | None] = [None] * len(batch)
        for queue in parts:
            for i, index in enumerate(by_queue[queue]):
                results[index] = PutResult(ids[index], queue, firsts[queue] + i, store_timestamp)
        return results  # type: ignore[return-value]

    def sequence(self, topic: str, parts: dict[int, BatchRef], also: ExtraWrite | None = None) -> dict[int, int]:
        """Give each queue's part of the batch its offsets, all or none (queue_index.py); the first of each.
        `also`: other items' conditional writes in the same transaction (a transaction's commit, due timers'
        deletions)."""
        try:
            return self.index.sequence(topic, parts, also)
        except QueueMissing as missing:  # a queue's first put, or the topic is gone (or lost it): look again
            config = self.metadata.cached_topic(topic, fresh=True)
            for queue in missing.queues:
                check_queue(config, queue)
                self.index.create(topic, queue)
            return self.index.sequence(topic, parts, also)


__all__ = ["Appender"]
