"""The compact binary encodings of the HTTP API: bulk produce and consume use them instead of JSON + base64.

Produce takes either of two bodies (POST /v1/topics/{topic}/batch):

- `application/vnd.tidemq.records` (the fast path): the messages as version 2 commit-log records, back to
  back, exactly as the store keeps them (`tidemq_protocol.record`: `encode_records` here makes them). The broker
  checks each record's CRC32C, writes the fields only it knows (queue offset, position, store time) and
  appends the bytes as they came. A record's queue field is its queue, or `record.ANY_QUEUE`: a queue the
  server chooses for the whole batch. Sharding keys are not part of a record: send those as frames.
- `application/vnd.tidemq.batch`: frames, which the server decodes and encodes as records itself, for
  sharding keys (or clients that do not encode records).

and answers with a line per message, in order, `<msg_id> <queue> <queue offset>` (text/plain); a BrokerContainer's
master adds the header `SEND_STATUS_HEADER`. A producer that sends `Accept: application/vnd.tidemq.sent`
(`SENT_CONTENT_TYPE`) is answered in binary instead, and learns each message's store time too:

    u32 count
    then `count` results, in order:
        i32 queue
        i64 queue_offset         -1: a delay message sent for later (its recall handle follows)
        u64 store_timestamp      epoch milliseconds
        u8  msg_id_size          then the message id, ASCII
        u16 recall_handle_size   then the recall handle, ASCII (0: none)

All integers are little-endian; text is UTF-8; `properties` use RocketMQ's `name\\x01value\\x02` encoding, as in
the commit log, with the message keys under KEYS (joined by spaces) and the tag under TAGS.

Frames (`application/vnd.tidemq.batch`): one per message, back to back

    u32 frame_size         bytes after this field
    i32 queue              -1: let the server choose (by sharding key if given, else any queue)
    u16 sharding_key_size  then the sharding key
    u32 properties_size    then the properties (keys, tag, user properties)
    ... body               the rest of the frame

Consume response body (GET /v1/topics/{topic}/queues/{queue}/batch):

    u64 next_offset, u64 min_offset, u64 max_offset, u32 count
    then `count` records exactly as the commit log stores them (format: `tidemq_protocol.record`),
    sent without decoding, as RocketMQ sends pulled messages; the client verifies each record's
    CRC32C as it decodes, so the check covers the wire too. With a tag filter a record whose tag
    merely shares the tag code can be included: `decode_consume` drops it.

Pop receive response body (POST /v1/groups/{group}/topics/{topic}/receive/batch, `RECEIVE_CONTENT_TYPE`):

    u32 count, u32 acks
    then `acks` bytes: what became of each receipt handle the request acked first (`ack`), in order, as an index
        into ACK_STATUSES (acked, already_acked, invalid_receipt_handle, dead_lettered)
    then `count` delivery heads, in order:
        u32 attempt              which delivery of the message this is: 1 the first, more after retries
        u64 invisible_until_ms   held for this consumer until then (epoch milliseconds)
        12  msg_id               the message id's bytes (`record.ids`: physical offset, size; big-endian); all
                                 zero (no record has size 0) when the id is not one of those but a client's own
                                 (a RocketMQ client's message id), which the record then carries (MESSAGE_ID)
        u8  handle_size          then the receipt handle, ASCII: opaque to clients, sent back to ack
    then `count` records back to back, the i-th delivery's message (format: `tidemq_protocol.record`).

A pop reads its messages decoded (through its ledger, tidemq_store/pop/receive.py), so the broker makes each
record again from them (`record.encode_stored`): the stored bytes, and the producer's CRC32C, whenever the
properties encode as they were sent (always for a record written since version 2 by this codec), and the
client checks every record's CRCs as it decodes. The id travels in the head so that it is the stored one even
when a record is made again in another version or size. Against the JSON body this saves the escaping of
bodies (a 1 KiB body of zeros is 6 KB of JSON) and the client's parse of it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from .clock import now_ms
from .errors import CorruptStore, InvalidArgument, InvalidBatch, MessageTooLarge
from .filter import MessageFilter
from .limits import PutLimits
from .message import Message, StoredMessage
from .record import (
    ANY_QUEUE,
    decode_properties,
    decode_records,
    encode_properties,
    encode_record,
    encode_stored,
    message_group_of,
    parse_message_id,
    view_records,
    with_message_id,
)

CONTENT_TYPE = "application/vnd.tidemq.batch"
RECORDS_CONTENT_TYPE = "application/vnd.tidemq.records"
RECEIVE_CONTENT_TYPE = "application/vnd.tidemq.deliveries"
SENT_CONTENT_TYPE = "application/vnd.tidemq.sent"
ACK_STATUSES = ("acked", "already_acked", "invalid_receipt_handle", "dead_lettered")
"""What an ack of one receipt handle became (the HTTP API's AckStatus), by the byte a pop receive's body sends."""
SEND_STATUS_HEADER = "x-tidemq-send-status"
"""The header of a produce answered by a BrokerContainer's master: RocketMQ's sendStatus (SEND_OK,
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE; servers/container/replication.py says when each)."""
IDEMPOTENCY_KEY_HEADER = "idempotency-key"
"""The header naming a produce request's batch (JSON or binary), made once per batch by the producer and sent again
with its retries: a batch stored under it within the deduplication window is answered as it was, not stored again
(tidemq_store/sends.py). At most `limits.MAX_SEND_KEY` printable ASCII characters."""
_PRODUCE = struct.Struct("<IiH")
_PROPERTIES = struct.Struct("<I")
_FRAME_FIELDS = _PRODUCE.size - 4 + _PROPERTIES.size  # queue, key size, properties size: counted in frame_size
_CONSUME_HEAD = struct.Struct("<QQQI")
_COUNTS = struct.Struct("<II")
_DELIVERY_HEAD = struct.Struct("<IQ12sB")
ID_BYTES = 12
CLIENTS_ID = bytes(ID_BYTES)
"""A delivery head's id when the message's id is a client's own, carried by its record (the module docstring)."""
_COUNT = struct.Struct("<I")
_SENT_HEAD = struct.Struct("<iqQBH")


@dataclass(slots=True)
class ProduceFrame:
    """One message of a produce batch: where it should go and what it is."""

    message: Message
    queue: int | None
    sharding_key: str | None


def encode_produce(frames: Iterable[tuple[Message, str | None]]) -> bytes:
    """Encode (message, sharding key) pairs; a message's `queue` of -1 or None lets the server choose."""
    parts: list[bytes] = []
    for message, sharding_key in frames:
        key = sharding_key.encode() if sharding_key else b""
        props = encode_properties(tuple(message.keys), message.tag, message.properties)
        queue = -1 if message.queue is None or message.queue < 0 else message.queue
        size = 4 + 2 + len(key) + 4 + len(props) + len(message.body)
        parts += (_PRODUCE.pack(size, queue, len(key)), key, _PROPERTIES.pack(len(props)), props, message.body)
    return b"".join(parts)


def encode_records(topic: str, messages: Iterable[Message]) -> bytes:
    """The records body of a produce to `topic` (a message's `queue` of -1 or None: the server chooses; its
    `born_timestamp` None: now)."""
    name, now, parts = topic.encode(), now_ms(), []
    for message in messages:
        props = encode_properties(tuple(message.keys), message.tag, message.properties)
        queue = ANY_QUEUE if message.queue is None or message.queue < 0 else message.queue
        born = now if message.born_timestamp is None else message.born_timestamp
        parts.append(encode_record(name, queue, born, props, message.body))
    return b"".join(parts)


def check_produce(data: bytes, limits: PutLimits) -> None:
    """Refuse a produce batch from its frame headers alone, before any message is decoded: more frames than a put
    takes (InvalidBatch), a message larger than one may be, or more message bytes than a batch may hold
    (MessageTooLarge). The same limits as the store's put, so a batch that passes here is judged by the put; what
    is malformed is left to `decode_produce` to report."""
    position, end, count, total = 0, len(data), 0, 0
    while position + _PRODUCE.size <= end:
        if count == limits.max_batch_messages:
            raise InvalidBatch(f"a batch holds at most {limits.max_batch_messages} messages; this one holds more")
        size, _, key_size = _PRODUCE.unpack_from(data, position)
        message = size - _FRAME_FIELDS - key_size  # properties and body
        if message > limits.max_message_bytes:
            raise MessageTooLarge(
                f"message {count} is {message} bytes (body and properties); the limit is {limits.max_message_bytes}"
            )
        total += max(0, message)
        if total > limits.max_batch_bytes:
            raise MessageTooLarge(f"the batch holds more than {limits.max_batch_bytes} bytes; that is the limit")
        position += 4 + size
        count += 1


def decode_produce(data: bytes, limits: PutLimits | None = None) -> list[ProduceFrame]:
    """Decode a produce batch, raising InvalidArgument (naming the frame) if it is malformed; with `limits`, a batch
    over them is refused first, from its frame headers (`check_produce`)."""
    if limits is not None:
        check_produce(data, limits)
    frames: list[ProduceFrame] = []
    position, end = 0, len(data)
    while position < end:
        index = len(frames)
        try:
            size, queue, key_size = _PRODUCE.unpack_from(data, position)
            frame_end = position + 4 + size
            start = position + _PRODUCE.size
            key = data[start : start + key_size].decode() if key_size else None
            start += key_size
            (props_size,) = _PROPERTIES.unpack_from(data, start)
            start += 4
            if frame_end > end or start + props_size > frame_end:
                raise InvalidArgument(f"frame {index} is cut short")
            keys, tag, properties = decode_properties(data[start : start + props_size])
        except (struct.error, UnicodeDecodeError, ValueError) as error:
            raise InvalidArgument(f"frame {index} of the batch is malformed: {error}") from None
        body = data[start + props_size : frame_end]
        frames.append(ProduceFrame(Message(body, 0, keys, tag, properties), None if queue < 0 else queue, key))
        position = frame_end
    return frames


class ConsumeBatch(Protocol):
    """Records read from one queue as stored, with the queue's range: the store's `RecordBatch`."""

    records: bytes
    count: int
    next_offset: int
    min_offset: int
    max_offset: int


def encode_consume(batch: ConsumeBatch) -> bytes:
    return _CONSUME_HEAD.pack(batch.next_offset, batch.min_offset, batch.max_offset, batch.count) + batch.records


def consume_header(data: bytes) -> tuple[int, int, int, int]:
    """(next_offset, min_offset, max_offset, count) of a consume batch, without decoding its records."""
    return _CONSUME_HEAD.unpack_from(data)


def decode_consume(
    data: bytes, message_filter: MessageFilter | None = None
) -> tuple[list[StoredMessage], int, int, int]:
    """Decode (and CRC-check) a consume batch into (messages, next_offset, min_offset, max_offset), keeping those
    `message_filter` selects (a tag filter's batch may hold messages whose tag codes collide with its tags). Every
    record is checked here; the messages are views of them (`record.view_records`): the body taken, the other
    fields decoded as they are read (and read-only)."""
    next_offset, min_offset, max_offset, count = consume_header(data)
    messages = view_records(data, _CONSUME_HEAD.size)
    if len(messages) != count:
        raise CorruptStore(f"consume batch announced {count} messages and holds {len(messages)}")
    if message_filter is not None:
        messages = [m for m in messages if message_filter.accepts(m)]
    return messages, next_offset, min_offset, max_offset


class HeldMessage(Protocol):
    """One delivery of a pop receive as the broker holds it: the engine's `Popped`."""

    message: StoredMessage
    receipt_handle: str
    attempt: int
    invisible_until_ms: int


@dataclass(slots=True)
class Received:
    """One delivery of a pop receive as a client holds it: the message, the receipt handle that acks or changes
    this delivery, which delivery of the message it is (1: the first), and until when it is held for this
    consumer (epoch milliseconds)."""

    message: StoredMessage
    receipt_handle: str
    attempt: int
    invisible_until_ms: int

    @property
    def message_group(self) -> str | None:
        """The message's group on a FIFO topic (RocketMQ's messageGroup), None on the others."""
        return message_group_of(self.message.properties)


class Sent(NamedTuple):
    """Where a produced message was stored (a produce's binary reply holds one per message, in order): a delay
    message sent for later has queue_offset -1 and the handle that recalls it (else None)."""

    msg_id: str
    queue: int
    queue_offset: int
    store_timestamp: int
    recall_handle: str | None = None


def encode_sent(results: Iterable[Sent]) -> bytes:
    """The binary reply of a produce (`SENT_CONTENT_TYPE`, see the module docstring); `results` may be anything
    with Sent's fields (the store's PutResult)."""
    parts = [b""]
    for result in results:
        msg_id, handle = result.msg_id.encode("ascii"), (result.recall_handle or "").encode("ascii")
        parts += (
            _SENT_HEAD.pack(result.queue, result.queue_offset, result.store_timestamp, len(msg_id), len(handle)),
            msg_id,
            handle,
        )
    parts[0] = _COUNT.pack((len(parts) - 1) // 3)
    return b"".join(parts)


def decode_sent(data: bytes) -> list[Sent]:
    """Decode a produce's binary reply; CorruptStore if it does not hold what it says."""
    try:
        (count,), position, results = _COUNT.unpack_from(data), _COUNT.size, []
        for _ in range(count):
            queue, offset, stored_at, id_size, handle_size = _SENT_HEAD.unpack_from(data, position)
            position += _SENT_HEAD.size
            msg_id = data[position : position + id_size].decode("ascii")
            handle = data[position + id_size : position + id_size + handle_size].decode("ascii")
            position += id_size + handle_size
            if len(msg_id) != id_size or len(handle) != handle_size:
                raise CorruptStore("a produce's binary reply is cut short")
            results.append(Sent(msg_id, queue, offset, stored_at, handle or None))
    except (struct.error, UnicodeDecodeError):
        raise CorruptStore("a produce's binary reply is malformed") from None
    if position != len(data):
        raise CorruptStore(f"a produce's binary reply holds {len(data) - position} bytes past its {count} results")
    return results


class ReceiveBatch(NamedTuple):
    """A pop receive's binary body decoded: what became of each handle it acked first, and what it delivered."""

    acks: list[str]
    received: list[Received]


def encode_receive(deliveries: Iterable[HeldMessage], acks: Sequence[str] = ()) -> bytes:
    """The binary body of a pop receive that acked first what `acks` says (ACK_STATUSES; see the module
    docstring)."""
    heads, records, raw_topic, topic = [], [], b"", None
    for delivery in deliveries:
        message = delivery.message
        if message.topic != topic:
            topic, raw_topic = message.topic, message.topic.encode()
        properties = encode_properties(message.keys, message.tag, message.properties)
        if len(message.msg_id) == 2 * ID_BYTES:  # a record's (or a timer's) id: it travels in the head
            physical, _ = parse_message_id(message.msg_id)
            head_id = bytes.fromhex(message.msg_id)
        else:  # a client's own: the record carries it
            physical, head_id = 0, CLIENTS_ID
            properties = with_message_id(properties, message.msg_id)
        handle = delivery.receipt_handle.encode("ascii")
        heads += (
            _DELIVERY_HEAD.pack(delivery.attempt, delivery.invisible_until_ms, head_id, len(handle)),
            handle,
        )
        records.append(
            encode_stored(
                raw_topic,
                message.queue,
                message.queue_offset,
                physical,
                message.store_timestamp,
                message.born_timestamp,
                properties,
                message.body,
            )
        )
    statuses = bytes(ACK_STATUSES.index(status) for status in acks)
    return b"".join((_COUNTS.pack(len(records), len(statuses)), statuses, *heads, *records))


def decode_receive(data: bytes) -> ReceiveBatch:
    """Decode (and CRC-check) the binary body of a pop receive; CorruptStore if it does not hold what it says."""
    try:
        count, acked = _COUNTS.unpack_from(data)
        position, heads = _COUNTS.size + acked, []
        acks = [ACK_STATUSES[status] for status in data[_COUNTS.size : position]]
        if len(acks) != acked:
            raise CorruptStore("a pop receive's body is cut short")
        for _ in range(count):
            attempt, until, msg_id, handle_size = _DELIVERY_HEAD.unpack_from(data, position)
            position += _DELIVERY_HEAD.size
            handle = data[position : position + handle_size].decode("ascii")
            if len(handle) != handle_size:
                raise CorruptStore("a pop receive's body is cut short")
            heads.append((attempt, until, None if msg_id == CLIENTS_ID else msg_id.hex(), handle))
            position += handle_size
    except (struct.error, UnicodeDecodeError, IndexError):
        raise CorruptStore("a pop receive's body is malformed") from None
    messages = decode_records(data[position:])
    if len(messages) != count:
        raise CorruptStore(f"a pop receive announced {count} messages and holds {len(messages)}")
    received = []
    for message, (attempt, until, msg_id, handle) in zip(messages, heads, strict=True):
        if msg_id is not None:  # else a client's id, which the record carried
            message.msg_id = msg_id
        received.append(Received(message, handle, attempt, until))
    return ReceiveBatch(acks, received)
