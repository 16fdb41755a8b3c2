"""The read path, written once: what a read of one queue chose, turned into what `MessageStore.get` and
`MessageStore.read_records` return.

Every backend answers a `ReadRequest` with a `QueueRead` (`MessageStore.read_queue`): it checks the request and
chooses the records, and `get` then decodes them into messages while `read_records` sends them as they are stored.
A backend with a ConsumeQueue chooses from its entries alone (selection.py) and reads each chosen run with one call
of its own (`RunsRead.read_at`: the embedded commit log, a cold tier's block in the read-ahead cache); the serverless
backend decodes its records to choose them (`DecodedRead`). Tag codes can collide: whatever was chosen by code is
confirmed by its real tag once decoded (`matching`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.message import StoredMessage, TagFilter
from tidemq_protocol.record import decode_run

from .model import GetResult, RecordBatch
from .selection import Selection

ReadAt = Callable[[int, int], bytes]
"""How a backend reads the bytes of one run: `read_at(position, length)` where its records lie."""


class ReadRequest(NamedTuple):
    """A read of one queue as it was asked for (`MessageStore.get`'s arguments), not yet checked."""

    topic: str
    queue: int
    offset: int
    max_messages: int
    max_bytes: int
    tag_filter: str | TagFilter | None


def check_read(request: ReadRequest, most: int) -> TagFilter | None:
    """Validate a read's limits (`most`: the largest `max_messages` the store serves); return its parsed tag filter
    (None: every message)."""
    max_messages, max_bytes, tag_filter = request.max_messages, request.max_bytes, request.tag_filter
    if type(max_messages) is not int or not 1 <= max_messages <= most:
        raise InvalidArgument(f"max_messages must be 1..{most}, got {max_messages}")
    if type(max_bytes) is not int or max_bytes < 1:
        raise InvalidArgument(f"max_bytes must be a positive integer, got {max_bytes}")
    if tag_filter is None or isinstance(tag_filter, str):
        return TagFilter.parse(tag_filter)
    return tag_filter


def matching(messages: list[StoredMessage], tag_filter: TagFilter | None) -> list[StoredMessage]:
    """The messages whose real tag `tag_filter` matches (all of them without a filter): records chosen by their
    tag codes, which can collide, are confirmed so once decoded."""
    if tag_filter is None:
        return messages
    return [message for message in messages if tag_filter.matches(message.tag)]


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
    `read_at`. Entries carry tag codes only, and codes can collide: decoding confirms the real tag."""

    topic: str
    queue: int
    selection: Selection
    read_at: ReadAt
    tag_filter: TagFilter | None
    min_offset: int
    max_offset: int

    def get_result(self) -> GetResult:
        messages: list[StoredMessage] = []
        for first_offset, position, length in self.selection.runs:
            messages += decode_run(self.read_at(position, length), self.topic, self.queue, first_offset)
        messages = matching(messages, self.tag_filter)
        return GetResult(messages, self.selection.next_offset, self.min_offset, self.max_offset)

    def record_batch(self) -> RecordBatch:
        selection = self.selection
        return RecordBatch(self.records(), selection.count, selection.next_offset, self.min_offset, self.max_offset)

    def records(self) -> bytes:
        """The chosen records back to back, as stored (a tag-code collision among them included)."""
        return b"".join(self.read_at(position, length) for _, position, length in self.selection.runs)


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
