"""The message browser's bounded scan of one queue: from an offset (or a point in time), with an optional tag or
SQL92 filter, examining at most `bound` entries, so that a search on a queue of millions answers in bounded time
and says how far it looked ("scanned 10,000 of 1,200,000; continue from 10,000").

Each step is one `MessageStore.get`: a filtered one while at least SCAN_LIMIT entries are left to the bound (it
examines at most that many: a tag filter from the ConsumeQueue's tag codes alone, without reading bodies), else one
of at most WINDOW entries, unfiltered so that it examines no more than asked, filtered here; the scan stops when it
found `want` messages, reached the queue's end, or examined `bound` entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq_protocol.api.messages import MessageView
from tidemq_protocol.errors import QueueOutOfRange
from tidemq_protocol.filter import MessageFilter
from tidemq_protocol.limits import MIB
from tidemq_store import MessageStore
from tidemq_store.selection import SCAN_LIMIT

READ_BYTES = 4 * MIB
WINDOW = 1000
"""Entries one read of a scan examines at most."""


@dataclass(frozen=True, slots=True)
class QueueScan:
    """What one bounded scan found, and how far it looked: entries [start_offset, next_offset) of a queue holding
    [min_offset, max_offset). `stopped_at_bound`: it examined `bound` entries without reaching the end (continue from
    `next_offset`)."""

    topic: str
    queue: int
    messages: list[MessageView]
    start_offset: int
    next_offset: int
    min_offset: int
    max_offset: int
    bound: int
    stopped_at_bound: bool

    @property
    def scanned(self) -> int:
        return self.next_offset - self.start_offset

    @property
    def queue_size(self) -> int:
        return self.max_offset - self.min_offset


def scan_queue(
    store: MessageStore,
    topic: str,
    queue: int,
    offset: int,
    message_filter: MessageFilter | None,
    want: int,
    bound: int,
) -> QueueScan:
    """Up to `want` messages the filter selects from `offset` (clamped into the queue), examining at most `bound`
    entries (exactly: see the module docstring)."""
    queues = store.queue_offsets(topic)
    if not 0 <= queue < len(queues):
        raise QueueOutOfRange(topic, queue, len(queues))
    ranges = queues[queue]
    start = min(max(offset, ranges.min_offset), ranges.max_offset)
    position, found = start, []
    while len(found) < want and position < ranges.max_offset and position - start < bound:
        if message_filter is not None and bound - (position - start) >= SCAN_LIMIT:
            # the engine's filtered read examines at most SCAN_LIMIT entries (tags: from the ConsumeQueue alone)
            result = store.get(topic, queue, position, want - len(found), READ_BYTES, message_filter)
            found += [MessageView.of(m) for m in result.messages]
            if result.next_offset <= position:
                break
            position = result.next_offset
            continue
        result = store.get(topic, queue, position, min(WINDOW, bound - (position - start)), READ_BYTES)
        if result.next_offset <= position:
            break
        for message in result.messages:
            if message_filter is None or message_filter.accepts(message):
                found.append(MessageView.of(message))
                if len(found) == want:
                    position = message.queue_offset + 1
                    break
        else:
            position = result.next_offset
    end = min(position, ranges.max_offset)
    stopped = len(found) < want and end < ranges.max_offset
    return QueueScan(topic, queue, found, start, end, ranges.min_offset, ranges.max_offset, bound, stopped)
