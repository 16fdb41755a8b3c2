"""`HotStore`: the hot store as a cold tier sees it, the one seam between the tier (tiered/) and the store under it.

RocketMQ's tieredstore reaches its DefaultMessageStore the same way: through the MessageStore API, plus a
dispatcher the store calls after every put. The tier reads what it uploads with `read_records`, learns of new
messages from a put listener (references, never bodies), sizes and times its uploads from ConsumeQueue entries,
and tells hot retention which segments it may remove once uploaded. It keeps its own metadata (tiered/progress.py).
The embedded engine implements this interface; the tier's unit tests run against an in-memory one.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from tidemq_protocol.record import message_id

from .api import CleanReport, MessageStore
from .cq_entry import CqEntries
from .kv.api import KeyValueStore
from .model import PutResult


@dataclass(slots=True, frozen=True)
class StoredBatch:
    """An acknowledged put, as a put listener is told of it: message i went to `queues[i]` at `queue_offsets[i]`,
    its record at `positions[i]` of the hot commit log, `sizes[i]` bytes long."""

    topic: str
    store_timestamp: int
    queues: list[int]
    queue_offsets: list[int]
    positions: list[int]
    sizes: list[int]
    trailer: int = 0
    """Bytes the put's append holds past its last message: its SEND_KEY record (sends.py), else none."""

    @property
    def end(self) -> int:
        """Where the put's append ends in the log: a copy holds the batch whole once it holds this much."""
        return self.positions[-1] + self.sizes[-1] + self.trailer

    def put_results(self) -> list[PutResult]:
        """What the put answered: each message's id (where its record is), queue and offset."""
        return [
            PutResult(message_id(physical, size), queue, offset, self.store_timestamp)
            for queue, offset, physical, size in zip(
                self.queues, self.queue_offsets, self.positions, self.sizes, strict=True
            )
        ]


PutListener = Callable[[StoredBatch], None]
SegmentArchive = Callable[[int, int, Callable[[int, int], bytes]], None]
"""Called as `archive(start, end, read)` before hot retention removes the commit-log segment [start, end) (`read`:
(position, length) -> bytes of it); raising keeps the segment until the next round."""


class QueueExtent(NamedTuple):
    """A queue that holds or held messages, and the offset its next message gets."""

    topic: str
    queue: int
    max_offset: int


class ReleasePolicy(NamedTuple):
    """What hot retention may remove besides expired messages: commit-log segments wholly below
    `uploaded_before()` (a position: everything below it is safe in the cold tier) and older than `min_age_ms`."""

    uploaded_before: Callable[[], int]
    min_age_ms: int


class HotStore(MessageStore):
    """A `MessageStore` that a cold tier can be put over: the calls the tier makes beyond `MessageStore`."""

    @abstractmethod
    def min_offset(self, topic: str, queue: int) -> int:
        """The oldest offset the hot store still holds (hot retention and release move it)."""

    @abstractmethod
    def max_offset(self, topic: str, queue: int) -> int:
        """The offset the queue's next message gets."""

    @abstractmethod
    def readable_max_offset(self, topic: str, queue: int) -> int:
        """`max_offset`, not counting a message written but not yet acknowledged."""

    @abstractmethod
    def entries(self, topic: str, queue: int, start: int, end: int) -> CqEntries:
        """The ConsumeQueue entries of offsets [start, end) the hot store holds (positions in its commit log)."""

    @property
    @abstractmethod
    def written_position(self) -> int:
        """The end of the hot commit log: how far behind it a record lies says whether it is likely in memory."""

    @abstractmethod
    def queues(self) -> Iterator[QueueExtent]:
        """Every queue that holds or held a message."""

    @abstractmethod
    def add_put_listener(self, listener: PutListener) -> None:
        """Call `listener` after every acknowledged put, in the putting thread (so it must be quick)."""

    @property
    @abstractmethod
    def first_position(self) -> int:
        """The start of the hot commit log: an id naming a position below it names a record gone from the hot tier."""

    @abstractmethod
    def record_queue(self, msg_id: str) -> tuple[str, int] | None:
        """The topic and queue of the record `msg_id` names, if the hot commit log still holds its place (whether
        or not the message is still readable there: released, expired); None otherwise."""

    @abstractmethod
    def set_segment_archive(self, archive: SegmentArchive) -> None:
        """Have `archive` called before every removal of a commit-log segment (the tier's id directory)."""

    @abstractmethod
    def set_release_policy(self, policy: ReleasePolicy) -> None:
        """Let hot retention also remove the segments `policy` releases."""

    @abstractmethod
    def release_segments(self, wanted_bytes: int, safe_before: int) -> CleanReport:
        """Remove the oldest whole segments below `safe_before` until `wanted_bytes` are freed (a broker past its
        disk quota, RIP-31)."""

    @abstractmethod
    def disk_usage(self) -> int:
        """Bytes the hot store's messages take on disk (commit log and ConsumeQueue)."""

    def open_kv_over(self, store: MessageStore) -> KeyValueStore:
        """The hot store's KV namespaces, writing their changes through `store` (the tier over it, so that a
        namespace rebuilt from its topic reads what only the cold tier holds)."""
        raise NotImplementedError(f"{type(self).__name__} has no KV namespaces")
