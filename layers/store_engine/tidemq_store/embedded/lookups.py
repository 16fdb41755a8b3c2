"""Finding stored messages by their id and by their keys in `EmbeddedMessageStore`: an id names the record's place in
the commit log (or a timer's, or a half message's), a key the ConsumeQueue's key index; a message found is answered
only while it is live (its topic holds it, retention has not passed it)."""

from __future__ import annotations

from tidemq_protocol.errors import CorruptStore, InvalidArgument, MessageNotFound, MessagePlace
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import SEND_KEY_HEAD, decode_message, is_send_key, is_timer_id, parse_message_id, read_by_id

from ..model import check_page_limit
from .parts import StoreParts
from .transactions import TX_ID_BASE


class Lookups(StoreParts):
    """Message lookups of `EmbeddedMessageStore` (its timers, transactions and `get_topic` come with it)."""

    def message_by_id(self, msg_id: str) -> StoredMessage:
        if is_timer_id(msg_id):
            return self.timers.message(msg_id.lower())
        position, size = parse_message_id(msg_id)
        if position >= TX_ID_BASE:  # a half message's id, which its committed message keeps
            return self.transactions.committed_message(msg_id)
        if position < self.commitlog.min_position or position + size > self.commitlog.readable_position:
            raise MessageNotFound(f"with id {msg_id}")
        message = read_by_id(msg_id, self.config.max_message_bytes, self.commitlog.read)
        if is_send_key(self.commitlog.read(position, SEND_KEY_HEAD)):
            raise MessageNotFound(f"with id {msg_id}")  # a batch's idempotency key, not a message
        if not self._is_live(message):
            raise MessageNotFound(f"with id {msg_id}", self._expired_from(message))
        return message

    def record_queue(self, msg_id: str) -> tuple[str, int] | None:
        try:
            position, size = parse_message_id(msg_id)
            if position < self.commitlog.min_position or position + size > self.commitlog.readable_position:
                return None
            message = read_by_id(msg_id, self.config.max_message_bytes, self.commitlog.read)
        except MessageNotFound:
            return None
        return message.topic, message.queue

    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        self.get_topic(topic)
        if not isinstance(key, str) or not key:
            raise InvalidArgument("key must be a non-empty string")
        limit = check_page_limit(limit)
        readable = self.commitlog.readable_position
        starts = [segment.start for segment in self.commitlog.segments()]
        found = [(p, s) for p, s in self.cq.key_lookup(starts, topic, key) if p + s <= readable]
        messages = []
        for position, size in reversed(found):
            message = self._read_at(position, size)
            if message is not None and message.topic == topic and key in message.keys:
                messages.append(message)
                if len(messages) == limit:
                    break
        return messages[::-1]

    def _read_at(self, position: int, size: int) -> StoredMessage | None:
        """The live message stored at `position`, or None if it is damaged, expired or of a deleted topic."""
        try:
            message = decode_message(self.commitlog.read(position, size))
        except CorruptStore:
            return None
        return message if self._is_live(message) else None

    def _is_live(self, message: StoredMessage) -> bool:
        """Whether a message read from the log is still there to read: its topic (not a deleted one of the same
        name) holds it, and retention has not passed it."""
        config = self.meta.get_topic(message.topic)
        if config is None or message.store_timestamp < config.created_at:
            return False
        return message.queue_offset >= self.cq.min_offset(message.topic, message.queue)

    def _expired_from(self, message: StoredMessage) -> MessagePlace | None:
        """Where a message that is not live was, if retention passed it (None: its topic is gone)."""
        config = self.meta.get_topic(message.topic)
        if config is None or message.store_timestamp < config.created_at:
            return None
        return MessagePlace(message.topic, message.queue, message.queue_offset)
