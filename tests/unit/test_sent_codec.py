"""A produce's binary reply (tidemq_protocol/codec.py, `SENT_CONTENT_TYPE`): what the broker encodes from its put
results decodes to the same ids, queues, offsets, store times and recall handles, in order; damage is detected."""

from __future__ import annotations

import pytest

from tidemq_protocol import codec
from tidemq_protocol.errors import CorruptStore

SENT = [
    codec.Sent("0000000000000000000000a0", 3, 41, 1_795_000_000_123),
    codec.Sent("0000000000000000000001b0", 0, -1, 1_795_000_000_124, "T" * 300),  # a delay message, for later
    codec.Sent("a-serverless-id-of-another-length", 7, 2**40, 0),
]


def test_a_reply_decodes_to_the_results_it_was_made_of():
    assert codec.decode_sent(codec.encode_sent(SENT)) == SENT
    assert codec.decode_sent(codec.encode_sent([])) == []


@pytest.mark.parametrize("cut", [1, 5, 30])
def test_a_reply_cut_short_is_corrupt(cut):
    with pytest.raises(CorruptStore):
        codec.decode_sent(codec.encode_sent(SENT)[:-cut])


def test_bytes_past_the_results_are_corrupt():
    with pytest.raises(CorruptStore):
        codec.decode_sent(codec.encode_sent(SENT) + b"\x00")
