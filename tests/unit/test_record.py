"""The commit-log record format: what is written is read back, and damage is always detected."""

from __future__ import annotations

import pytest

from tidemq_protocol.errors import CorruptStore, InvalidArgument, MessageNotFound
from tidemq_protocol.record import (
    CRC_START,
    END_OF_BATCH,
    HEADER_SIZE,
    PendingRecord,
    decode_message,
    decode_properties,
    decode_run,
    encode_batch,
    encode_properties,
    message_id,
    parse_message_id,
    read_header,
    record_size,
    scan_batches,
    unwritten_at,
    verify_records,
)

from ..legacy_records import encode_v1_batch


def encode(n: int = 3, start: int = 1000, props: bytes = b"") -> tuple[bytes, list[int]]:
    records = [PendingRecord(2, 10 + i, 111, props, f"body-{i}".encode()) for i in range(n)]
    return encode_batch(b"orders", records, start, 222), [record_size(b"orders", r.properties, r.body) for r in records]


def test_records_decode_to_what_was_encoded():
    props = encode_properties(("k1", "k2"), "TagA", {"color": "blue", "note": "a b"})
    data, sizes = encode(props=props)
    assert len(data) == sum(sizes) and sizes[0] == HEADER_SIZE + len("orders") + len(props) + len("body-0")
    message = decode_message(data, sizes[0])
    assert (message.topic, message.queue, message.queue_offset) == ("orders", 2, 11)
    assert (message.born_timestamp, message.store_timestamp, message.body) == (111, 222, b"body-1")
    assert (message.keys, message.tag, message.properties) == (("k1", "k2"), "TagA", {"color": "blue", "note": "a b"})
    assert message.msg_id == message_id(1000 + sizes[0], sizes[1])


def test_only_the_last_record_of_a_put_ends_the_batch():
    data, sizes = encode()
    flags = [read_header(data, pos).flags for pos in (0, sizes[0], sizes[0] + sizes[1])]
    assert flags == [0, 0, END_OF_BATCH]


def test_a_run_of_records_decodes_with_offsets_checked():
    data, _ = encode()
    assert [m.queue_offset for m in decode_run(data, "orders", 2, 10)] == [10, 11, 12]
    with pytest.raises(CorruptStore, match="another queue"):
        decode_run(data, "orders", 2, 11)
    with pytest.raises(CorruptStore, match="another queue"):
        decode_run(data, "payments", 2, 10)


@pytest.mark.parametrize("position", [0, 4, 5, CRC_START, 20, 50, HEADER_SIZE, HEADER_SIZE + 3])
def test_any_flipped_byte_is_detected(position):
    data, _sizes = encode(n=1)
    damaged = bytearray(data)
    damaged[position] ^= 0x40
    with pytest.raises(CorruptStore):
        decode_message(bytes(damaged))
    with pytest.raises(CorruptStore):
        decode_run(bytes(damaged), "orders", 2, 10)
    assert list(scan_batches(bytes(damaged), 1000)) == []


def test_verifying_records_counts_them_and_says_where_the_next_offset_may_start():
    data, _ = encode()  # offsets 10, 11, 12 of orders:2
    assert verify_records(data, "orders", 2, 10) == (3, 13)
    assert verify_records(data, "orders", 2) == (3, 13)  # from offset 0: increasing is enough
    assert verify_records(b"", "orders", 2, 7) == (0, 7)
    old = encode_v1_batch(b"orders", [PendingRecord(2, 13 + i, 111, b"", b"old") for i in range(2)], 0, 222)
    assert verify_records(data + old, "orders", 2, 10) == (5, 15)  # version 1 records beside version 2


@pytest.mark.parametrize(("topic", "queue"), [("payments", 2), ("order", 2), ("orders", 3)])
def test_verifying_refuses_another_queues_records(topic, queue):
    data, _ = encode()
    with pytest.raises(CorruptStore, match=f"record at byte 0 is not one of {topic}:{queue}'s at an offset from 10"):
        verify_records(data, topic, queue, 10)


def test_verifying_refuses_offsets_that_do_not_increase():
    data, sizes = encode()
    with pytest.raises(CorruptStore, match="record at byte 0 is not one of orders:2's at an offset from 11"):
        verify_records(data, "orders", 2, 11)
    with pytest.raises(CorruptStore, match=f"record at byte {sizes[0]} is not one of orders:2's at an offset from 11"):
        verify_records(data[: sizes[0]] * 2, "orders", 2)  # offset 10 twice


@pytest.mark.parametrize("position", [0, 4, 5, 6, 10, 20, 30, 34, CRC_START, 45, 50, 52, HEADER_SIZE, -1])
def test_verifying_detects_any_flipped_byte_of_any_record(position):
    data, sizes = encode(n=3)
    at = sizes[0] + (position % sizes[1])  # in the middle record
    damaged = bytearray(data)
    damaged[at] ^= 0x04
    with pytest.raises(CorruptStore, match=f"record at byte {sizes[0]}"):
        verify_records(bytes(damaged), "orders", 2, 10)


def test_verifying_detects_a_cut_record():
    data, sizes = encode(n=2)
    for cut in (1, 5, HEADER_SIZE, sizes[1] - 1):
        with pytest.raises(CorruptStore, match=f"record at byte {sizes[0]}"):
            verify_records(data[: sizes[0] + cut], "orders", 2)


def test_scan_keeps_complete_batches_and_stops_at_a_torn_one():
    first, _ = encode(n=2, start=0)
    second, _ = encode(n=3, start=len(first))
    log = first + second
    assert [len(b) for b in scan_batches(log, 0)] == [2, 3]
    assert [len(b) for b in scan_batches(log[:-1], 0)] == [2]  # last record cut short
    cut = len(first) + (len(second) // 3) * 2  # whole records of an unfinished batch
    assert [len(b) for b in scan_batches(log[:cut], 0)] == [2]
    assert list(scan_batches(second, 0)) == []  # records claiming another position are not ours


def test_zeros_after_the_records_read_as_unwritten_and_end_a_scan():
    """A preallocated commit-log segment holds zeros after what was written: no record starts there."""
    first, sizes = encode(n=2, start=0)
    log = first + bytes(4096)
    assert [len(b) for b in scan_batches(log, 0)] == [2]
    assert unwritten_at(log, len(first)) and unwritten_at(log, len(log) - 3) and unwritten_at(log, len(log))
    assert not unwritten_at(log, 0) and not unwritten_at(log, sizes[0])
    assert not unwritten_at(b"\x01\x00\x00\x00")  # a size field of 1 (damage, not zeros)


def test_properties_round_trip_and_reject_what_cannot_be_encoded():
    assert decode_properties(encode_properties((), None, {})) == ((), None, {})
    assert decode_properties(encode_properties(("a",), None, {})) == (("a",), None, {})
    for keys, tag, props, problem in [
        (("has space",), None, {}, "spaces"),
        (("",), None, {}, "non-empty"),
        ("abc", None, {}, "list of strings"),
        ((), "A||B", {}, "'\\|\\|'"),
        ((), "*", {}, "'\\*'"),
        ((), None, {"KEYS": "x"}, "reserved"),
        ((), None, {"x": "a\x01b"}, "\\\\x01"),
        ((), None, {"x": 5}, "string"),
        ((), None, {"x": "y" * 40000}, "limit"),
    ]:
        with pytest.raises(InvalidArgument, match=problem):
            encode_properties(keys, tag, props)


def test_message_ids_locate_records():
    assert parse_message_id(message_id(123456789, 1100)) == (123456789, 1100)
    for bad in ["", "xyz", "g" * 24, 42]:
        with pytest.raises(MessageNotFound):
            parse_message_id(bad)
