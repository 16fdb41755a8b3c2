"""Commit-log record format, version 1 — the one module that reads and writes it.

A commit log is a sequence of records; a put of N messages writes N consecutive records with one
write(), the last one flagged END_OF_BATCH. All integers are little-endian.

    offset size  field
       0     4   total_size        bytes in the whole record, this field included
       4     1   magic             0xD1: record format version 1
       5     4   crc               CRC32C (Castagnoli) of bytes [9, total_size)
       9     1   flags             bit 0: END_OF_BATCH, the last record of one put
      10     4   queue             queue id within the topic
      14     8   queue_offset      the message's offset in its queue
      22     8   physical_offset   where this record starts in the commit log
      30     8   born_timestamp    ms since the epoch, set by the producer
      38     8   store_timestamp   ms since the epoch, set by the store; never decreases
      46     1   topic_length      T
      47     2   properties_length P
      49     4   body_length       B
      53     T   topic             UTF-8
    53+T     P   properties        UTF-8 `name\\x01value\\x02` pairs (RocketMQ's encoding);
                                   KEYS holds the message keys joined by spaces, TAGS the tag
  53+T+P     B   body

total_size must equal 53 + T + P + B. Every read checks magic, size and CRC; recovery keeps records up
to the last complete batch whose records all pass, and truncates the rest (a torn put is never visible).

A message id is where its record is: 24 lowercase hex digits, physical_offset (16) then total_size (8).
Ids come from clients, so a lookup trusts no part of one: `read_by_id` reads at most the largest record the
store writes, and only once the header found at that position names that position and size.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from crc32c import crc32c

from .cq_entry import CqEntries, pack_entry
from .errors import CorruptStore, InvalidArgument, MessageNotFound
from .model import StoredMessage, tag_hash

MAGIC = 0xD1
END_OF_BATCH = 0x01
HEADER = struct.Struct("<IBIBIQQQQBHI")
HEADER_SIZE = HEADER.size  # 53
CRC_START = 9
MAX_PROPERTIES_BYTES = 32767  # RocketMQ's Short.MAX_VALUE limit on encoded properties
MAX_PROPERTIES = 128  # user properties of one message, besides its keys and tag
MAX_TOPIC_BYTES = 127  # topic names are ASCII, at most 127 characters (model.NAME_RULE)

KEYS = "KEYS"
TAGS = "TAGS"
RESERVED_PROPERTIES = frozenset({KEYS, TAGS})
_NAME_SEP, _PROP_SEP = "\x01", "\x02"
_CRC = struct.Struct("<I")


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


class PendingRecord(NamedTuple):
    """One message ready to encode: everything but its position."""

    queue: int
    queue_offset: int
    born_timestamp: int
    properties: bytes
    body: bytes


_HEAD = struct.Struct("<IBI")  # total_size, magic, crc
_REST = struct.Struct("<BIQQQQBHI")  # flags .. body_length: the CRC'd part of the header


def record_size(topic: bytes, properties: bytes, body: bytes) -> int:
    return HEADER_SIZE + len(topic) + len(properties) + len(body)


def encode_batch(topic: bytes, records: list[PendingRecord], physical_start: int, store_timestamp: int) -> bytes:
    """Encode one put as consecutive records starting at `physical_start` (each `record_size` long)."""
    parts: list[bytes] = []
    fixed, topic_length, last = HEADER_SIZE + len(topic), len(topic), len(records) - 1
    pack_head, pack_rest = _HEAD.pack, _REST.pack
    position = physical_start
    for i, (queue, queue_offset, born, props, body) in enumerate(records):
        size = fixed + len(props) + len(body)
        flags = END_OF_BATCH if i == last else 0
        rest = (
            pack_rest(flags, queue, queue_offset, position, born, store_timestamp, topic_length, len(props), len(body))
            + topic
            + props
        )
        parts += (pack_head(size, MAGIC, crc32c(body, crc32c(rest))), rest, body)
        position += size
    return b"".join(parts)


def _check(buf: bytes | bytearray | memoryview, pos: int, available: int) -> tuple:
    """Unpack and verify the record at `pos`; raise CorruptStore if it is torn or damaged."""
    if available < HEADER_SIZE:
        raise CorruptStore(f"record at buffer position {pos} is cut short")
    fields = HEADER.unpack_from(buf, pos)
    size, magic, crc = fields[0], fields[1], fields[2]
    if magic != MAGIC:
        raise CorruptStore(f"record at buffer position {pos} has magic {magic:#x}, expected {MAGIC:#x}")
    if size != HEADER_SIZE + fields[9] + fields[10] + fields[11] or size > available:
        raise CorruptStore(f"record at buffer position {pos} has an inconsistent size {size}")
    if crc32c(memoryview(buf)[pos + CRC_START : pos + size]) != crc:
        raise CorruptStore(f"record at buffer position {pos} fails its CRC32C check")
    return fields


_OFFSET = struct.Struct("<Q")
QUEUE_OFFSET_AT = 14
PHYSICAL_AT = 22
STORE_TIMESTAMP_AT = 38


def rebase(data: bytes, first_offset: int) -> bytes:
    """Records written with queue offsets 0, 1, ... given their real offsets first_offset, +1, ... (the
    serverless backend writes a batch before it knows where its queue puts it). Each record's CRC is
    checked first, then recomputed over the new offset."""
    out = bytearray(data)
    position, index = 0, 0
    while position < len(out):
        size = _check(out, position, len(out) - position)[0]
        _OFFSET.pack_into(out, position + QUEUE_OFFSET_AT, first_offset + index)
        _CRC.pack_into(out, position + 5, crc32c(memoryview(out)[position + CRC_START : position + size]))
        position += size
        index += 1
    return bytes(out)


def size_at(buf: bytes, pos: int = 0) -> int:
    """The total size the record at `pos` claims (its header alone, unverified: read the record, then check it)."""
    return _HEAD.unpack_from(buf, pos)[0]


def store_timestamp_at(buf: bytes, pos: int = 0) -> int:
    """The store timestamp in the header of the record at `pos` (unverified)."""
    return _OFFSET.unpack_from(buf, pos + STORE_TIMESTAMP_AT)[0]


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
    if not HEADER_SIZE <= size <= max_record_size(max_message_bytes):
        raise MessageNotFound(f"with id {msg_id}")
    try:
        head = read(physical, HEADER_SIZE)
        if len(head) != HEADER_SIZE or size_at(head) != size or _OFFSET.unpack_from(head, PHYSICAL_AT)[0] != physical:
            raise MessageNotFound(f"with id {msg_id}")
        message = decode_message(head + read(physical + HEADER_SIZE, size - HEADER_SIZE))
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
    (size, _, _, _, queue, queue_offset, physical, born, stored, tlen, plen, blen) = _check(buf, pos, len(buf) - pos)
    start = pos + HEADER_SIZE
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
    """Decode adjacent records of one queue, verifying each and that they hold offsets first_offset, +1, ..."""
    return decode_records(data, (topic, queue, first_offset))


def decode_records(data: bytes, expect: tuple[str, int, int] | None = None) -> list[StoredMessage]:
    """Decode and verify every record in `data` (records back to back). With `expect` = (topic,
    queue, first offset), also check that they are that queue's records at consecutive offsets."""
    expected_topic, expected_queue, expected = expect or ("", 0, 0)
    view, unpack, end_of_data = memoryview(data), HEADER.unpack_from, len(data)
    messages: list[StoredMessage] = []
    append = messages.append
    raw_topic, topic = b"", ""
    position = 0
    try:
        while position < end_of_data:
            (size, magic, crc, _, queue, offset, physical, born, stored, tlen, plen, blen) = unpack(data, position)
            end = position + size
            if magic != MAGIC or size != HEADER_SIZE + tlen + plen + blen or end > end_of_data:
                raise CorruptStore(f"record at commit-log position {physical} is damaged")
            if crc32c(view[position + CRC_START : end]) != crc:
                raise CorruptStore(f"record at commit-log position {physical} fails its CRC32C check")
            start = position + HEADER_SIZE
            if data[start : start + tlen] != raw_topic:
                raw_topic = data[start : start + tlen]
                topic = raw_topic.decode()
            if expect is not None:
                if offset != expected or queue != expected_queue or topic != expected_topic:
                    raise CorruptStore(
                        f"ConsumeQueue entry {expected_topic}:{expected_queue}:{expected} "
                        "points at a record of another queue"
                    )
                expected += 1
            start += tlen
            keys, tag, props = decode_properties(data[start : start + plen]) if plen else ((), None, {})
            msg_id = ((physical << 32) | size).to_bytes(12, "big").hex()
            append(
                StoredMessage(topic, queue, offset, msg_id, born, stored, data[start + plen : end], keys, tag, props)
            )
            position = end
    except struct.error:
        raise CorruptStore(f"record at batch position {position} is cut short") from None
    return messages


def read_header(buf: bytes, pos: int = 0) -> RecordHeader:
    """Decode and verify the record at `pos`, returning what indexing needs (no body copy)."""
    (size, _, _, flags, queue, queue_offset, physical, _, stored, tlen, plen, _) = _check(buf, pos, len(buf) - pos)
    start = pos + HEADER_SIZE
    keys, tag, _ = decode_properties(bytes(buf[start + tlen : start + tlen + plen])) if plen else ((), None, None)
    return RecordHeader(
        size, flags, queue, queue_offset, physical, stored, bytes(buf[start : start + tlen]).decode(), tag, keys
    )


def entries_of(data: bytes) -> CqEntries:
    """The ConsumeQueue entries of the records in `data` (verified records back to back), positions counted from
    the start of `data`."""
    packed, position = [], 0
    while position < len(data):
        header = read_header(data, position)
        packed.append(pack_entry(position, header.size, tag_hash(header.tag), header.store_timestamp))
        position += header.size
    return CqEntries(b"".join(packed))


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
