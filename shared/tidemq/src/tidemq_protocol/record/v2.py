"""Version 2 of the commit-log record (magic 0xD2): written since it came, by the producer and then the broker.

    offset size  field                                                            written by
       0     4   total_size        bytes in the whole record, this field included   producer
       4     1   magic             0xD2                                             producer
       5     1   flags             bit 0: END_OF_BATCH, the last record of one put  broker
                                   bit 1: SEND_KEY, not a message: the put's
                                   idempotency key (tidemq_store/sends.py)
       6     4   queue             queue id within the topic (a producer sends its  broker
                                   choice, or ANY_QUEUE: the broker chooses)
      10     8   queue_offset      the message's offset in its queue                broker
      18     8   physical_offset   where this record starts in the commit log       broker
      26     8   store_timestamp   ms since the epoch; never decreases              broker
      34     4   broker_crc        CRC32C of bytes [5, 34), the broker's fields     broker (producer: of its own)
      38     4   crc               CRC32C of bytes [42, total_size)                 producer
      42     8   born_timestamp    ms since the epoch                               producer
      50     1   topic_length      T                                                producer
      51     2   properties_length P                                                producer
      53     4   body_length       B                                                producer
      57     T   topic             UTF-8
    57+T     P   properties        UTF-8 `name\\x01value\\x02` pairs (`properties.py`)
  57+T+P     B   body

total_size = 57 + T + P + B. A producer encodes each message once (`encode_record`); the broker checks what it
received (`produced.py`), writes its fields in place (`stamp`) and appends the bytes as they came.

Why version 2. In version 1 the CRC covered the fields only the broker knows (offsets, store time), so the
broker had to build every record itself: decode what the producer sent into messages, validate them, and
encode new records with new CRCs, in Python, per message. Version 2 moves those fields in front of the
producer's CRC, as Kafka's RecordBatch v2 keeps its base offset outside its CRC: a producer encodes each message
once, in the stored format; the broker checks each record's size and CRC32C (native code, over the bytes as
they came), writes its fields at fixed positions with their own small CRC, and appends the bytes; a consumer
receives those bytes and checks the same CRCs, so the producer's check covers producer, wire, disk and wire
again. Unlike Kafka's offset, the broker's fields have a CRC of their own: every byte of a record but its size
(checked against the lengths) and magic is under a CRC, so a flipped bit in an offset or a queue is detected
like one in a body. A producer fills broker_crc over what it sends there (zeros, and its queue), so a changed
byte of a produce request is refused wherever it is. The serverless backend, which writes a batch before it
knows its offsets, gives records their offsets when it reads them by writing one field and its 4-byte CRC
(`write_queue_offset`), where version 1 needed a CRC over the whole record again.

One CRC per record rather than one per batch (Kafka's choice): a read returns any run of a queue's records,
a message id names one record, a tag-filtered read skips records, and the tier copies each queue's records
on their own (a put may spread over many queues). A CRC over a whole batch would make every such read fetch
and check the whole batch; a CRC per record keeps them exact, and the broker's check is two native calls per
record (measured: checking the 100 records of a 100 x 1 KiB produce takes about 0.15 ms of Python in all).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from crc32c import crc32c

MAGIC = 0xD2
END_OF_BATCH = 0x01  # flags, bit 0 (version 1's flags too)
SEND_KEY = 0x02  # flags, bit 1: a commit log's record naming its batch's idempotency key, never a message
ANY_QUEUE = 0xFFFFFFFF  # a producer's queue field when the broker chooses
HEADER = struct.Struct("<IBBIQQQIIQBHI")  # the table's fields, in order
HEADER_SIZE = HEADER.size  # 57
BROKER_AT, BROKER_CRC_AT, CRC_AT, CRC_START = 5, 34, 38, 42
QUEUE_AT, QUEUE_OFFSET_AT, PHYSICAL_AT, STORE_TIMESTAMP_AT = 6, 10, 18, 26
TOPIC_LENGTH_AT = 50  # topic_length, then properties_length (both versions have them adjacent)
MAX_TOPIC_BYTES = 127  # topic names are ASCII, at most 127 characters (model.NAME_RULE)
_SIZE_MAGIC = struct.Struct("<IB")
_BROKER = struct.Struct("<BIQQQ")  # flags, queue, queue_offset, physical_offset, store_timestamp: bytes [5, 34)
_COVERED = struct.Struct("<QBHI")  # born_timestamp to body_length: bytes [42, 57)
_CRC = struct.Struct("<I")
_OFFSET = struct.Struct("<Q")


class PendingRecord(NamedTuple):
    """One message ready to encode: everything but its position."""

    queue: int
    queue_offset: int
    born_timestamp: int
    properties: bytes
    body: bytes


def record_size(topic: bytes, properties: bytes, body: bytes) -> int:
    return HEADER_SIZE + len(topic) + len(properties) + len(body)


def max_record_size(max_message_bytes: int) -> int:
    """The largest record a store writes whose messages hold at most `max_message_bytes` of body and properties."""
    return HEADER_SIZE + MAX_TOPIC_BYTES + max_message_bytes


def _broker_part(flags: int, queue: int, queue_offset: int, physical_offset: int, store_timestamp: int) -> bytes:
    """Bytes [5, 38): the broker's fields and their CRC."""
    fields = _BROKER.pack(flags, queue, queue_offset, physical_offset, store_timestamp)
    return fields + _CRC.pack(crc32c(fields))


def encode_record(topic: bytes, queue: int, born_timestamp: int, properties: bytes, body: bytes) -> bytes:
    """A producer's record: the broker's fields zero but `queue` (a queue, or ANY_QUEUE), both CRCs computed."""
    return _encode(topic, _broker_part(0, queue, 0, 0, 0), born_timestamp, properties, body)


def encode_stored(
    topic: bytes,
    queue: int,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int,
    born_timestamp: int,
    properties: bytes,
    body: bytes,
) -> bytes:
    """A stored record made again from the fields decoded of it, for a broker that read a message decoded and sends
    it as a record (pop's receive): the bytes stored, END_OF_BATCH aside, when its properties encode as sent."""
    broker = _broker_part(0, queue, queue_offset, physical_offset, store_timestamp)
    return _encode(topic, broker, born_timestamp, properties, body)


def _encode(topic: bytes, broker: bytes, born_timestamp: int, properties: bytes, body: bytes) -> bytes:
    covered = _COVERED.pack(born_timestamp, len(topic), len(properties), len(body))
    crc = crc32c(body, crc32c(properties, crc32c(topic, crc32c(covered))))
    head = _SIZE_MAGIC.pack(HEADER_SIZE + len(topic) + len(properties) + len(body), MAGIC)
    return b"".join((head, broker, _CRC.pack(crc), covered, topic, properties, body))


def stamp(
    records: bytearray,
    sizes: Sequence[int],
    queues: Sequence[int],
    queue_offsets: Sequence[int],
    physical_start: int,
    store_timestamp: int,
) -> None:
    """The broker's part: write each record's queue, offset, position and store time in place, and flag the last
    one END_OF_BATCH (`records` holds them back to back, record i of `sizes[i]` bytes). CRCs stay as the producer
    made them."""
    position, last = 0, len(sizes) - 1
    with memoryview(records) as view:
        for i, (size, queue, offset) in enumerate(zip(sizes, queues, queue_offsets, strict=True)):
            flags = END_OF_BATCH if i == last else 0
            _BROKER.pack_into(
                view, position + BROKER_AT, flags, queue, offset, physical_start + position, store_timestamp
            )
            _CRC.pack_into(
                view, position + BROKER_CRC_AT, crc32c(view[position + BROKER_AT : position + BROKER_CRC_AT])
            )
            position += size


SEND_KEY_HEAD = BROKER_AT + 1  # the bytes of a record `is_send_key` reads


def is_send_key(head: bytes) -> bool:
    """Whether the record whose first SEND_KEY_HEAD bytes are `head` (checked already) is a SEND_KEY record."""
    return head[4] == MAGIC and bool(head[BROKER_AT] & SEND_KEY)


def flag_record(records: bytearray, at: int, flag: int) -> None:
    """Set `flag` on the record at `at` of `records`, stamped already, and write its broker CRC again."""
    with memoryview(records) as view:
        view[at + BROKER_AT] |= flag
        _CRC.pack_into(view, at + BROKER_CRC_AT, crc32c(view[at + BROKER_AT : at + BROKER_CRC_AT]))


def encode_batch(topic: bytes, records: list[PendingRecord], physical_start: int, store_timestamp: int) -> bytes:
    """Encode one put as consecutive records starting at `physical_start` (each `record_size` long)."""
    data = bytearray(b"".join(encode_record(topic, r.queue, r.born_timestamp, r.properties, r.body) for r in records))
    stamp(
        data,
        [record_size(topic, r.properties, r.body) for r in records],
        [r.queue for r in records],
        [r.queue_offset for r in records],
        physical_start,
        store_timestamp,
    )
    return bytes(data)


def write_queue_offset(record: memoryview, position: int, size: int, queue_offset: int) -> None:
    """Give the version 2 record at `position` the queue offset `queue_offset`, and the broker's fields their new
    CRC (`size` is not needed: the producer's CRC does not cover the offset)."""
    _OFFSET.pack_into(record, position + QUEUE_OFFSET_AT, queue_offset)
    _CRC.pack_into(record, position + BROKER_CRC_AT, crc32c(record[position + BROKER_AT : position + BROKER_CRC_AT]))
