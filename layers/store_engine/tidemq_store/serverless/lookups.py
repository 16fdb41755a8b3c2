"""Lookups by message id and by key on the serverless backend (`ServerlessMessageStore` has them from here, store.py
sets up what they read): the segment files and the queue index first, then the cold tier's index (tiered/lookup.py)
for what the hot tier no longer holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tidemq_protocol.errors import InvalidArgument, MessageNotFound, MessagePlace, TopicNotFound
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import decode_records, is_timer_id, parse_message_id, read_by_id, rebase

from ..api import MessageStore
from ..config import StoreConfig
from ..model import check_page_limit
from ..tiered.lookup import newest
from .queue_index import BatchRef, QueueIndex
from .segments import read_segment, split_physical
from .tables import Tables

if TYPE_CHECKING:
    from .cold import ColdTier


class Lookups(MessageStore):
    """`message_by_id` and `messages_by_key` over the state `ServerlessMessageStore.__init__` sets up."""

    config: StoreConfig
    segments: Path
    index: QueueIndex
    tables: Tables
    tier: ColdTier | None

    def message_by_id(self, msg_id: str) -> StoredMessage:
        """The hot tier's message, else the cold tier's (the index of the one queue its record is of,
        tiered/lookup.py): a message whose segment file is gone is found there."""
        try:
            return self._hot_message_by_id(msg_id)
        except MessageNotFound:
            found = self._cold_message_by_id(msg_id)
            if found is None or not self._still_held(found):
                raise
            return found

    def _cold_message_by_id(self, msg_id: str) -> StoredMessage | None:
        """The tier's message `msg_id`, searched in the queue its record names while its segment file is there, else
        in the queue the tier's id directory lists for its place (tiered/directory.py). A timer id names no place."""
        if self.tier is None or is_timer_id(msg_id):
            return None
        physical, _ = parse_message_id(msg_id)
        file, _ = split_physical(physical)
        places = None
        if (self.segments / file).exists():
            try:
                record = read_by_id(msg_id, self.config.max_message_bytes, self._read_physical)
            except MessageNotFound:
                if (self.segments / file).exists():
                    return None  # (else maintenance deleted the file meanwhile: its directory object says)
            else:
                places = [(record.topic, record.queue)]
        return self.tier.message_by_id(msg_id, places)

    def _still_held(self, message: StoredMessage) -> bool:
        """Whether a message found in the tier is still its topic's: the topic (not a later one of its name)
        exists and retention has not passed it."""
        try:
            config = self.get_topic(message.topic)
        except TopicNotFound:
            return False
        if message.store_timestamp < config.created_at:
            return False
        return message.queue_offset >= self.index.state(message.topic, message.queue).min_offset

    def _hot_message_by_id(self, msg_id: str) -> StoredMessage:
        """The id names the file and place (`record.read_by_id` checks what is there before reading it whole); the
        queue's entries (or the `by_file` index) say which offset. A timer id is the timers' to look up."""
        if is_timer_id(msg_id):
            return self.timers.message(msg_id.lower())
        physical, _ = parse_message_id(msg_id)
        file, position = split_physical(physical)
        message = read_by_id(msg_id, self.config.max_message_bytes, self._read_physical)
        state = self.index.state(message.topic, message.queue)
        first = next((ref.first_offset for ref in state.pending if _holds(ref, file, position)), None)
        if first is None:
            first = self.index.first_offset_at(message.topic, message.queue, file, position)
        if first is None:
            raise MessageNotFound(f"with id {msg_id}")  # written, never sequenced
        if first + message.queue_offset < state.min_offset:
            gone_from = MessagePlace(message.topic, message.queue, first + message.queue_offset)
            raise MessageNotFound(f"with id {msg_id}", gone_from)  # expired
        message.queue_offset += first
        return message

    def _read_physical(self, physical: int, length: int) -> bytes:
        return read_segment(self.segments, *split_physical(physical), length)

    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        """Batches carrying the key, newest first, per queue: the hot entries, then the batch items (a
        filtered Query of the queue's hot index; its cost grows with the hot tier, not the cold one); below a
        queue's hot boundary, the cold tier's index (tiered/lookup.py)."""
        config = self.get_topic(topic)
        if not isinstance(key, str) or not key:
            raise InvalidArgument("key must be a non-empty string")
        check_page_limit(limit)
        found: list[StoredMessage] = []
        cold_queues: dict[int, int] = {}  # queue: its hot boundary, for queues with messages below it
        minimums: dict[int, int] = {}
        batches = self.tables.batches
        for queue in range(config.queues):
            state = self.index.state(topic, queue)
            keyed = [ref for ref in reversed(state.pending) if ref.has_keys]
            # Batch items as of `state`: an entry pending then may have been indexed since, and is in `keyed`.
            indexed = self.index.indexed_batches(topic, queue, True, batches.keys.contains(key))
            refs = [*keyed, *(ref for ref in indexed if ref.first_offset < state.indexed)]
            taken = 0
            minimums[queue] = state.min_offset
            if state.hot_offset > state.min_offset:
                cold_queues[queue] = state.hot_offset
            for ref in refs:
                if ref.first_offset < max(state.min_offset, state.hot_offset):
                    break
                data = rebase(read_segment(self.segments, ref.file, ref.position, ref.length), ref.first_offset)
                matches = [m for m in decode_records(data) if key in m.keys]
                found += matches
                taken += len(matches)
                if taken >= limit:
                    break
        cold = []
        if self.tier is not None and cold_queues:
            cold = self.tier.messages_by_key(topic, cold_queues, key, limit)
        held = [m for m in cold if m.queue_offset >= minimums[m.queue] and m.store_timestamp >= config.created_at]
        return newest(found, held, limit)


def _holds(ref: BatchRef, file: str, position: int) -> bool:
    return ref.file == file and ref.position <= position < ref.position + ref.length
