"""The binary body of a pop receive (tidemq_protocol/codec.py): what the broker encodes from the messages it read
decodes to the same messages, ids, handles, attempts and invisible times, with the acks made first; a record made
again is the stored one; damage is detected."""

from __future__ import annotations

import pytest

from tidemq_protocol import codec
from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.record import PendingRecord, decode_records, encode_batch, encode_properties

from ..legacy_records import encode_v1_batch

PROPS = encode_properties(("k1", "k2"), "TagA", {"color": "blue"})


def stored(encode=encode_batch) -> list:
    records = [PendingRecord(3, 40 + i, 111, PROPS if i % 2 else b"", b"\x00\xff body %d" % i) for i in range(3)]
    return decode_records(encode(b"orders", records, 4096, 222))


def delivered(messages) -> list[codec.Received]:
    return [codec.Received(m, f"A{i:027d}", i + 1, 10_000 + i) for i, m in enumerate(messages)]


@pytest.mark.parametrize("encode", [encode_batch, encode_v1_batch], ids=["v2", "v1"])
def test_a_receive_decodes_to_what_was_delivered_and_acked(encode):
    deliveries = delivered(stored(encode))
    acks = ["acked", "invalid_receipt_handle", "dead_lettered", "already_acked"]
    data = codec.encode_receive(deliveries, acks)
    assert codec.decode_receive(data) == (acks, deliveries)


def test_a_version_2_record_is_sent_as_stored_but_its_end_of_batch_flag():
    records = [PendingRecord(3, 40, 111, PROPS, b"one")]
    data = encode_batch(b"orders", records, 4096, 222)
    body = codec.encode_receive(delivered(decode_records(data)))
    assert body[-len(data) :][:5] == data[:5] and body[-len(data) :][38:] == data[38:]  # CRC and all after it


def test_an_empty_receive_decodes_to_nothing():
    assert codec.decode_receive(codec.encode_receive([])) == ([], [])


@pytest.mark.parametrize("cut", [1, 9, 30, 60])
def test_a_body_cut_short_or_damaged_is_refused(cut):
    data = codec.encode_receive(delivered(stored()), ["acked"])
    with pytest.raises(CorruptStore):
        codec.decode_receive(data[:-cut])
    damaged = bytearray(data)
    damaged[-cut] ^= 0x40
    with pytest.raises(CorruptStore):
        codec.decode_receive(bytes(damaged))


def test_a_message_with_a_clients_own_id_is_received_with_it():
    """A RocketMQ client's message id (34 hexadecimal digits) says where no record is: the record carries it."""
    client_id = "0102FC0000000141DB0B28756200000006"
    (message,) = stored()[:1]
    message.msg_id = client_id
    deliveries = delivered([message])
    (received,) = codec.decode_receive(codec.encode_receive(deliveries)).received
    assert received == deliveries[0] and received.message.msg_id == client_id
