"""Every read of a commit-log record, of either version: the version is told by its magic byte in one place,
`check_records`, and every record is checked there, the same way, before anything of it is used.

    record := total_size (4 bytes) magic (1 byte) ...          the rest as its version lays it out (v1.py, v2.py)

`check_records` goes through records back to back, LevelDB's way: for each it reads the magic byte, unpacks the
header as that version lays it out, and passes the record only if its header is all there, its magic names a
version (0xD1 or 0xD2), a version 2 record's broker fields pass their CRC32C, total_size equals the header's size
+ T + P + B and fits in what was read, and the CRC32C over the rest passes. It stops at the first record that
fails and says why (`Damage`). Every reader below starts there (a record, a run of a queue's records, a
recovery scan, rebase, and the broker's check of a producer's records in produced.py), then goes through the
records that passed, in order, and says what was wrong in its own words, after any fault of its own it finds in
the records before. A long run is checked and gone through a WINDOW at a time, while it is in the CPU's cache.

Recovery keeps records up to the last complete batch whose records all pass, and truncates the rest
(`scan_batches`: a torn put is never visible). No record has total_size 0, so a size field of zero is where a
file's unwritten zeros begin (`unwritten_at`: commit-log segments are zero-filled ahead of their writer).
The header peeks (`size_at`, `store_timestamp_at`) check nothing: they read one field of a header before the
rest of the record is read (read it, then check it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import NamedTuple

from crc32c import crc32c

from ..errors import CorruptStore, MessageNotFound
from ..message import StoredMessage
from . import v1, v2
from .ids import ID, message_id, parse_message_id
from .properties import MESSAGE_ID, decode_properties
from .view import RecordView

MAGIC_AT = 4  # every version's magic byte follows its total_size
SHORTEST_HEADER = v1.HEADER_SIZE
"""Every record's header is at least this long, and holds its size, magic, physical offset and store time."""
_SIZE = struct.Struct("<I")
_OFFSET = struct.Struct("<Q")
_LENGTHS = struct.Struct("<BH")  # topic_length, properties_length (TOPIC_LENGTH_AT of either version)
_unpack_v2, _unpack_v1 = v2.HEADER.unpack_from, v1.HEADER.unpack_from
_id_bytes = ID.pack
_READ_PAST_END = (IndexError, struct.error)  # what a record that ends too soon raises: no magic byte, or no header

Header = tuple[int, int, int, int, int, int, int, int | None, int, int, int, int, int]
"""A record's header fields as version 2 lays them out (v2.HEADER): size, magic, flags, queue, queue_offset,
physical_offset, store_timestamp, broker_crc, crc, born_timestamp, topic_length, properties_length, body_length.
A version 1 record's are put in that order, with broker_crc None (it has none)."""

WINDOW = 65_536
"""How many bytes of records a reader of a run checks before it goes through them: they are still in the CPU's
cache then (a run of a megabyte checked whole and then decoded would be read from memory twice)."""

CUT_SHORT, UNKNOWN_MAGIC, BROKER_CRC, SIZE, CRC = "cut short", "unknown magic", "broker CRC", "size", "CRC"


class Damage(NamedTuple):
    """Why `check_records` stopped at the record at `position`: `kind` (CUT_SHORT, UNKNOWN_MAGIC, BROKER_CRC, SIZE
    or CRC), with what it read of the header (None where it read none). A reader says it in its own words."""

    kind: str
    position: int
    magic: int | None = None
    physical: int | None = None
    size: int | None = None

    def told(self, words: Mapping[str, str], **more: object) -> str:
        """This damage in `words`: a format string for each kind, of position, magic, physical, size and `more`."""
        return words[self.kind].format(**self._asdict(), **more)


IN_BUFFER = {  # decode_message, read_header, rebase: a record named by its position in the buffer read
    CUT_SHORT: "record at buffer position {position} is cut short",
    UNKNOWN_MAGIC: f"record at buffer position {{position}} has magic {{magic:#x}}, expected {v2.MAGIC:#x} or "
    f"{v1.MAGIC:#x}",
    BROKER_CRC: "record at buffer position {position} fails the CRC32C check of its broker fields",
    SIZE: "record at buffer position {position} has an inconsistent size {size}",
    CRC: "record at buffer position {position} fails its CRC32C check",
}
IN_BATCH = {  # decode_records: a record named by the commit-log position its header claims, once one is read
    CUT_SHORT: "record at batch position {position} is cut short",
    UNKNOWN_MAGIC: "record at batch position {position} has magic {magic:#x}",
    BROKER_CRC: "record at commit-log position {physical} fails its broker fields' CRC32C",
    SIZE: "record at commit-log position {physical} is damaged",
    CRC: "record at commit-log position {physical} fails its CRC32C check",
}
AT_BYTE = {  # verify_records: a record named by its byte position in the records checked
    CUT_SHORT: "record at byte {position} is cut short",
    UNKNOWN_MAGIC: "record at byte {position} has magic {magic:#x}",
    BROKER_CRC: "record at byte {position} fails its broker fields' CRC32C",
    SIZE: "record at byte {position} is damaged",
    CRC: "record at byte {position} fails its CRC32C check",
}


def check_records(
    data: bytes | bytearray, position: int = 0, until: int | None = None
) -> tuple[list[tuple[ModuleType, Header]], Damage | None]:
    """Check the records back to back in `data` from `position`, those that start before `until` (default: the
    end of `data`; each must end within `data`): (version, header) of each that passes, in order (`version` the
    module of its layout, v1 or v2), and the Damage of the record after them, or None if there is none. A reader of
    a long run checks it a WINDOW at a time."""
    view, end = memoryview(data), len(data)
    stop = until if until is not None and until < end else end
    checked: list[tuple[ModuleType, Header]] = []
    while position < stop:
        try:
            magic = data[position + MAGIC_AT]
            if magic == v2.MAGIC:
                header = _unpack_v2(data, position)
                size, _, _, _, _, physical, _, broker_crc, crc, _, tlen, plen, blen = header
                # the broker's 29 bytes copied (quicker than a view of them); the rest viewed, never copied
                if crc32c(data[position + v2.BROKER_AT : position + v2.BROKER_CRC_AT]) != broker_crc:
                    return checked, Damage(BROKER_CRC, position, magic, physical, size)
                version = v2
            elif magic == v1.MAGIC:
                size, _, crc, flags, queue, offset, physical, born, stored, tlen, plen, blen = _unpack_v1(
                    data, position
                )
                header = (size, magic, flags, queue, offset, physical, stored, None, crc, born, tlen, plen, blen)
                version = v1
            else:
                return checked, Damage(UNKNOWN_MAGIC, position, magic)
        except _READ_PAST_END:
            return checked, Damage(CUT_SHORT, position)
        if size != version.HEADER_SIZE + tlen + plen + blen or size > end - position:
            return checked, Damage(SIZE, position, magic, physical, size)
        if crc32c(view[position + version.CRC_START : position + size]) != crc:
            return checked, Damage(CRC, position, magic, physical, size)
        checked.append((version, header))
        position += size
    return checked, None


# ---- one record ------------------------------------------------------------------------------------


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


def _check_one(buf: bytes, pos: int) -> tuple[ModuleType, Header]:
    """(version, header) of the record at `pos` once it passes its checks; CorruptStore naming it otherwise."""
    checked, damage = check_records(buf, pos, pos + 1)
    if not checked:
        raise CorruptStore((damage or Damage(CUT_SHORT, pos)).told(IN_BUFFER))
    return checked[0]


def decode_message(buf: bytes, pos: int = 0) -> StoredMessage:
    """Decode and verify the record at `pos` of `buf` into a StoredMessage."""
    return _decode_located(buf, pos)[0]


def _decode_located(buf: bytes, pos: int) -> tuple[StoredMessage, str]:
    """The record at `pos` decoded and verified, and the id of where it is (its message id unless it carries
    another, MESSAGE_ID: properties.py)."""
    version, (size, _, _, queue, offset, physical, stored, _, _, born, tlen, plen, _) = _check_one(buf, pos)
    start = pos + version.HEADER_SIZE
    topic = buf[start : start + tlen].decode()
    start += tlen
    keys, tag, props = decode_properties(buf[start : start + plen]) if plen else ((), None, {})
    body = buf[start + plen : pos + size]
    location = message_id(physical, size)
    msg_id = props.pop(MESSAGE_ID, None) or location  # a moved message keeps its id
    return StoredMessage(topic, queue, offset, msg_id, born, stored, body, keys, tag, props), location


def read_header(buf: bytes, pos: int = 0) -> RecordHeader:
    """Decode and verify the record at `pos`, returning what indexing needs (no body copy)."""
    version, (size, _, flags, queue, offset, physical, stored, _, _, _, tlen, plen, _) = _check_one(buf, pos)
    start = pos + version.HEADER_SIZE
    keys, tag, _ = decode_properties(bytes(buf[start + tlen : start + tlen + plen])) if plen else ((), None, None)
    topic = bytes(buf[start : start + tlen]).decode()
    return RecordHeader(size, flags, queue, offset, physical, stored, topic, tag, keys)


def size_at(buf: bytes, pos: int = 0) -> int:
    """The total size the record at `pos` claims (its header alone, unverified: read the record, then check it)."""
    return _SIZE.unpack_from(buf, pos)[0]


def unwritten_at(buf: bytes, pos: int = 0) -> bool:
    """Whether `buf` holds no record at `pos` but the zeros of a preallocated file (a size field of 0, or fewer
    bytes than one): where what was written ends."""
    return len(buf) - pos < _SIZE.size or _SIZE.unpack_from(buf, pos)[0] == 0


def _peeked_version(buf: bytes, pos: int) -> ModuleType:
    """The layout of the record at `pos` for a peek at one field, which checks nothing: any magic but version 2's
    is read as version 1 (`check_records` refuses an unknown one)."""
    return v2 if buf[pos + MAGIC_AT] == v2.MAGIC else v1


def store_timestamp_at(buf: bytes, pos: int = 0) -> int:
    """The store timestamp in the header of the record at `pos` (unverified)."""
    return _OFFSET.unpack_from(buf, pos + _peeked_version(buf, pos).STORE_TIMESTAMP_AT)[0]


def queue_offset_at(buf: bytes, pos: int = 0) -> int:
    """The queue offset in the header of the record at `pos` (unverified)."""
    return _OFFSET.unpack_from(buf, pos + _peeked_version(buf, pos).QUEUE_OFFSET_AT)[0]


def properties_at(buf: bytes, pos: int = 0) -> tuple[int, int]:
    """Where the properties of the record at `pos` lie in `buf`, [start, end) (unverified): for
    `properties.PropertiesView`, which reads them there."""
    version = _peeked_version(buf, pos)
    topic_length, properties_length = _LENGTHS.unpack_from(buf, pos + version.TOPIC_LENGTH_AT)
    start = pos + version.HEADER_SIZE + topic_length
    return start, start + properties_length


def record_starts(data: bytes) -> list[int]:
    """Where each of the records back to back in `data` starts, read from their size fields alone. A peek that
    checks only that the sizes tile `data` exactly (CorruptStore otherwise): for a reader that chooses among
    records by what it peeks at (a SQL92-filtered read, tidemq_store/reads.py) and checks those it chose, as every
    reader does, before it uses them."""
    starts: list[int] = []
    append, size_of = starts.append, _SIZE.unpack_from
    position, end = 0, len(data)
    while position < end:
        size = size_of(data, position)[0] if end - position >= SHORTEST_HEADER else 0
        if size < SHORTEST_HEADER:
            raise CorruptStore(f"record at byte {position} is cut short or has size {size}")
        append(position)
        position += size
    if position != end:
        raise CorruptStore(f"record at byte {starts[-1]} runs past the end of the records read")
    return starts


def _physical_at(head: bytes) -> int:
    """The physical offset in the record header `head` (unverified)."""
    return _OFFSET.unpack_from(head, _peeked_version(head, 0).PHYSICAL_AT)[0]


def read_by_id(msg_id: str, max_message_bytes: int, read: Callable[[int, int], bytes]) -> StoredMessage:
    """The message `msg_id` names, read with `read(physical_offset, length)` (the backend's files; OSError or
    CorruptStore where there is nothing). The size the id claims must be a record's the store could have written;
    the header at the position must name that very position and size before the rest is read; the whole record
    must pass its checks and be at that place. MessageNotFound otherwise: a forged id costs at most one header read
    and one read of `max_record_size`. A record that carries the id it was put again under (MESSAGE_ID) is found by
    where it is too, and reports that id."""
    physical, size = parse_message_id(msg_id)
    if not SHORTEST_HEADER <= size <= v2.max_record_size(max_message_bytes):
        raise MessageNotFound(f"with id {msg_id}")
    try:
        head = read(physical, SHORTEST_HEADER)
        if len(head) != SHORTEST_HEADER or size_at(head) != size or _physical_at(head) != physical:
            raise MessageNotFound(f"with id {msg_id}")
        message, location = _decode_located(head + read(physical + SHORTEST_HEADER, size - SHORTEST_HEADER), 0)
    except (OSError, CorruptStore):
        raise MessageNotFound(f"with id {msg_id}") from None
    if location != msg_id:
        raise MessageNotFound(f"with id {msg_id}")
    return message


# ---- runs of records -------------------------------------------------------------------------------


def rebase(data: bytes, first_offset: int) -> bytes:
    """Records written with queue offsets 0, 1, ... given their real offsets first_offset, +1, ... (the
    serverless backend writes a batch before it knows where its queue puts it). Every record is checked first,
    then given its offset and the CRC that covers it its new value (`write_queue_offset` of its version)."""
    checked, damage = check_records(data)
    if damage is not None:
        raise CorruptStore(damage.told(IN_BUFFER))
    out = bytearray(data)
    with memoryview(out) as view:
        position = 0
        for index, (version, header) in enumerate(checked):
            version.write_queue_offset(view, position, header[0], first_offset + index)
            position += header[0]
    return bytes(out)


def decode_run(data: bytes, topic: str, queue: int, first_offset: int) -> list[StoredMessage]:
    """Decode adjacent records of one queue, verifying each and that they hold increasing offsets from
    first_offset (consecutive but where key compaction removed some)."""
    return decode_records(data, (topic, queue, first_offset))


def decode_records(data: bytes, expect: tuple[str, int, int] | None = None) -> list[StoredMessage]:
    """Decode and verify every record in `data` (records back to back, either version), in one pass. With `expect`
    = (topic, queue, first offset), also check that they are that queue's records at increasing offsets from there
    (consecutive but where key compaction removed some)."""
    expected_topic, expected_queue, expected = expect or (None, None, None)
    messages: list[StoredMessage] = []
    raw_topic, topic = b"", ""
    end, end_of_data = 0, len(data)
    while end < end_of_data:
        checked, damage = check_records(data, end, end + WINDOW)
        for version, (size, _, _, queue, offset, physical, stored, _, _, born, tlen, plen, _) in checked:
            position, end = end, end + size
            start = position + version.HEADER_SIZE
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
            if plen:
                keys, tag, props = decode_properties(data[start : start + plen])
                msg_id = props.pop(MESSAGE_ID, None) or _id_bytes(physical, size).hex()  # a moved message keeps its id
            else:
                keys, tag, props = (), None, {}
                msg_id = _id_bytes(physical, size).hex()  # message_id(physical, size), without a call per message
            body = data[start + plen : end]
            messages.append(StoredMessage(topic, queue, offset, msg_id, born, stored, body, keys, tag, props))
        if damage is not None:
            raise CorruptStore(damage.told(IN_BATCH))
    return messages


def view_records(data: bytes, start: int = 0) -> list[StoredMessage]:
    """Verify every record in `data` from `start` (records back to back, either version) as `decode_records` does,
    and give a view of each (view.py) rather than decoding it: its body is taken, its other fields decoded when
    they are read. For a consumer of batches (`codec.decode_consume`), which reads every body and seldom anything
    else; `start` spares it a copy of a batch past its head."""
    views: list[StoredMessage] = []
    add = views.append
    end, end_of_data = start, len(data)
    while end < end_of_data:
        checked, damage = check_records(data, end, end + WINDOW)
        for version, header in checked:
            add(RecordView(data, end, header, version))
            end += header[0]
        if damage is not None:  # named by its position among the records, as decode_records names it
            raise CorruptStore(damage._replace(position=damage.position - start).told(IN_BATCH))
    return views


class VerifiedRecords(NamedTuple):
    """What `verify_records` found: how many records, and the offset after the last one (where the next run's
    records may start)."""

    records: int
    next_offset: int


def verify_records(data: bytes | bytearray, topic: str, queue: int, first_offset: int = 0) -> VerifiedRecords:
    """Check every record in `data` (records back to back, either version) as `decode_records` with `expect` checks
    them, building nothing: every check of `check_records`, and that each is a record of `topic`'s queue `queue`
    at an offset increasing from `first_offset`; CorruptStore names the first that fails (its byte position in
    `data`). For a pass that copies records without reading them (segment compaction), where decoding every
    record's properties into a message would cost several times the checks."""
    raw_topic = topic.encode()
    topic_length, topic_is = len(raw_topic), data.startswith
    expected, position, count, end_of_data = first_offset, 0, 0, len(data)
    while position < end_of_data:
        checked, damage = check_records(data, position, position + WINDOW)
        for version, (size, _, _, record_queue, offset, _, _, _, _, _, tlen, _, _) in checked:
            if (
                record_queue != queue
                or offset < expected
                or tlen != topic_length
                or not topic_is(raw_topic, position + version.HEADER_SIZE)
            ):
                raise CorruptStore(
                    f"record at byte {position} is not one of {topic}:{queue}'s at an offset from {expected}"
                )
            expected = offset + 1
            position += size
        count += len(checked)
        if damage is not None:
            raise CorruptStore(damage.told(AT_BYTE))
    return VerifiedRecords(count, expected)


def scan_batches(buf: bytes, base_position: int) -> Iterator[list[RecordHeader]]:
    """Yield each complete, intact batch in `buf` (which starts at commit-log position `base_position`).

    Stops silently at the first record that is torn, damaged, misplaced, or at a batch without its
    END_OF_BATCH record: that is where a crash cut the log, and everything from there is discarded. Records are
    checked as they are reached (a recovery window holds many megabytes of them).
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
        if header.flags & v2.END_OF_BATCH:
            yield batch
            batch = []
