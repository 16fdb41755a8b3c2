"""Consume function: read a queue from an offset, with tag filter and long polling."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.metrics import MetricUnit

from functions.api.auth import require
from functions.api.binary import binary_response
from functions.api.errors import responses
from functions.api.params import QueueInPath, TopicInPath
from functions.api.resolver import lambda_entry, new_resolver
from functions.logic.consume import consume, consume_records
from functions.observability import metrics
from functions.store import get_store
from shared.settings import get_settings
from tidemq_protocol import acl, codec
from tidemq_protocol.acl import Action
from tidemq_protocol.api.common import MAX_JSON_INTEGER, TagFilterText
from tidemq_protocol.api.messages import ConsumeResponse, MessageView
from tidemq_protocol.limits import MIB

app = new_resolver()
BINARY = {codec.CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}}
LIMITS = get_settings()

Offset = Annotated[int, Query(ge=0, le=MAX_JSON_INTEGER, description="First offset to read (outside the queue: 409).")]
MaxMessages = Annotated[int, Query(ge=1, le=LIMITS.max_get_messages)]
MaxBytes = Annotated[int, Query(ge=1, le=LIMITS.max_get_bytes)]
Tag = Annotated[TagFilterText | None, Query(description="Tag filter: `*`, or tags joined by `||`.")]
WaitMs = Annotated[
    int, Query(ge=0, le=LIMITS.max_get_wait_ms, description="Long polling: wait up to this long for a message.")
]

# The API's defaults, lowered to the limits when a deployment sets these lower.
JSON_MESSAGES = min(32, LIMITS.max_get_messages)
BINARY_MESSAGES = min(1000, LIMITS.max_get_messages)
READ_BYTES = min(4 * MIB, LIMITS.max_get_bytes)


@app.get("/v1/topics/<topic>/queues/<queue>/messages", tags=["messages"], responses=responses(404, 409, 503))
def consume_json(
    topic: TopicInPath,
    queue: QueueInPath,
    offset: Offset = 0,
    max_messages: MaxMessages = JSON_MESSAGES,
    max_bytes: MaxBytes = READ_BYTES,
    tag: Tag = None,
    wait_ms: WaitMs = 0,
) -> ConsumeResponse:
    require((acl.topic(topic), Action.SUB))
    result = consume(get_store(), topic, queue, offset, max_messages, max_bytes, tag, wait_ms)
    metrics.add_metric(name="MessagesConsumed", unit=MetricUnit.Count, value=len(result.messages))
    return ConsumeResponse.model_construct(
        messages=[MessageView.of(m) for m in result.messages],
        next_offset=result.next_offset,
        min_offset=result.min_offset,
        max_offset=result.max_offset,
    )


@app.get(
    "/v1/topics/<topic>/queues/<queue>/batch",
    tags=["messages"],
    responses=responses(
        404,
        409,
        503,
        ok_content=BINARY,
        description=f"A `{codec.CONTENT_TYPE}` consume batch (see tidemq_protocol/codec.py).",
    ),
    description="Like .../messages, in the compact binary batch encoding.",
)
def consume_binary(
    topic: TopicInPath,
    queue: QueueInPath,
    offset: Offset = 0,
    max_messages: MaxMessages = BINARY_MESSAGES,
    max_bytes: MaxBytes = READ_BYTES,
    tag: Tag = None,
    wait_ms: WaitMs = 0,
):
    require((acl.topic(topic), Action.SUB))
    batch = consume_records(get_store(), topic, queue, offset, max_messages, max_bytes, tag, wait_ms)
    metrics.add_metric(name="MessagesConsumed", unit=MetricUnit.Count, value=batch.count)
    return binary_response(codec.encode_consume(batch), codec.CONTENT_TYPE, app.current_event)


lambda_handler = lambda_entry(app)
