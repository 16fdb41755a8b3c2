"""The consume batch as a client decodes it (`codec.decode_consume`): every record checked, each message a view of
its record (tidemq_protocol/record/view.py) that reads as the message decoded whole would."""

from __future__ import annotations

import copy
import gc
import pickle

import pytest

from tidemq_protocol import codec
from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.filter import TagFilter
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import (
    PendingRecord,
    decode_records,
    encode_batch,
    encode_properties,
    with_message_id,
)
from tidemq_store import RecordBatch

from ..legacy_records import encode_v1_batch

MOVED_ID = "0" * 8 + "ABCDEF01" + "00000042"


def records(version: int) -> bytes:
    """Three records of one put to orders:2 at offsets 10-12: one with keys, a tag and properties, one bare, one
    carrying an id of its own (a moved message's)."""
    pending = [
        PendingRecord(2, 10, 111, encode_properties(("k1", "k2"), "paid", {"region": "eu"}), b"first"),
        PendingRecord(2, 11, 112, b"", b""),
        PendingRecord(2, 12, 113, with_message_id(encode_properties((), "due", {}), MOVED_ID), b"third"),
    ]
    encode = encode_batch if version == 2 else encode_v1_batch
    return encode(b"orders", pending, 4096, 222)


def batch(data: bytes, count: int = 3) -> bytes:
    return codec.encode_consume(RecordBatch(data, count, 13, 0, 13))


@pytest.mark.parametrize("version", [1, 2])
def test_a_consumed_message_reads_as_the_record_decoded_whole(version):
    data = records(version)
    messages, next_offset, min_offset, max_offset = codec.decode_consume(batch(data))
    assert (next_offset, min_offset, max_offset) == (13, 0, 13)
    decoded = decode_records(data)
    assert messages == decoded and decoded == messages  # either way round
    for message, whole in zip(messages, decoded, strict=True):
        assert isinstance(message, StoredMessage)
        assert [getattr(message, name) for name in FIELDS] == [getattr(whole, name) for name in FIELDS]
        assert type(message.body) is bytes
    assert messages[2].msg_id == MOVED_ID and messages[2].tag == "due" and messages[2].properties == {}
    assert messages[0].keys == ("k1", "k2") and messages[0].tag == "paid" and messages[0].properties == {"region": "eu"}


FIELDS = [
    "topic",
    "queue",
    "queue_offset",
    "msg_id",
    "born_timestamp",
    "store_timestamp",
    "body",
    "keys",
    "tag",
    "properties",
]


@pytest.mark.parametrize("field", [name for name in FIELDS if name != "body"])
def test_a_consumed_messages_decoded_fields_are_read_only_and_it_gives_a_copy_to_change(field):
    message = codec.decode_consume(batch(records(2)))[0][0]
    with pytest.raises(AttributeError):
        setattr(message, field, getattr(message, field))
    mine = message.to_message()
    assert type(mine) is StoredMessage and mine == message
    setattr(mine, field, None)
    assert mine != message and getattr(message, field) is not None


def test_a_consumed_message_copied_or_pickled_is_the_message_not_its_batch():
    message = codec.decode_consume(batch(records(2)))[0][0]
    for again in (copy.copy(message), copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
        assert type(again) is StoredMessage and again == message


def test_a_tag_filter_keeps_only_the_messages_with_its_tag():
    messages = codec.decode_consume(batch(records(2)), TagFilter.parse("due"))[0]
    assert [m.queue_offset for m in messages] == [12]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("at", ["body", "properties", "topic"])
def test_a_consume_batch_with_a_byte_flipped_in_a_record_is_refused(version, at):
    data = bytearray(records(version))
    where = {"body": data.index(b"third") + 2, "properties": data.index(b"region"), "topic": data.rindex(b"orders")}
    data[where[at]] ^= 0x01
    with pytest.raises(CorruptStore, match="fails its CRC32C check"):
        codec.decode_consume(batch(bytes(data)))


def test_a_consume_batch_announcing_another_count_is_refused():
    with pytest.raises(CorruptStore, match="announced 4 messages and holds 3"):
        codec.decode_consume(batch(records(2), count=4))


def test_a_consumed_message_kept_does_not_keep_its_batch():
    data = batch(records(2))
    message = codec.decode_consume(data)[0][0]
    referred = [*gc.get_referents(message), *(r for part in gc.get_referents(message) for r in gc.get_referents(part))]
    assert referred and all(referent is not data for referent in referred)
    assert (message.topic, message.tag) == ("orders", "paid")
