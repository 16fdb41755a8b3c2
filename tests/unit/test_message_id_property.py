"""A record's MESSAGE_ID property (RocketMQ's UNIQ_KEY): the broker's way to give a record an id other than its
position's (a committed transactional message keeps its half message's id), which readers take as the message's
id, and which no producer may write (it would forge an id)."""

from __future__ import annotations

import pytest

from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.record import (
    MESSAGE_ID,
    check_properties,
    decode_message,
    decode_records,
    encode_properties,
    encode_record,
    encode_stored,
    message_id,
    with_message_id,
)
from tidemq_store import StoreConfig, TopicConfig
from tidemq_store.batch import validate_records

GIVEN = "8000000000000000000000aa"


def stored(properties: bytes, physical: int = 4096) -> bytes:
    return encode_stored(b"t", 0, 7, physical, 1_000, 999, properties, b"body")


def test_a_record_naming_an_id_is_read_with_that_id_and_without_the_property():
    raw = stored(with_message_id(encode_properties(("k",), "tag", {"p": "v"}), GIVEN))
    for message in (decode_message(raw), decode_records(raw)[0]):
        assert message.msg_id == GIVEN
        assert (message.keys, message.tag, message.properties) == (("k",), "tag", {"p": "v"})
    assert decode_message(stored(b"")).msg_id == message_id(4096, len(stored(b"")))  # others: their position's


def test_a_producer_cannot_give_a_message_an_id():
    with pytest.raises(InvalidArgument, match="reserved: the broker writes a message's id"):
        encode_properties((), None, {MESSAGE_ID: GIVEN})
    forged = with_message_id(b"", GIVEN)
    with pytest.raises(InvalidArgument):
        check_properties(forged)
    with pytest.raises(InvalidArgument, match="record 0"):  # records a producer encoded: the broker's check
        validate_records(StoreConfig(), TopicConfig(name="t", queues=1), encode_record(b"t", 0, 1, forged, b"x"), 0)
