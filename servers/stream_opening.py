"""The opening of a streaming read (servers/stream.py serves the stream): its route on a resolver of its own, so that
the request is authenticated, validated, authorized and answered with the 4xx the batch route would give, by the
same code, and its first read done through the same logic. Imported when the first stream is asked for: the
consume function's parameters read the process's settings, which a server's command line sets first.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from functions.api.binary import binary_response
from functions.api.errors import responses
from functions.api.params import QueueInPath, TopicInPath
from functions.api.resolver import lambda_entry, new_resolver
from functions.consume.handler import (
    BINARY_MESSAGES,
    READ_BYTES,
    READ_ERRORS,
    MaxBytes,
    MaxMessages,
    Offset,
    Sql,
    Tag,
    read_batch,
)
from tidemq_protocol import codec, stream
from tidemq_protocol.filter import MessageFilter, subscription_filter

app = new_resolver()
FRAMES = {stream.CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}}


@dataclass(frozen=True, slots=True)
class Opening:
    """A stream the resolver accepted: what every later read of it reads, from `next_offset` on."""

    topic: str
    queue: int
    max_messages: int
    max_bytes: int
    chosen_by: MessageFilter | None
    next_offset: int


opened: contextvars.ContextVar[list[Opening] | None] = contextvars.ContextVar("tidemq_stream_opened", default=None)
"""Where the route puts the stream it accepted, for the server to follow (a list the server set in this context)."""


@app.get(
    "/v1/topics/<topic>/queues/<queue>/stream",
    tags=["messages"],
    responses=responses(
        *READ_ERRORS,
        ok_content=FRAMES,
        description=f"`{stream.CONTENT_TYPE}` frames, sent as messages are stored, for as long as the request is "
        "held open (see tidemq_protocol/stream.py); long-running servers only (a 404 behind API Gateway).",
    ),
    description="Like .../batch, streamed: each consume batch as soon as it is stored, from `offset` on.",
)
def open_stream(
    topic: TopicInPath,
    queue: QueueInPath,
    offset: Offset = 0,
    max_messages: MaxMessages = BINARY_MESSAGES,
    max_bytes: MaxBytes = READ_BYTES,
    tag: Tag = None,
    sql: Sql = None,
):
    batch, chosen_by = read_batch(topic, queue, offset, max_messages, max_bytes, subscription_filter(tag, sql), 0)
    accepted = opened.get()
    if accepted is not None:
        accepted.append(Opening(topic, queue, max_messages, max_bytes, chosen_by, batch.next_offset))
    return binary_response(codec.encode_consume(batch), stream.CONTENT_TYPE, app.current_event)


lambda_handler = lambda_entry(app)
"""The opening's entry point, as a function's (`Route.handler` finds it by this name): instrumented, authenticated."""
