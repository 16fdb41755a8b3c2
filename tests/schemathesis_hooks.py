"""Schemathesis hooks for TideMQ's API (`SCHEMATHESIS_HOOKS=tests.schemathesis_hooks st run ...`): how to send a body
in the binary batch encoding, which the document describes by what it holds (the messages of a JSON produce)."""

from __future__ import annotations

from typing import Any

import schemathesis
from pydantic import ValidationError

from shared import codec
from shared.models import ProduceRequest
from tidemq_store import Message
from tidemq_store.errors import InvalidArgument

CUT_SHORT = b"\x01\x00\x00\x00"
"""A frame that announces a byte and ends: what a request that is not a batch is sent as."""


@schemathesis.serializer(codec.CONTENT_TYPE)
def produce_batch(ctx: Any, value: Any) -> bytes:
    """The messages of a produce request, each one frame of `shared.codec`. A value that is no such request (a
    negative case's) has no encoding: it is sent as a batch cut short, which the server refuses like any other."""
    try:
        request = ProduceRequest.model_validate(value)
        frames = [
            (Message(m.body_bytes(), m.queue, tuple(m.keys), m.tag, m.properties), m.sharding_key)
            for m in request.messages
        ]
        return codec.encode_produce(frames)
    except (ValidationError, InvalidArgument):
        return CUT_SHORT
