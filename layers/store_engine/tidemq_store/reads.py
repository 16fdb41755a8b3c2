"""The read path, written once: what a read of one queue chose, turned into what `MessageStore.get` and
`MessageStore.read_records` return.

Every backend answers a `ReadRequest` with a `QueueRead` (`MessageStore.read_queue`): it checks the request and
chooses the records, and `get` then decodes them into messages while `read_records` sends them as they are stored.
A backend with a ConsumeQueue chooses from its entries alone (selection.py) and reads each chosen run with one call
of its own (`RunsRead.read_at`: the embedded commit log, a cold tier's block in the read-ahead cache); the serverless
backend decodes its records to choose them (`DecodedRead`). Tag codes can collide: whatever was chosen by code is
confirmed by its real tag once decoded (`matching`). A SQL92 filter reads properties, which no ConsumeQueue
holds: a `RunsRead` evaluates it on the records of the runs it reads, where they lie, and decodes (or sends) only
those it selects (`tidemq_protocol.filter.selected_records`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.filter import MessageFilter, SqlFilter, message_filter, selected_records
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import decode_records, decode_run, queue_offset_at

from .model import GetResult, RecordBatch
from .selection import Selection

SPAN_SLACK = 1.25
"""How much larger than the runs it holds a span of runs may be and still be read at once (`RunsRead.records`)."""
ReadAt = Callable[[int, int], bytes]
"""How a backend reads the bytes of one run: `read_at(position, length)` where its records lie."""


class ReadRequest(NamedTuple):
    """A read of one queue as it was asked for (`MessageStore.get`'s arguments), not yet checked."""

    topic: str
    queue: int
    offset: int
    max_messages: int
    max_bytes: int
    message_filter: str | MessageFilter | None
    """A tag filter or a SQL92 filter (`tidemq_protocol.filter`), a tag expression, or None (every message)."""


def check_read(request: ReadRequest, most: int) -> MessageFilter | None:
    """Validate a read's limits (`most`: the largest `max_messages` the store serves); return its filter (None:
    every message)."""
    max_messages, max_bytes = request.max_messages, request.max_bytes
    if type(max_messages) is not int or not 1 <= max_messages <= most:
        raise InvalidArgument(f"max_messages must be 1..{most}, got {max_messages}")
    if type(max_bytes) is not int or max_bytes < 1:
        raise InvalidArgument(f"max_bytes must be a positive integer, got {max_bytes}")
    return message_filter(request.message_filter)


def matching(messages: list[StoredMessage], chosen_by: MessageFilter | None) -> list[StoredMessage]:
    """The messages the filter selects (all of them without a filter): records chosen by their tag codes, which can
    collide, are confirmed so once decoded."""
    if chosen_by is None:
        return messages
    return [message for message in messages if chosen_by.accepts(message)]


class QueueRead(ABC):
    """What a read of one queue returns, before it is decoded or sent, with the queue's range
    [min_offset, max_offset) as the read found it."""

    min_offset: int
    max_offset: int

    @abstractmethod
    def get_result(self) -> GetResult:
        """The records decoded (each verified) into messages: what `get` returns."""

    @abstractmethod
    def record_batch(self) -> RecordBatch:
        """The records as stored: what `read_records` returns."""


@dataclass(slots=True)
class RunsRead(QueueRead):
    """Records of `topic`:`queue` chosen from ConsumeQueue entries as runs (selection.py), each run read with one
    `read_at`. Entries carry tag codes only, and codes can collide: decoding confirms the real tag. A SQL92 filter
    is evaluated on the records read (`selected`)."""

    topic: str
    queue: int
    selection: Selection
    read_at: ReadAt
    message_filter: MessageFilter | None
    min_offset: int
    max_offset: int

    def get_result(self) -> GetResult:
        if isinstance(self.message_filter, SqlFilter):
            records, next_offset = self.selected(self.message_filter)
            expect = (self.topic, self.queue, queue_offset_at(records[0])) if records else None
            messages = decode_records(b"".join(records), expect)
            return GetResult(messages, next_offset, self.min_offset, self.max_offset)
        messages: list[StoredMessage] = []
        for first_offset, position, length in self.selection.runs:
            messages += decode_run(self.read_at(position, length), self.topic, self.queue, first_offset)
        messages = matching(messages, self.message_filter)
        return GetResult(messages, self.selection.next_offset, self.min_offset, self.max_offset)

    def record_batch(self) -> RecordBatch:
        selection = self.selection
        if isinstance(self.message_filter, SqlFilter):
            records, next_offset = self.selected(self.message_filter)
            return RecordBatch(b"".join(records), len(records), next_offset, self.min_offset, self.max_offset)
        return RecordBatch(self.records(), selection.count, selection.next_offset, self.min_offset, self.max_offset)

    def selected(self, sql: SqlFilter) -> tuple[list[bytes], int]:
        """The records `sql` selects among those chosen, as stored, up to the limits the read asked for, and the
        offset the read goes on from: past the last record taken, or past every record chosen. Runs are read one
        by one, and no further than the records taken need."""
        max_messages, max_bytes = self.selection.wanted
        records: list[bytes] = []
        size = 0
        for _, position, length in self.selection.runs:
            data = self.read_at(position, length)
            for start, end in selected_records(data, sql):
                if records and size + end - start > max_bytes:
                    return records, queue_offset_at(data, start)
                records.append(data[start:end])
                size += end - start
                if len(records) == max_messages:
                    return records, queue_offset_at(data, start) + 1
        return records, self.selection.next_offset

    def records(self) -> bytes:
        """The chosen records back to back, as stored (a tag-code collision among them included). Runs that lie
        close together (split only by what a read skips: a put's idempotency-key record, a few records of another
        queue), one after the other, are read with one `read_at` of their whole span, and cut out of it in the one
        copy that joins them: a call per run would give up the GIL for each (a 4 MiB batch of 100-message puts has
        ~40 runs)."""
        runs = self.selection.runs
        positions, lengths = runs.positions, runs.lengths
        if len(positions) < 2:
            return self.read_at(positions[0], lengths[0]) if positions else b""
        first, span = positions[0], positions[-1] + lengths[-1] - positions[0]
        in_order = all(
            at + length <= after for at, length, after in zip(positions, lengths, positions[1:], strict=False)
        )
        if not in_order or span > sum(lengths) * SPAN_SLACK:
            return b"".join(self.read_at(position, length) for position, length in zip(positions, lengths, strict=True))
        with memoryview(self.read_at(first, span)) as whole:
            return b"".join(
                [whole[at - first : at - first + length] for at, length in zip(positions, lengths, strict=True)]
            )


@dataclass(slots=True)
class DecodedRead(QueueRead):
    """Records a backend decoded to choose them, with the messages among them that the read returns (every tag
    confirmed); `read_records` counts those messages."""

    records: bytes
    messages: list[StoredMessage]
    next_offset: int
    min_offset: int
    max_offset: int

    def get_result(self) -> GetResult:
        return GetResult(self.messages, self.next_offset, self.min_offset, self.max_offset)

    def record_batch(self) -> RecordBatch:
        return RecordBatch(self.records, len(self.messages), self.next_offset, self.min_offset, self.max_offset)
