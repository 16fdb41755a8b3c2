"""Commit-log record formats — the one module that reads and writes them.

A commit log is a sequence of records; a put of N messages writes N consecutive records with one
write(), the last one flagged END_OF_BATCH. All integers are little-endian. Every record starts with
its total size and a magic byte naming its version; everything since version 2 writes version 2, and
every reader reads both, so old commit logs, tier segments and serverless files stay readable.

Version 2 (magic 0xD2), written by producers and appended by the broker as it is:

    offset size  field                                                            written by
       0     4   total_size        bytes in the whole record, this field included   producer
       4     1   magic             0xD2                                             producer
       5     1   flags             bit 0: END_OF_BATCH, the last record of one put  broker
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
    57+T     P   properties        UTF-8 `name\\x01value\\x02` pairs (RocketMQ's encoding);
                                   KEYS holds the message keys joined by spaces, TAGS the tag
  57+T+P     B   body

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
(`rebase`), where version 1 needed a CRC over the whole record again.

One CRC per record rather than one per batch (Kafka's choice): a read returns any run of a queue's records,
a message id names one record, a tag-filtered read skips records, and the tier copies each queue's records
on their own (a put may spread over many queues). A CRC over a whole batch would make every such read fetch
and check the whole batch; a CRC per record keeps them exact, and the broker's check is two native calls per
record (measured: checking the 100 records of a 100 x 1 KiB produce takes about 0.15 ms of Python in all).

Version 1 (magic 0xD1), read only:

    offset size  field
       0     4   total_size
       4     1   magic             0xD1
       5     4   crc               CRC32C of bytes [9, total_size)
       9     1   flags
      10     4   queue
      14     8   queue_offset
      22     8   physical_offset
      30     8   born_timestamp
      38     8   store_timestamp
      46     1   topic_length      T
      47     2   properties_length P
      49     4   body_length       B
      53         topic, properties, body as in version 2

total_size must equal the header's size (57, or 53 in version 1) + T + P + B. Every read checks magic, size and
CRCs; recovery keeps records up to the last complete batch whose records all pass, and truncates the rest (a torn
put is never visible).

A message id is where its record is: 24 lowercase hex digits, physical_offset (16) then total_size (8).
Ids come from clients, so a lookup trusts no part of one: `read_by_id` reads at most the largest record the
store writes, and only once the header found at that position names that position and size.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple

from crc32c import crc32c

from .errors import CorruptStore, InvalidArgument, InvalidBatch, MessageNotFound
from .message import StoredMessage

MAGIC = 0xD2  # what is written: version 2
MAGIC_V1 = 0xD1  # read only
END_OF_BATCH = 0x01
ANY_QUEUE = 0xFFFFFFFF  # a producer's queue field when the broker chooses
HEADER = struct.Struct("<IBBIQQQIIQBHI")  # version 2, in the order of the table above
HEADER_V1 = struct.Struct("<IBIBIQQQQBHI")
HEADER_SIZE = HEADER.size  # 57
HEADER_SIZE_V1 = HEADER_V1.size  # 53
SHORTEST_HEADER = HEADER_SIZE_V1
"""Every record's header is at least this long, and holds its size, magic, physical offset and store time."""
CRC_START = 42
CRC_START_V1 = 9
MAX_PROPERTIES_BYTES = 32767  # RocketMQ's Short.MAX_VALUE limit on encoded properties
MAX_PROPERTIES = 128  # user properties of one message, besides its keys and tag
MAX_TOPIC_BYTES = 127  # topic names are ASCII, at most 127 characters (model.NAME_RULE)

KEYS = "KEYS"
TAGS = "TAGS"
RESERVED_PROPERTIES = frozenset({KEYS, TAGS})
_NAME_SEP, _PROP_SEP = "\x01", "\x02"
_CRC = struct.Struct("<I")
_OFFSET = struct.Struct("<Q")
_BROKER = struct.Struct("<BIQQQ")  # flags, queue, queue_offset, physical_offset, store_timestamp: bytes [5, 34)
_BROKER_AT, BROKER_CRC_AT, CRC_AT = 5, 34, 38
_SIZE_MAGIC = struct.Struct("<IB")
_COVERED = struct.Struct("<QBHI")  # version 2 from born_timestamp to body_length: bytes [42, 57)
QUEUE_AT, QUEUE_OFFSET_AT, PHYSICAL_AT, STORE_TIMESTAMP_AT = 6, 10, 18, 26  # version 2
_V1_QUEUE_OFFSET_AT, _V1_PHYSICAL_AT, _V1_STORE_TIMESTAMP_AT = 14, 22, 38
_QUEUE = struct.Struct("<I")
_CHECKED = struct.Struct("<IBxIQ16xII8xBHI")  # what verify_records reads of a version 2 header, the rest skipped


class RecordHeader(NamedTuple):
    size: int
    flags: int
    queue: int
    queue_offset: int
    physical_offset: int
    store_timestamp: int
    topic: str
    tag: str | None
    keys: tuple[str, ...]


def _check_text(what: str, value: object, *, spaces: bool) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string")
    if any(ord(c) < 0x20 for c in value) or (not spaces and any(c.isspace() for c in value)):
        raise InvalidArgument(
            f"{what} {value!r} must not contain control characters" + ("" if spaces else " or spaces")
        )
    return value


def encode_properties(keys: tuple[str, ...], tag: str | None, properties: Mapping[str, str]) -> bytes:
    """Validate and encode a message's keys, tag and user properties (empty bytes when there are none)."""
    if not keys and tag is None and not properties:
        return b""
    parts = []
    if keys:
        if isinstance(keys, str):
            raise InvalidArgument("keys must be a list of strings, not one string")
        parts.append(KEYS + _NAME_SEP + " ".join(_check_text("message key", k, spaces=False) for k in keys))
    if tag is not None:
        _check_text("tag", tag, spaces=True)
        if "||" in tag or tag.strip() in ("", "*"):
            raise InvalidArgument(f"tag {tag!r} must not be '*' or contain '||'")
        parts.append(TAGS + _NAME_SEP + tag)
    if len(properties) > MAX_PROPERTIES:
        raise InvalidArgument(f"a message has at most {MAX_PROPERTIES} properties, got {len(properties)}")
    for name, value in properties.items():
        _check_text("property name", name, spaces=True)
        if name in RESERVED_PROPERTIES:
            raise InvalidArgument(f"property name {name!r} is reserved; use the message's keys and tag")
        if not isinstance(value, str) or _NAME_SEP in value or _PROP_SEP in value:
            raise InvalidArgument(f"property {name!r} must be a string without \\x01 or \\x02")
        parts.append(name + _NAME_SEP + value)
    encoded = (_PROP_SEP.join(parts) + _PROP_SEP).encode()
    if len(encoded) > MAX_PROPERTIES_BYTES:
        raise InvalidArgument(f"properties take {len(encoded)} bytes encoded; the limit is {MAX_PROPERTIES_BYTES}")
    return encoded


def decode_properties(raw: bytes) -> tuple[tuple[str, ...], str | None, dict[str, str]]:
    """Split encoded properties into (keys, tag, user properties)."""
    if not raw:
        return (), None, {}
    props = dict(pair.split(_NAME_SEP, 1) for pair in raw.decode().split(_PROP_SEP) if pair)
    keys = props.pop(KEYS, None)
    return (tuple(keys.split(" ")) if keys else ()), props.pop(TAGS, None), props


def check_properties(raw: bytes) -> tuple[tuple[str, ...], str | None]:
    """A producer's encoded properties, checked as `encode_properties` checks them when it encodes: (keys, tag),
    or InvalidArgument saying what is wrong (they must be exactly what `encode_properties` would have made)."""
    try:
        keys, tag, properties = decode_properties(raw)
    except (UnicodeDecodeError, ValueError):
        raise InvalidArgument("properties are not `name\\x01value\\x02` pairs of UTF-8 text") from None
    if encode_properties(keys, tag, properties) != raw:
        raise InvalidArgument("properties are not encoded as tidemq_protocol.record.encode_properties encodes them")
    return keys, tag


# ---- writing ---------------------------------------------------------------------------------------


class PendingRecord(NamedTuple):
    """One message ready to encode: everything but its position."""

    queue: int
    queue_offset: int
    born_timestamp: int
    properties: bytes
    body: bytes


def record_size(topic: bytes, properties: bytes, body: bytes) -> int:
    return HEADER_SIZE + len(topic) + len(properties) + len(body)


def _broker_part(flags: int, queue: int, queue_offset: int, physical_offset: int, store_timestamp: int) -> bytes:
    """Bytes [5, 38) of a version 2 record: the broker's fields and their CRC."""
    fields = _BROKER.pack(flags, queue, queue_offset, physical_offset, store_timestamp)
    return fields + _CRC.pack(crc32c(fields))


def encode_record(topic: bytes, queue: int, born_timestamp: int, properties: bytes, body: bytes) -> bytes:
    """A producer's record: the broker's fields zero but `queue` (a queue, or ANY_QUEUE), both CRCs computed."""
    covered = _COVERED.pack(born_timestamp, len(topic), len(properties), len(body))
    crc = crc32c(body, crc32c(properties, crc32c(topic, crc32c(covered))))
    head = _SIZE_MAGIC.pack(HEADER_SIZE + len(topic) + len(properties) + len(body), MAGIC)
    return b"".join((head, _broker_part(0, queue, 0, 0, 0), _CRC.pack(crc), covered, topic, properties, body))


def stamp(
    records: bytearray,
    sizes: Sequence[int],
    queues: Sequence[int],
    queue_offsets: Sequence[int],
    physical_start: int,
    store_timestamp: int,
) -> None:
    """The broker's part: write each version 2 record's queue, offset, position and store time in place, and flag
    the last one END_OF_BATCH (`records` holds them back to back, record i of `sizes[i]` bytes). CRCs stay as the
    producer made them."""
    position, last = 0, len(sizes) - 1
    for i, (size, queue, offset) in enumerate(zip(sizes, queues, queue_offsets, strict=True)):
        flags = END_OF_BATCH if i == last else 0
        records[position + _BROKER_AT : position + CRC_AT] = _broker_part(
            flags, queue, offset, physical_start + position, store_timestamp
        )
        position += size


def encode_batch(topic: bytes, records: list[PendingRecord], physical_start: int, store_timestamp: int) -> bytes:
    """Encode one put as consecutive version 2 records starting at `physical_start` (each `record_size` long)."""
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


class ProducedRecords(NamedTuple):
    """What the broker learns from a producer's records by checking them (`check_produced`), a column per field:
    record i is `sizes[i]` bytes long, asks for queue `queues[i]` (ANY_QUEUE: the broker's choice), and has encoded
    properties `properties[i]` (empty when none)."""

    sizes: list[int]
    queues: list[int]
    properties: list[bytes]


def check_produced(data: bytes | bytearray, topic: bytes, most: int) -> ProducedRecords:
    """Check a producer's version 2 records, back to back in `data`, for `topic`: InvalidArgument naming the first
    record that is cut short, not version 2, of another topic, or fails its CRC32C (a byte changed on the way);
    InvalidBatch beyond `most` records. Properties are returned as sent: `check_properties` judges them."""
    sizes, queues, properties = [], [], []
    view, unpack, end, position, topic_length = memoryview(data), HEADER.unpack_from, len(data), 0, len(topic)
    while position < end:
        index = len(sizes)
        if index == most:
            raise InvalidBatch(f"a batch holds at most {most} messages; this one holds more")
        if end - position < HEADER_SIZE:
            raise InvalidArgument(f"record {index} is cut short: {end - position} bytes, less than a header")
        size, magic, _, queue, _, _, _, broker_crc, crc, _, tlen, plen, blen = unpack(data, position)
        if magic != MAGIC:
            raise InvalidArgument(f"record {index} has magic {magic:#x}; producers send version 2 records ({MAGIC:#x})")
        if size != HEADER_SIZE + tlen + plen + blen or position + size > end:
            raise InvalidArgument(f"record {index} claims {size} bytes, which its lengths or the batch contradict")
        start = position + HEADER_SIZE
        if tlen != topic_length or view[start : start + tlen] != topic:
            raise InvalidArgument(f"record {index} is for another topic than {topic.decode()!r}")
        if crc32c(view[position + CRC_START : position + size]) != crc or (
            crc32c(view[position + _BROKER_AT : position + BROKER_CRC_AT]) != broker_crc
        ):
            raise InvalidArgument(
                f"record {index} fails its CRC32C check: a byte changed after the producer encoded it"
            )
        sizes.append(size)
        queues.append(queue)
        properties.append(bytes(view[start + tlen : start + tlen + plen]) if plen else b"")
        position += size
    return ProducedRecords(sizes, queues, properties)


# ---- reading ---------------------------------------------------------------------------------------


def _unpack(buf: bytes | bytearray | memoryview, pos: int) -> tuple:
    """(size, header_size, crc_start, crc, flags, queue, queue_offset, physical, born, stored, topic_length,
    properties_length, body_length) of the record at `pos`, either version (a version 2 record's broker fields
    checked against their CRC); CorruptStore for another magic."""
    magic = buf[pos + 4]
    if magic == MAGIC:
        size, _, flags, queue, offset, physical, stored, broker_crc, crc, born, tlen, plen, blen = HEADER.unpack_from(
            buf, pos
        )
        if crc32c(memoryview(buf)[pos + _BROKER_AT : pos + BROKER_CRC_AT]) != broker_crc:
            raise CorruptStore(f"record at buffer position {pos} fails the CRC32C check of its broker fields")
        return size, HEADER_SIZE, CRC_START, crc, flags, queue, offset, physical, born, stored, tlen, plen, blen
    if magic == MAGIC_V1:
        size, _, crc, flags, queue, offset, physical, born, stored, tlen, plen, blen = HEADER_V1.unpack_from(buf, pos)
        return size, HEADER_SIZE_V1, CRC_START_V1, crc, flags, queue, offset, physical, born, stored, tlen, plen, blen
    raise CorruptStore(f"record at buffer position {pos} has magic {magic:#x}, expected {MAGIC:#x} or {MAGIC_V1:#x}")


def _check(buf: bytes | bytearray | memoryview, pos: int, available: int) -> tuple:
    """Unpack (as `_unpack`) and verify the record at `pos`; raise CorruptStore if it is torn or damaged."""
    if available < SHORTEST_HEADER or (available < HEADER_SIZE and buf[pos + 4] == MAGIC):
        raise CorruptStore(f"record at buffer position {pos} is cut short")
    fields = _unpack(buf, pos)
    size = fields[0]
    if size != fields[1] + fields[10] + fields[11] + fields[12] or size > available:
        raise CorruptStore(f"record at buffer position {pos} has an inconsistent size {size}")
    if crc32c(memoryview(buf)[pos + fields[2] : pos + size]) != fields[3]:
        raise CorruptStore(f"record at buffer position {pos} fails its CRC32C check")
    return fields


def rebase(data: bytes, first_offset: int) -> bytes:
    """Records written with queue offsets 0, 1, ... given their real offsets first_offset, +1, ... (the
    serverless backend writes a batch before it knows where its queue puts it). Each record is checked first;
    a version 2 record's broker fields get a new CRC, a version 1 record a new CRC over all of it."""
    out = bytearray(data)
    view, position, index = memoryview(out), 0, 0
    while position < len(out):
        size = _check(out, position, len(out) - position)[0]
        if out[position + 4] == MAGIC:
            _OFFSET.pack_into(out, position + QUEUE_OFFSET_AT, first_offset + index)
            _CRC.pack_into(
                out, position + BROKER_CRC_AT, crc32c(view[position + _BROKER_AT : position + BROKER_CRC_AT])
            )
        else:
            _OFFSET.pack_into(out, position + _V1_QUEUE_OFFSET_AT, first_offset + index)
            _CRC.pack_into(out, position + 5, crc32c(view[position + CRC_START_V1 : position + size]))
        position += size
        index += 1
    view.release()
    return bytes(out)


def size_at(buf: bytes, pos: int = 0) -> int:
    """The total size the record at `pos` claims (its header alone, unverified: read the record, then check it)."""
    return _CRC.unpack_from(buf, pos)[0]


def store_timestamp_at(buf: bytes, pos: int = 0) -> int:
    """The store timestamp in the header of the record at `pos` (unverified)."""
    at = STORE_TIMESTAMP_AT if buf[pos + 4] == MAGIC else _V1_STORE_TIMESTAMP_AT
    return _OFFSET.unpack_from(buf, pos + at)[0]


def _physical_at(buf: bytes, pos: int = 0) -> int:
    """The physical offset in the header of the record at `pos` (unverified)."""
    at = PHYSICAL_AT if buf[pos + 4] == MAGIC else _V1_PHYSICAL_AT
    return _OFFSET.unpack_from(buf, pos + at)[0]


def max_record_size(max_message_bytes: int) -> int:
    """The largest record a store writes whose messages hold at most `max_message_bytes` of body and properties."""
    return HEADER_SIZE + MAX_TOPIC_BYTES + max_message_bytes


def read_by_id(msg_id: str, max_message_bytes: int, read: Callable[[int, int], bytes]) -> StoredMessage:
    """The message `msg_id` names, read with `read(physical_offset, length)` (the backend's files; OSError or
    CorruptStore where there is nothing). The size the id claims must be a record's the store could have written;
    the header at the position must name that very position and size before the rest is read; the whole record
    must pass its checks and carry that id. MessageNotFound otherwise: a forged id costs at most one header read
    and one read of `max_record_size`."""
    physical, size = parse_message_id(msg_id)
    if not SHORTEST_HEADER <= size <= max_record_size(max_message_bytes):
        raise MessageNotFound(f"with id {msg_id}")
    try:
        head = read(physical, SHORTEST_HEADER)
        if len(head) != SHORTEST_HEADER or size_at(head) != size or _physical_at(head) != physical:
            raise MessageNotFound(f"with id {msg_id}")
        message = decode_message(head + read(physical + SHORTEST_HEADER, size - SHORTEST_HEADER))
    except (OSError, CorruptStore):
        raise MessageNotFound(f"with id {msg_id}") from None
    if message.msg_id != msg_id:
        raise MessageNotFound(f"with id {msg_id}")
    return message


def message_id(physical_offset: int, size: int) -> str:
    return ((physical_offset << 32) | size).to_bytes(12, "big").hex()


def parse_message_id(msg_id: str) -> tuple[int, int]:
    """Return (physical_offset, size) from a message id, or raise MessageNotFound if it is not one."""
    if isinstance(msg_id, str) and len(msg_id) == 24:
        try:
            location = int.from_bytes(bytes.fromhex(msg_id), "big")
            return location >> 32, location & 0xFFFFFFFF
        except ValueError:
            pass
    raise MessageNotFound(f"with id {msg_id!r}: an id is 24 hexadecimal digits")


def decode_message(buf: bytes, pos: int = 0) -> StoredMessage:
    """Decode and verify the record at `pos` of `buf` into a StoredMessage."""
    (size, header, _, _, _, queue, queue_offset, physical, born, stored, tlen, plen, blen) = _check(
        buf, pos, len(buf) - pos
    )
    start = pos + header
    topic = buf[start : start + tlen].decode()
    start += tlen
    keys, tag, props = decode_properties(buf[start : start + plen]) if plen else ((), None, {})
    start += plen
    return StoredMessage(
        topic,
        queue,
        queue_offset,
        message_id(physical, size),
        born,
        stored,
        buf[start : start + blen],
        keys,
        tag,
        props,
    )


def decode_run(data: bytes, topic: str, queue: int, first_offset: int) -> list[StoredMessage]:
    """Decode adjacent records of one queue, verifying each and that they hold increasing offsets from
    first_offset (consecutive but where key compaction removed some)."""
    return decode_records(data, (topic, queue, first_offset))


def decode_records(data: bytes, expect: tuple[str, int, int] | None = None) -> list[StoredMessage]:
    """Decode and verify every record in `data` (records back to back, either version), in one pass. With `expect`
    = (topic, queue, first offset), also check that they are that queue's records at increasing offsets from there
    (consecutive but where key compaction removed some)."""
    expected_topic, expected_queue, expected = expect or ("", 0, 0)
    view, end_of_data = memoryview(data), len(data)
    unpack_v2, unpack_v1 = HEADER.unpack_from, HEADER_V1.unpack_from
    messages: list[StoredMessage] = []
    append = messages.append
    raw_topic, topic = b"", ""
    position = 0
    try:
        while position < end_of_data:
            magic = data[position + 4]
            if magic == MAGIC:
                (size, _, _, queue, offset, physical, stored, broker_crc, crc, born, tlen, plen, blen) = unpack_v2(
                    data, position
                )
                if crc32c(view[position + _BROKER_AT : position + BROKER_CRC_AT]) != broker_crc:
                    raise CorruptStore(f"record at commit-log position {physical} fails its broker fields' CRC32C")
                crc_start, header = CRC_START, HEADER_SIZE
            elif magic == MAGIC_V1:
                (size, _, crc, _, queue, offset, physical, born, stored, tlen, plen, blen) = unpack_v1(data, position)
                crc_start, header = CRC_START_V1, HEADER_SIZE_V1
            else:
                raise CorruptStore(f"record at batch position {position} has magic {magic:#x}")
            end = position + size
            if size != header + tlen + plen + blen or end > end_of_data:
                raise CorruptStore(f"record at commit-log position {physical} is damaged")
            if crc32c(view[position + crc_start : end]) != crc:
                raise CorruptStore(f"record at commit-log position {physical} fails its CRC32C check")
            start = position + header
            if data[start : start + tlen] != raw_topic:
                raw_topic = data[start : start + tlen]
                topic = raw_topic.decode()
            if expect is not None:
                if offset < expected or queue != expected_queue or topic != expected_topic:
                    raise CorruptStore(
                        f"ConsumeQueue entry {expected_topic}:{expected_queue}:{expected} "
                        "points at a record of another queue"
                    )
                expected = offset + 1
            start += tlen
            keys, tag, props = decode_properties(data[start : start + plen]) if plen else ((), None, {})
            msg_id = ((physical << 32) | size).to_bytes(12, "big").hex()
            append(
                StoredMessage(topic, queue, offset, msg_id, born, stored, data[start + plen : end], keys, tag, props)
            )
            position = end
    except (struct.error, IndexError):
        raise CorruptStore(f"record at batch position {position} is cut short") from None
    return messages


class VerifiedRecords(NamedTuple):
    """What `verify_records` found: how many records, and the offset after the last one (where the next run's
    records may start)."""

    records: int
    next_offset: int


def verify_records(data: bytes | bytearray, topic: str, queue: int, first_offset: int = 0) -> VerifiedRecords:
    """Check every record in `data` (records back to back, either version) as `decode_records` with `expect` checks
    them, building nothing: magic, sizes, both CRC32Cs, and that each is a record of `topic`'s queue `queue` at an
    offset increasing from `first_offset`; CorruptStore names the first that fails (its byte position in `data`).
    For a pass that copies records without reading them (segment compaction), where decoding every record's
    properties into a message would cost several times the checks."""
    raw_topic = topic.encode()
    topic_length, topic_is = len(raw_topic), data.startswith
    view, end_of_data, expected, count, position = memoryview(data), len(data), first_offset, 0, 0
    unpack_v2, unpack_v1 = _CHECKED.unpack_from, HEADER_V1.unpack_from
    try:
        while position < end_of_data:
            magic = data[position + 4]
            if magic == MAGIC:
                size, _, record_queue, offset, broker_crc, crc, tlen, plen, blen = unpack_v2(data, position)
                if crc32c(view[position + _BROKER_AT : position + BROKER_CRC_AT]) != broker_crc:
                    raise CorruptStore(f"record at byte {position} fails its broker fields' CRC32C")
                crc_start, header = CRC_START, HEADER_SIZE
            elif magic == MAGIC_V1:
                size, _, crc, _, record_queue, offset, _, _, _, tlen, plen, blen = unpack_v1(data, position)
                crc_start, header = CRC_START_V1, HEADER_SIZE_V1
            else:
                raise CorruptStore(f"record at byte {position} has magic {magic:#x}")
            end = position + size
            if size != header + tlen + plen + blen or end > end_of_data:
                raise CorruptStore(f"record at byte {position} is damaged")
            if crc32c(view[position + crc_start : end]) != crc:
                raise CorruptStore(f"record at byte {position} fails its CRC32C check")
            if (
                record_queue != queue
                or offset < expected
                or tlen != topic_length
                or not topic_is(raw_topic, position + header)
            ):
                raise CorruptStore(
                    f"record at byte {position} is not one of {topic}:{queue}'s at an offset from {expected}"
                )
            expected = offset + 1
            count += 1
            position = end
    except (struct.error, IndexError):
        raise CorruptStore(f"record at byte {position} is cut short") from None
    return VerifiedRecords(count, expected)


def read_header(buf: bytes, pos: int = 0) -> RecordHeader:
    """Decode and verify the record at `pos`, returning what indexing needs (no body copy)."""
    (size, header, _, _, flags, queue, queue_offset, physical, _, stored, tlen, plen, _) = _check(
        buf, pos, len(buf) - pos
    )
    start = pos + header
    keys, tag, _ = decode_properties(bytes(buf[start + tlen : start + tlen + plen])) if plen else ((), None, None)
    return RecordHeader(
        size, flags, queue, queue_offset, physical, stored, bytes(buf[start : start + tlen]).decode(), tag, keys
    )


def scan_batches(buf: bytes, base_position: int) -> Iterator[list[RecordHeader]]:
    """Yield each complete, intact batch in `buf` (which starts at commit-log position `base_position`).

    Stops silently at the first record that is torn, damaged, misplaced, or at a batch without its
    END_OF_BATCH record: that is where a crash cut the log, and everything from there is discarded.
    """
    pos, batch = 0, []
    while pos < len(buf):
        try:
            header = read_header(buf, pos)
        except CorruptStore:
            return
        if header.physical_offset != base_position + pos:
            return
        batch.append(header)
        pos += header.size
        if header.flags & END_OF_BATCH:
            yield batch
            batch = []
