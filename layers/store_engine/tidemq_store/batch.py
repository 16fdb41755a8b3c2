"""A put's batch, checked whole before anything is written: every backend validates with this.

A batch comes as messages (`validate_batch`: the store encodes them) or as records a producer encoded
(`validate_records`: the store checks them and keeps their bytes). Either way it becomes a `ValidatedBatch` of
version 2 records (record.py) that only need the broker's fields written.

Either way each message must fit its topic's message type (RocketMQ 5's, `MessageType`): on a FIFO topic every
message carries a message group and is in its group's queue (`key_queue`: a record that lets the broker choose
goes there), so a group's messages are in one queue in the order they were put; on any other topic none carries
one. A TRANSACTION topic takes half messages only (a transaction's first step, transactions/api.py), and only a
TRANSACTION topic takes them. On a DELAY topic every message says when it is due (TIMER_DELIVER_MS or
TIMER_DELAY_MS: tidemq_protocol.timer), and on any other none does. A message that does not fit refuses its batch
(MessageTypeMismatch, naming the topic's type). A producer's properties never carry a message's id (MESSAGE_ID:
`encode_properties` refuses it, and so `check_properties`); the broker adds it (`Message.msg_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    InvalidArgument,
    InvalidBatch,
    MessageTooLarge,
    MessageTypeMismatch,
    QueueOutOfRange,
)
from tidemq_protocol.message import Message, MessageType, key_queue, tag_hash
from tidemq_protocol.record import (
    ANY_QUEUE,
    HEADER_SIZE,
    check_produced,
    check_properties,
    encode_properties,
    encode_record,
    message_group_of,
    stamp,
    with_message_id,
)
from tidemq_protocol.timer import has_delivery

from .config import StoreConfig
from .model import TopicConfig


@dataclass(slots=True, frozen=True)
class ValidatedBatch:
    """A put's records, checked whole: version 2 records back to back, their broker fields still to write, and
    what the store needs of each as a column (record i is index i of each), so a batch of a thousand makes no
    object per message."""

    records: bytes | bytearray
    sizes: Sequence[int]
    queues: Sequence[int]
    tag_codes: Sequence[int]
    keys: Sequence[tuple[str, ...]]

    def __len__(self) -> int:
        return len(self.sizes)

    def stamped(self, queue_offsets: Sequence[int], physical_start: int, store_timestamp: int) -> bytearray:
        """The records as the log stores them: record i at `queue_offsets[i]`, the first at `physical_start`."""
        data = self.records if isinstance(self.records, bytearray) else bytearray(self.records)
        stamp(data, self.sizes, self.queues, queue_offsets, physical_start, store_timestamp)
        return data

    def with_record(self, record: bytes) -> ValidatedBatch:
        """The batch with `record` after its own, in queue 0, without tag or keys (the embedded log's SEND_KEY
        record, sends.py)."""
        columns = (self.sizes, self.queues, self.tag_codes, self.keys)
        extra = (len(record), 0, 0, ())
        return ValidatedBatch(bytearray(self.records) + record, *([*c, e] for c, e in zip(columns, extra, strict=True)))

    def take(self, indexes: Sequence[int]) -> ValidatedBatch:
        """The records at `indexes`, in that order."""
        if list(indexes) == list(range(len(self.sizes))):
            return self
        starts, position = [], 0
        for size in self.sizes:
            starts.append(position)
            position += size
        view = memoryview(self.records)
        records = bytearray().join(view[starts[i] : starts[i] + self.sizes[i]] for i in indexes)
        columns = (self.sizes, self.queues, self.tag_codes, self.keys)
        return ValidatedBatch(records, *([column[i] for i in indexes] for column in columns))


def _check_count(limits: StoreConfig, count: int) -> None:
    if count == 0:
        raise InvalidBatch("a batch must hold at least one message")
    if count > limits.max_batch_messages:
        raise InvalidBatch(f"a batch holds at most {limits.max_batch_messages} messages, got {count}")


def _check_total(limits: StoreConfig, total: int) -> None:
    if total > limits.max_batch_bytes:
        raise MessageTooLarge(f"the batch is {total} bytes encoded; the limit is {limits.max_batch_bytes}")


def check_message_type(
    config: TopicConfig, index: int, group: str | None, queue: int, half: bool = False, delivery: bool = False
) -> None:
    """MessageTypeMismatch unless message `index` (of message group `group`, in `queue`; `half`: a transaction's
    half message; `delivery`: saying when it is due) fits the topic's type (see the module docstring)."""
    kind = config.message_type
    if half != (kind is MessageType.TRANSACTION):
        raise MessageTypeMismatch(
            f"message {index} is a half message; topic {config.name!r} is {kind.value}: only a TRANSACTION topic"
            " takes half messages"
            if half
            else f"message {index} is not a half message; topic {config.name!r} is TRANSACTION: send it in a"
            f" transaction (POST /v1/topics/{config.name}/transactions)"
        )
    if delivery != (kind is MessageType.DELAY):
        _check_delivery(config, index, delivery)
    if kind is MessageType.FIFO:
        if group is None:
            raise MessageTypeMismatch(
                f"message {index} has no message_group; topic {config.name!r} is FIFO: each of its messages needs one"
            )
        if queue != key_queue(group, config.queues):
            raise MessageTypeMismatch(
                f"message {index} of message group {group!r} goes to queue {key_queue(group, config.queues)} of FIFO"
                f" topic {config.name!r}, not {queue}: send it without a queue"
            )
    elif group is not None:
        raise MessageTypeMismatch(
            f"message {index} has message_group {group!r}; topic {config.name!r} is {kind.value}: only a FIFO"
            " topic takes message groups"
        )


def _check_delivery(config: TopicConfig, index: int, delivery: bool) -> None:
    if delivery:
        raise MessageTypeMismatch(
            f"message {index} has a delivery time; topic {config.name!r} is {config.message_type.value}: only a DELAY"
            " topic takes delay messages"
        )
    raise MessageTypeMismatch(
        f"message {index} has no delivery time; topic {config.name!r} is DELAY: each of its messages needs one"
        " (delivery_time_ms or delay_ms)"
    )


def validate_batch(
    limits: StoreConfig, config: TopicConfig, messages: Sequence[Message], half: bool = False
) -> ValidatedBatch:
    """Check a whole batch of messages and encode it (raising a `ClientError` that names the message at fault);
    `half`: the half messages of transactions."""
    if not isinstance(messages, Sequence):
        raise InvalidBatch("a batch must hold at least one message")
    _check_count(limits, len(messages))
    born_default = now_ms()
    queues, max_size, topic = config.queues, limits.max_message_bytes, config.name.encode()
    total, parts, rows = 0, [], []
    for index, message in enumerate(messages):
        if type(message) is not Message:
            raise InvalidArgument(f"message {index} is a {type(message).__name__}, not a Message")
        body, queue, born, keys, tag = message.body, message.queue, message.born_timestamp, message.keys, message.tag
        if type(body) is not bytes:
            if not isinstance(body, bytes | bytearray | memoryview):
                raise InvalidArgument(f"message {index}: body must be bytes, got {type(body).__name__}")
            body = bytes(body)
        if type(queue) is not int or not 0 <= queue < queues:
            raise QueueOutOfRange(config.name, queue, queues)
        properties = message.properties
        check_message_type(
            config, index, message_group_of(properties), queue, half, bool(properties) and has_delivery(properties)
        )
        props = b""
        if keys or tag is not None or message.properties or message.msg_id is not None:
            try:
                props = encode_properties(keys, tag, message.properties)
                if message.msg_id is not None:
                    props = with_message_id(props, message.msg_id)
            except InvalidArgument as error:
                raise InvalidArgument(f"message {index}: {error}") from None
        size = len(body) + len(props)
        if size > max_size:
            raise MessageTooLarge(f"message {index} is {size} bytes (body and properties); the limit is {max_size}")
        if born is None:
            born = born_default
        elif type(born) is not int or born < 0:
            raise InvalidArgument(f"message {index}: born_timestamp must be a non-negative integer (ms)")
        record = encode_record(topic, queue, born, props, body)
        total += len(record)
        parts.append(record)
        rows.append((len(record), queue, tag_hash(tag) if tag else 0, tuple(keys) if keys else ()))
    _check_total(limits, total)
    return ValidatedBatch(b"".join(parts), *zip(*rows, strict=True))  # a row per message turned into a column per field


def validate_records(limits: StoreConfig, config: TopicConfig, records: bytes, default_queue: int) -> ValidatedBatch:
    """Check a batch of records a producer encoded (record.py, version 2) and keep their bytes: each record whole
    and intact (its CRC32C), for this topic, to a queue it has (ANY_QUEUE: `default_queue`), with properties as
    `encode_properties` makes them, within the limits of a put. A `ClientError` names the record at fault."""
    produced = check_produced(records, config.name.encode(), limits.max_batch_messages)
    _check_count(limits, len(produced.sizes))
    _check_total(limits, len(records))
    queues, fixed, max_size = config.queues, HEADER_SIZE + len(config.name.encode()), limits.max_message_bytes
    chosen, tag_codes, keys = [], [], []
    for index, (size, queue, props) in enumerate(
        zip(produced.sizes, produced.queues, produced.properties, strict=True)
    ):
        if not (queue == ANY_QUEUE or 0 <= queue < queues):
            raise QueueOutOfRange(config.name, queue, queues)
        if size - fixed > max_size:
            raise MessageTooLarge(
                f"message {index} is {size - fixed} bytes (body and properties); the limit is {max_size}"
            )
        message_keys, tag, group, delivery = (), None, None, False
        if props:
            try:
                message_keys, tag, group, properties = check_properties(props)
            except InvalidArgument as error:
                raise InvalidArgument(f"record {index}: {error}") from None
            delivery = has_delivery(properties)
        if queue == ANY_QUEUE:
            queue = default_queue if group is None else key_queue(group, queues)
        check_message_type(config, index, group, queue, delivery=delivery)
        chosen.append(queue)
        tag_codes.append(tag_hash(tag) if tag else 0)
        keys.append(message_keys)
    return ValidatedBatch(bytearray(records), produced.sizes, chosen, tag_codes, keys)
