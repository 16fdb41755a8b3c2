"""Every check of the record formats, condition by condition (tidemq_protocol/record/): each condition of a check
is met by an input wrong in that one respect only (every other field right, both CRCs made over the wrong bytes), so
weakening any one condition lets that input through; each bound is tried at its edge, on both sides."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from crc32c import crc32c

from tidemq_protocol import codec
from tidemq_protocol.errors import CorruptStore, InvalidArgument, InvalidBatch, MessageNotFound
from tidemq_protocol.record import (
    ANY_QUEUE,
    END_OF_BATCH,
    HEADER_SIZE,
    MAX_MESSAGE_GROUP,
    MAX_PROPERTIES,
    MAX_PROPERTIES_BYTES,
    MESSAGE_GROUP,
    SHORTEST_HEADER,
    PendingRecord,
    check_produced,
    check_properties,
    decode_message,
    decode_properties,
    decode_records,
    encode_batch,
    encode_properties,
    encode_record,
    max_record_size,
    message_id,
    parse_message_id,
    read_by_id,
    rebase,
    scan_batches,
    stamp,
    verify_records,
)
from tidemq_store import RecordBatch

from ..legacy_records import encode_v1_batch

SIZE = struct.Struct("<I")
QUEUE_AT = {2: 6, 1: 10}  # where each version keeps the queue id


def put(version: int, topic: bytes = b"orders", queue: int = 2, start: int = 0, body: int = 0) -> list[bytes]:
    """The two records of one put of `version` to `topic`:`queue` at offsets 10 and 11, split apart (bodies
    `body-0` and `body-1`, or of `body` bytes)."""
    bodies = [b"%d" % i * body if body else f"body-{i}".encode() for i in range(2)]
    pending = [PendingRecord(queue, 10 + i, 111, b"", bodies[i]) for i in range(2)]
    encode = encode_batch if version == 2 else encode_v1_batch
    data = encode(topic, pending, start, 222)
    first = SIZE.unpack_from(data)[0]
    return [data[:first], data[first:]]


def reseal(record: bytes | bytearray) -> bytes:
    """`record` with both CRCs made over its bytes as they are, as far as its own size says."""
    record, size = bytearray(record), SIZE.unpack_from(record)[0]
    if record[4] == 0xD1:
        struct.pack_into("<I", record, 5, crc32c(bytes(record[9:size])))
    else:
        struct.pack_into("<I", record, 34, crc32c(bytes(record[5:34])))
        struct.pack_into("<I", record, 38, crc32c(bytes(record[42:size])))
    return bytes(record)


def claiming(record: bytes, size: int) -> bytes:
    """`record` with its size field set to `size` (its lengths unchanged) and its CRCs made to match: the bytes
    it claims are there (a zero byte added if it claims more)."""
    data = bytearray(record.ljust(size, b"\0"))
    SIZE.pack_into(data, 0, size)
    return reseal(data)


def flipped(record: bytes, at: int) -> bytes:
    data = bytearray(record)
    data[at] ^= 0x10
    return bytes(data)


def with_magic(record: bytes, magic: int) -> bytes:
    return reseal(record[:4] + bytes([magic]) + record[5:])


def with_flags(record: bytes, version: int, flags: int) -> bytes:
    data = bytearray(record)
    data[5 if version == 2 else 9] = flags
    return reseal(data)


# ---- the broker's check of what a producer sends (check_produced) ---------------------------------------


def produced(queue: int = 2, body: bytes = b"body", topic: bytes = b"orders") -> bytes:
    return encode_record(topic, queue, 111, b"", body)


def test_a_batch_holds_at_most_the_number_of_records_allowed():
    assert len(check_produced(produced() * 3, b"orders", 3).sizes) == 3
    with pytest.raises(InvalidBatch, match="at most 2 messages"):
        check_produced(produced() * 3, b"orders", 2)


def test_a_produced_record_shorter_than_a_header_is_cut_short():
    record = produced(body=b"")  # a header and the topic: 63 bytes
    with pytest.raises(InvalidArgument, match="record 0 is cut short: 56 bytes"):
        check_produced(record[: HEADER_SIZE - 1], b"orders", 10)
    with pytest.raises(InvalidArgument, match="record 1 is cut short: 56 bytes"):
        check_produced(record + record[: HEADER_SIZE - 1], b"orders", 10)
    with pytest.raises(InvalidArgument, match=f"record 1 claims {len(record)} bytes"):
        check_produced(record + record[:HEADER_SIZE], b"orders", 10)  # a whole header: cut short no more


def test_a_produced_version_1_record_is_refused():
    (old, _) = put(1)
    with pytest.raises(InvalidArgument, match="record 0 has magic 0xd1; producers send version 2 records"):
        check_produced(old, b"orders", 10)


@pytest.mark.parametrize("change", [+1, -1])
def test_a_produced_record_whose_size_contradicts_its_lengths_is_refused(change):
    record = produced()
    with pytest.raises(InvalidArgument, match=f"record 0 claims {len(record) + change} bytes"):
        check_produced(claiming(record, len(record) + change), b"orders", 10)


def test_a_produced_record_longer_than_the_batch_is_refused():
    record = produced()
    with pytest.raises(InvalidArgument, match=f"record 1 claims {len(record)} bytes"):
        check_produced(record + record[:-1], b"orders", 10)


@pytest.mark.parametrize("topic", [b"orderz", b"order", b"orders-eu"])
def test_a_produced_record_of_another_topic_is_refused(topic):
    with pytest.raises(InvalidArgument, match="record 1 is for another topic than 'orders'"):
        check_produced(produced() + produced(topic=topic), b"orders", 10)


def test_a_produced_batch_names_the_first_wrong_record_though_a_later_one_is_damaged():
    with pytest.raises(InvalidArgument, match="record 0 is for another topic than 'orders'"):
        check_produced(produced(topic=b"orderz") + flipped(produced(), -1), b"orders", 10)
    with pytest.raises(InvalidBatch, match="at most 1 messages"):
        check_produced(produced() + flipped(produced(), -1), b"orders", 1)


@pytest.mark.parametrize(("part", "at"), [("its body", -1), ("its born timestamp", 42), ("the broker's fields", 6)])
def test_a_produced_record_with_any_part_changed_fails_its_crc(part, at):
    record = produced()
    with pytest.raises(InvalidArgument, match="record 1 fails its CRC32C check"):
        check_produced(record + flipped(record, at % len(record)), b"orders", 10)


def test_a_producers_record_is_pinned_byte_for_byte():
    """What a producer sends (the SDK encodes it): the broker's fields zero but the queue it asks for."""
    record = encode_record(b"orders", ANY_QUEUE, 1_700_000_000_006, b"KEYS\x01k\x02", b"p")
    fields = [  # offset: bytes, as the table in record/v2.py's docstring has them
        (0, "47000000"),  # total_size 71
        (4, "d2"),  # magic
        (5, "00"),  # flags
        (6, "ffffffff"),  # queue: ANY_QUEUE
        (10, "0000000000000000"),  # queue_offset
        (18, "0000000000000000"),  # physical_offset
        (26, "0000000000000000"),  # store_timestamp
        (34, "aeeac843"),  # broker_crc: CRC32C of bytes [5, 34)
        (38, "819a8e4d"),  # crc: CRC32C of bytes [42, 71)
        (42, "0668e5cf8b010000"),  # born_timestamp
        (50, "06"),  # topic_length
        (51, "0700"),  # properties_length
        (53, "01000000"),  # body_length
        (57, "6f7264657273"),  # topic: orders
        (63, "4b455953016b02"),  # properties: KEYS \x01 k \x02
        (70, "70"),  # body: p
    ]
    assert [(at, record[at : at + len(raw) // 2].hex()) for at, raw in fields] == fields
    assert len(record) == 71


# ---- reading one record (decode_message, read_header): `check_records` ----------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_a_record_shorter_than_the_shortest_header_is_cut_short(version):
    first, second = put(version)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} is cut short"):
        decode_message(first + second[: SHORTEST_HEADER - 1], len(first))


def test_a_version_2_record_shorter_than_its_header_is_cut_short():
    first, second = put(2)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} is cut short"):
        decode_message(first + second[: HEADER_SIZE - 1], len(first))
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} has an inconsistent size"):
        decode_message(first + second[:HEADER_SIZE], len(first))


def test_a_version_2_record_after_a_version_1_record_is_cut_short_inside_its_header():
    (old, _), (_, new) = put(1), put(2)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(old)} is cut short"):
        decode_message(old + new[: HEADER_SIZE - 1], len(old))


def test_a_record_of_an_unknown_version_cut_inside_a_header_is_of_an_unknown_version():
    first, second = put(2)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} has magic 0xd3"):
        decode_message(first + with_magic(second, 0xD3)[: HEADER_SIZE - 1], len(first))


def test_a_version_1_record_is_not_cut_short_once_its_shorter_header_is_there():
    first, second = put(1)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} has an inconsistent size"):
        decode_message(first + second[:SHORTEST_HEADER], len(first))


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("change", [+1, -1])
def test_a_record_whose_size_contradicts_its_lengths_is_inconsistent(version, change):
    first, second = put(version)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} has an inconsistent size"):
        decode_message(first + claiming(second, len(second) + change), len(first))


@pytest.mark.parametrize("version", [1, 2])
def test_a_record_longer_than_the_buffer_is_inconsistent(version):
    first, second = put(version)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} has an inconsistent size"):
        decode_message(first + second[:-1], len(first))


@pytest.mark.parametrize("version", [1, 2])
def test_a_record_with_a_payload_byte_changed_fails_its_crc(version):
    first, second = put(version)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} fails its CRC32C check"):
        decode_message(first + flipped(second, -1), len(first))


def test_a_version_2_record_with_a_broker_field_changed_fails_their_crc():
    first, second = put(2)
    with pytest.raises(CorruptStore, match="fails the CRC32C check of its broker fields"):
        decode_message(first + flipped(second, QUEUE_AT[2]), len(first))


@pytest.mark.parametrize("magic", [0x00, 0xD0, 0xD3])
def test_a_record_of_an_unknown_version_is_refused(magic):
    first, second = put(2)
    with pytest.raises(CorruptStore, match=f"record at buffer position {len(first)} has magic {magic:#x}"):
        decode_message(first + with_magic(second, magic), len(first))


# ---- reading runs of records (decode_records, verify_records) -----------------------------------------


def decode(data: bytes) -> object:
    return decode_records(data, ("orders", 2, 10))


def verify(data: bytes) -> object:
    return verify_records(data, "orders", 2, 10)


def consume(data: bytes) -> object:
    """The records as a consumer reads them, in a consume batch (views of them: record/view.py)."""
    return codec.decode_consume(codec.encode_consume(RecordBatch(data, 2, 12, 0, 12)))


READERS = {"decode_records": decode, "verify_records": verify, "decode_consume": consume}
DAMAGES: dict[str, Callable[[bytes, int], bytes]] = {
    "size one more than its lengths": lambda record, version: claiming(record, len(record) + 1),
    "size one less than its lengths": lambda record, version: claiming(record, len(record) - 1),
    "its last byte missing": lambda record, version: record[:-1],
    "a payload byte changed": lambda record, version: flipped(record, -1),
    "a broker field changed": lambda record, version: flipped(record, QUEUE_AT[version]),
    "an unknown magic": lambda record, version: with_magic(record, 0xD3),
    "a zeroed magic": lambda record, version: with_magic(record, 0x00),
}
FOUND = {  # what both readers say of each damage
    "size one more than its lengths": "is damaged",
    "size one less than its lengths": "is damaged",
    "its last byte missing": "is damaged",
    "a payload byte changed": "fails its CRC32C check",
    "a broker field changed": "fails its broker fields' CRC32C",
    "an unknown magic": "has magic 0xd3",
    "a zeroed magic": "has magic 0x0",
}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("reader", list(READERS))
def test_reading_a_run_finds_each_kind_of_damage_in_the_record_that_has_it(version, damage, reader):
    first, second = put(version)
    message = FOUND[damage]
    if version == 1 and damage == "a broker field changed":
        message = FOUND["a payload byte changed"]  # version 1's one CRC covers the broker's fields too
    if reader == "verify_records":
        place = f"byte {len(first)}"
    else:  # the decoders name a damaged record by the position it claims, verify_records where it found it
        place = f"batch position {len(first)}" if "magic" in message else f"commit-log position {len(first)}"
    with pytest.raises(CorruptStore, match=f"record at {place} {message}"):
        READERS[reader](first + DAMAGES[damage](second, version))


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("cut", [3, 5, SHORTEST_HEADER - 1])
def test_reading_a_run_cut_inside_a_header_says_so(reader, cut):
    first, second = put(2)
    place = f"byte {len(first)}" if reader == "verify_records" else f"batch position {len(first)}"
    with pytest.raises(CorruptStore, match=f"record at {place} is cut short"):
        READERS[reader](first + second[:cut])


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    "expect",
    [
        pytest.param(("orders", 2, 11), id="an offset below the next expected"),
        pytest.param(("orders", 3, 10), id="a higher queue"),
        pytest.param(("orders", 1, 10), id="a lower queue"),
        pytest.param(("orderz", 2, 10), id="another topic of the same length"),
        pytest.param(("order", 2, 10), id="a topic the records' starts with"),
    ],
)
def test_a_run_decoded_for_a_queue_refuses_a_record_wrong_in_one_respect(version, expect):
    first, second = put(version)
    assert [m.queue_offset for m in decode_records(first + second, ("orders", 2, 10))] == [10, 11]
    with pytest.raises(CorruptStore, match="points at a record of another queue"):
        decode_records(first + second, expect)


@pytest.mark.parametrize("version", [1, 2])
def test_a_run_refuses_a_record_repeated_and_allows_offsets_compaction_left_out(version):
    first, second = put(version)
    with pytest.raises(CorruptStore, match="points at a record of another queue"):
        decode_records(first + first, ("orders", 2, 10))
    with pytest.raises(CorruptStore, match="points at a record of another queue"):
        decode_records(second + second, ("orders", 2, 11))
    for twice in (first + first, second + second):
        with pytest.raises(CorruptStore, match=f"record at byte {len(twice) // 2} is not one of orders:2's"):
            verify_records(twice, "orders", 2, 10)
    assert [m.queue_offset for m in decode_records(second, ("orders", 2, 10))] == [11]
    assert verify_records(second, "orders", 2, 10) == (1, 12)


@pytest.mark.parametrize("version", [1, 2])
def test_a_run_longer_than_the_readers_check_at_a_time_is_read_whole_and_checked_to_its_end(version):
    encode = encode_batch if version == 2 else encode_v1_batch
    bodies = [bytes([i]) * 30_000 for i in range(5)]  # 150 kB: past 64 KiB and past 128 KiB
    data = encode(b"orders", [PendingRecord(2, 10 + i, 111, b"", body) for i, body in enumerate(bodies)], 0, 222)
    assert [(m.queue_offset, m.body) for m in decode_records(data, ("orders", 2, 10))] == list(enumerate(bodies, 10))
    assert verify_records(data, "orders", 2, 10) == (5, 15)
    fourth = 3 * (len(data) // 5)  # where the fourth record starts: all five are as long
    with pytest.raises(CorruptStore, match=f"record at commit-log position {fourth} fails its CRC32C check"):
        decode_records(flipped(data, fourth + len(data) // 5 - 1))
    with pytest.raises(CorruptStore, match=f"record at byte {fourth} fails its CRC32C check"):
        verify_records(flipped(data, fourth + len(data) // 5 - 1), "orders", 2, 10)


def test_verifying_no_records_finds_none_and_the_next_offset_where_it_was_to_start():
    assert verify_records(b"", "orders", 2) == (0, 0)
    assert verify_records(b"", "orders", 2, 10) == (0, 10)


@pytest.mark.parametrize("version", [1, 2])
def test_a_run_names_the_first_wrong_record_though_a_later_one_is_damaged(version):
    first, second = put(version)
    with pytest.raises(CorruptStore, match="points at a record of another queue"):
        decode_records(first + flipped(second, -1), ("orders", 3, 10))
    with pytest.raises(CorruptStore, match="record at byte 0 is not one of orders:3's"):
        verify_records(first + flipped(second, -1), "orders", 3, 10)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    ("topic", "queue", "first_offset"),
    [("orders", 2, 11), ("orders", 3, 10), ("orders", 1, 10), ("orderz", 2, 10), ("order", 2, 10), ("ordersx", 2, 10)],
)
def test_verifying_refuses_a_record_wrong_in_one_respect(version, topic, queue, first_offset):
    first, second = put(version)
    assert verify_records(first + second, "orders", 2, 10) == (2, 12)
    with pytest.raises(CorruptStore, match=f"record at byte 0 is not one of {topic}:{queue}'s"):
        verify_records(first + second, topic, queue, first_offset)


@pytest.mark.parametrize("version", [1, 2])
def test_verifying_refuses_a_topic_the_records_topic_is_a_prefix_of(version):
    record = encode_v1_batch if version == 1 else encode_batch
    data = record(b"orders", [PendingRecord(2, 10, 111, b"", b"x-body")], 0, 222)  # "orders" then "x-body"
    with pytest.raises(CorruptStore, match="record at byte 0 is not one of ordersx:2's"):
        verify_records(data, "ordersx", 2, 10)


def test_decoding_keeps_each_records_own_topic():
    (one, _), (other, _) = put(2, b"orders"), put(2, b"payments", start=0)
    assert [m.topic for m in decode_records(one + other + one)] == ["orders", "payments", "orders"]


# ---- giving records their offsets (rebase) ---------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_rebase_gives_each_record_its_offset_and_refuses_damage(version):
    first, second = put(version)
    rebased = rebase(first + second, 41)
    assert [m.queue_offset for m in decode_records(rebased, ("orders", 2, 41))] == [41, 42]
    assert len(rebased) == len(first + second)
    for damaged in (first + flipped(second, -1), *(first + second[:cut] for cut in range(1, HEADER_SIZE))):
        with pytest.raises(CorruptStore):
            rebase(damaged, 41)


# ---- finding a record by id (read_by_id) ------------------------------------------------------------


class Reads:
    """`read(position, length)` over bytes that remembers what it was asked."""

    def __init__(self, data: bytes) -> None:
        self.data, self.asked = data, []

    def __call__(self, position: int, length: int) -> bytes:
        self.asked.append((position, length))
        return self.data[position : position + length]


def test_the_largest_record_a_store_reads_by_id_holds_the_longest_topic_and_message():
    assert max_record_size(1000) == 57 + 127 + 1000


@pytest.mark.parametrize(
    ("size", "reads"),
    [(SHORTEST_HEADER - 1, False), (SHORTEST_HEADER, True), (1184, True), (1185, False)],
)
def test_an_id_naming_a_size_no_record_can_have_is_not_read(size, reads):
    records = Reads(b"".join(put(2)))
    with pytest.raises(MessageNotFound):
        read_by_id(message_id(0, size), 1000, records)  # the largest record: 1184 bytes
    assert records.asked == ([(0, SHORTEST_HEADER)] if reads else [])


def test_an_id_past_the_end_of_the_log_is_not_found():
    data = b"".join(put(2))
    for position in (len(data), len(data) - 2):
        with pytest.raises(MessageNotFound):
            read_by_id(message_id(position, 63), 1024, Reads(data))


def test_an_id_whose_size_the_header_does_not_name_reads_the_header_only():
    first, _ = put(2)
    records = Reads(first + first)
    with pytest.raises(MessageNotFound):
        read_by_id(message_id(0, len(first) + 1), 1024, records)
    assert records.asked == [(0, SHORTEST_HEADER)]


def test_an_id_whose_position_the_header_does_not_name_reads_the_header_only():
    first, _ = put(2)
    records = Reads(first + first)  # the second copy says it is at 0
    with pytest.raises(MessageNotFound):
        read_by_id(message_id(len(first), len(first)), 1024, records)
    assert records.asked == [(len(first), SHORTEST_HEADER)]


@pytest.mark.parametrize("error", [OSError("gone"), CorruptStore("past the end")])
def test_an_id_where_the_log_cannot_be_read_is_not_found(error):
    def failing(position: int, length: int) -> bytes:
        raise error

    with pytest.raises(MessageNotFound):
        read_by_id(message_id(0, 63), 1024, failing)


def test_a_found_record_is_read_whole_and_must_carry_the_id_as_written():
    first, second = put(2, start=1000)
    records = Reads(b"\0" * 1000 + first + second)
    found = read_by_id(message_id(1000 + len(first), len(second)), 1024, records)
    assert (found.queue_offset, found.body) == (11, b"body-1")
    position = 1000 + len(first)
    assert records.asked == [(position, SHORTEST_HEADER), (position + SHORTEST_HEADER, len(second) - SHORTEST_HEADER)]
    with pytest.raises(MessageNotFound):
        read_by_id(message_id(position, len(second)).upper(), 1024, records)  # ids are lowercase


def test_message_ids_are_position_then_size_in_24_lowercase_hex_digits():
    assert message_id(470, 87) == "00000000000001d600000057"
    assert parse_message_id("00000000000001d600000057") == (470, 87)
    assert parse_message_id("ffffffffffffffffffffffff") == (2**64 - 1, 2**32 - 1)
    for bad in ["0" * 23, "0" * 25, "0" * 26, "0" * 23 + "g", None]:
        with pytest.raises(MessageNotFound):
            parse_message_id(bad)


# ---- properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "tag", "properties", "encoded"),
    [
        ((), None, {}, b""),
        (("k",), None, {}, b"KEYS\x01k\x02"),
        ((), "T", {}, b"TAGS\x01T\x02"),
        ((), None, {"p": "v"}, b"p\x01v\x02"),
        (("a", "b"), "Tag A|B", {"p q": "", "r": "v w"}, b"KEYS\x01a b\x02TAGS\x01Tag A|B\x02p q\x01\x02r\x01v w\x02"),
        ((), None, {MESSAGE_GROUP: "order 7"}, b"__SHARDINGKEY\x01order 7\x02"),  # RocketMQ's name for it
    ],
)
def test_properties_encode_as_rocketmq_pairs_and_decode_back(keys, tag, properties, encoded):
    assert encode_properties(keys, tag, properties) == encoded
    assert decode_properties(encoded) == (keys, tag, properties)
    assert check_properties(encoded) == (keys, tag, properties.get(MESSAGE_GROUP), properties)


@pytest.mark.parametrize(
    ("keys", "tag", "properties", "problem"),
    [
        ((5,), None, {}, "message key must be a non-empty string"),
        (("",), None, {}, "message key must be a non-empty string"),
        (("a\x1fb",), None, {}, "must not contain control characters"),
        (("a\u00a0b",), None, {}, "or spaces"),
        ((), "\x1f", {}, "must not contain control characters"),
        ((), " ", {}, "must not be"),
        ((), " * ", {}, "must not be"),
        ((), "A||B", {}, "must not be"),
        ((), None, {"\x1f": "v"}, "must not contain control characters"),
        ((), None, {"TAGS": "v"}, "reserved"),
        ((), None, {"KEYS": "v"}, "reserved"),
        ((), None, {"p": 5}, "must be a string without"),
        ((), None, {"p": "a\x01b"}, "must be a string without"),
        ((), None, {"p": "a\x02b"}, "must be a string without"),
        ((), None, {MESSAGE_GROUP: ""}, "message_group must be a non-empty string"),
        ((), None, {MESSAGE_GROUP: "a\x1fb"}, "message_group .* must not contain control characters"),
        ((), None, {MESSAGE_GROUP: "g" * (MAX_MESSAGE_GROUP + 1)}, "the limit is 128"),
    ],
)
def test_properties_refuse_anything_wrong_in_one_respect(keys, tag, properties, problem):
    with pytest.raises(InvalidArgument, match=problem):
        encode_properties(keys, tag, properties)


def test_a_property_value_is_everything_after_the_first_separator():
    assert decode_properties(b"p\x01a\x01b\x02") == ((), None, {"p": "a\x01b"})
    with pytest.raises(InvalidArgument, match="property 'p' must be a string without"):
        check_properties(b"p\x01a\x01b\x02")


def test_a_message_holds_at_most_128_properties():
    assert encode_properties((), None, {f"p{i}": "" for i in range(MAX_PROPERTIES)}).count(b"\x02") == 128
    with pytest.raises(InvalidArgument, match="at most 128 properties, got 129"):
        encode_properties((), None, {f"p{i}": "" for i in range(MAX_PROPERTIES + 1)})


def test_encoded_properties_take_at_most_32767_bytes():
    longest = "v" * (MAX_PROPERTIES_BYTES - 3)  # p \x01 value \x02
    assert len(encode_properties((), None, {"p": longest})) == 32767
    with pytest.raises(InvalidArgument, match="take 32768 bytes encoded; the limit is 32767"):
        encode_properties((), None, {"p": longest + "v"})


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xff\x01v\x02", "not `name\\\\x01value\\\\x02` pairs"),
        (b"novalue\x02", "not `name\\\\x01value\\\\x02` pairs"),
        (b"p\x01v", "not encoded as"),
        (b"TAGS\x01T\x02KEYS\x01k\x02", "not encoded as"),
        (b"KEYS\x01\x02", "not encoded as"),
    ],
)
def test_a_producers_properties_must_be_encoded_exactly_as_the_store_encodes_them(raw, problem):
    with pytest.raises(InvalidArgument, match=problem):
        check_properties(raw)


# ---- values past one byte, flags, batches ---------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_records_and_queue_ids_past_one_byte_read_back(version):
    """Sizes, queue ids and offsets are compared by value, whatever their size."""
    first, second = put(version, queue=300, body=300)
    data = first + second
    assert len(first) > 256
    assert [(m.queue, m.queue_offset) for m in decode_records(data, ("orders", 300, 10))] == [(300, 10), (300, 11)]
    assert verify_records(data, "orders", 300, 10) == (2, 12)
    assert decode_message(data, len(first)).queue == 300
    assert read_by_id(message_id(len(first), len(second)), 1024, Reads(data)).body == b"1" * 300
    assert check_produced(produced(queue=300, body=b"b" * 300), b"orders", 10).queues == [300]
    assert [m.queue_offset for m in decode_records(rebase(data, 7), ("orders", 300, 7))] == [7, 8]


@pytest.mark.parametrize("version", [1, 2])
def test_only_bit_0_of_the_flags_ends_a_batch(version):
    first, second = put(version)
    assert [len(batch) for batch in scan_batches(first + with_flags(second, version, 0b11), 0)] == [2]
    assert list(scan_batches(first + with_flags(second, version, 0b10), 0)) == []


def test_a_scan_stops_silently_at_a_record_cut_inside_its_header():
    first, second = put(2)
    later = put(2, start=len(first + second))
    for cut in range(1, HEADER_SIZE):
        assert [len(batch) for batch in scan_batches(first + second + later[0][:cut], 0)] == [2]


def test_only_the_last_record_of_a_put_of_hundreds_ends_the_batch():
    pending = [PendingRecord(0, i, 111, b"", b"") for i in range(300)]
    (batch,) = scan_batches(encode_batch(b"orders", pending, 0, 222), 0)
    assert [header.flags for header in batch] == [0] * 299 + [END_OF_BATCH]


def test_a_batch_of_hundreds_of_produced_records_is_checked_against_its_limit():
    assert len(check_produced(produced() * 300, b"orders", 300).sizes) == 300
    with pytest.raises(InvalidBatch, match="at most 300 messages"):
        check_produced(produced() * 301, b"orders", 300)


def test_stamping_needs_a_queue_and_an_offset_for_every_record():
    first, second = put(2)
    with pytest.raises(ValueError):
        stamp(bytearray(first + second), [len(first), len(second)], [2], [10, 11], 0, 222)


def test_an_id_whose_position_is_below_the_one_its_header_names_reads_the_header_only():
    _, second = put(2)  # says it is at len(first)
    records = Reads(second)
    with pytest.raises(MessageNotFound):
        read_by_id(message_id(0, len(second)), 1024, records)
    assert records.asked == [(0, SHORTEST_HEADER)]


def test_an_id_naming_a_record_of_an_unknown_version_reads_the_header_only():
    first, second = put(2)
    records = Reads(first + with_magic(second, 0xD3))
    with pytest.raises(MessageNotFound):
        read_by_id(message_id(len(first), len(second)), 1024, records)
    assert records.asked == [(len(first), SHORTEST_HEADER)]
