"""The serverless backend's hot reads: a queue's records in the writers' segment files, found through the queue's
batch items (queue_index.py) and read with one pread per batch, each record given its real offset (`record.rebase`,
which checks it). No ConsumeQueue holds their tags, so a read decodes what it chooses from; a SQL92 filter is
evaluated on the records where they lie and only those it selects are decoded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from tidemq_protocol.filter import SqlFilter, selected_records
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import decode_records, queue_offset_at, rebase, record_starts

from ..reads import DecodedRead, ReadRequest
from .known_queues import KnownQueue
from .queue_index import QueueIndex
from .segments import read_segment


class SegmentReads(NamedTuple):
    """Reads of the segment files under `segments` through `index`, `window` batches' worth of messages at a time."""

    segments: Path
    index: QueueIndex
    window: int

    def selected(
        self, request: ReadRequest, sql: SqlFilter, known: KnownQueue, end: int, low: int, high: int
    ) -> DecodedRead:
        """A SQL92-filtered read of the records of offsets [offset, end): evaluated on each batch's records where
        they lie (`tidemq_protocol.filter.selected_records`), only those selected decoded."""
        topic, queue, offset = request.topic, request.queue, request.offset
        parts: list[bytes] = []
        size, next_offset = 0, offset
        for first_offset, count, data in self.runs(topic, queue, known, offset, end):
            for start, stop in selected_records(data, sql):
                if parts and size + stop - start > request.max_bytes:
                    return decoded(topic, queue, parts, queue_offset_at(data, start), low, high)
                parts.append(data[start:stop])
                size += stop - start
                if len(parts) == request.max_messages:
                    return decoded(topic, queue, parts, queue_offset_at(data, start) + 1, low, high)
            next_offset = first_offset + count
        return decoded(topic, queue, parts, next_offset, low, high)

    def runs(
        self, topic: str, queue: int, known: KnownQueue, offset: int, end: int
    ) -> Iterator[tuple[int, int, bytes]]:
        """The queue's records of offsets [offset, end), as runs of records with their real offsets, each with its
        first offset and how many records it holds: one pread per batch."""
        for ref in self.index.known_batches(topic, queue, known, offset, end, self.window):
            data = rebase(read_segment(self.segments, ref.file, ref.position, ref.length), ref.first_offset)
            starts = record_starts(data)  # rebase gave them offsets first_offset, +1, ...
            low, high = max(0, offset - ref.first_offset), min(len(starts), end - ref.first_offset)
            if low < high:
                run = data[starts[low] : starts[high] if high < len(starts) else len(data)]
                yield ref.first_offset + low, high - low, run
            if high < len(starts):
                return

    def records(
        self, topic: str, queue: int, known: KnownQueue, offset: int, end: int
    ) -> Iterator[tuple[StoredMessage, bytes]]:
        """The queue's records of offsets [offset, end), each decoded (with its real offset) and as stored, batch by
        batch: one pread and one decode per batch."""
        for ref in self.index.known_batches(topic, queue, known, offset, end, self.window):
            data = rebase(read_segment(self.segments, ref.file, ref.position, ref.length), ref.first_offset)
            position = 0
            for message in decode_records(data, (topic, queue, ref.first_offset)):
                length = int.from_bytes(data[position : position + 4], "little")
                record = data[position : position + length]
                position += length
                if message.queue_offset >= end:
                    return
                if message.queue_offset >= offset:
                    yield message, record


def decoded(topic: str, queue: int, parts: list[bytes], next_offset: int, low: int, high: int) -> DecodedRead:
    """The selected records `parts`, decoded (each checked to be of the queue, at its offset)."""
    records = b"".join(parts)
    expect = (topic, queue, queue_offset_at(records)) if records else None
    return DecodedRead(records, decode_records(records, expect), next_offset, low, high)
