"""Consume function: read a queue from an offset, with a tag or SQL92 filter and long polling; or pop: receive
messages held for an invisible time, and ack them, change their invisible time or give them back."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.metrics import MetricUnit

from functions.api.auth import require
from functions.api.binary import binary_response
from functions.api.errors import responses
from functions.api.params import GroupInPath, QueueInPath, TopicInPath
from functions.api.pop_requests import ChangeInvisibleRequest, ReceiveRequest, ReleaseRequest
from functions.api.resolver import lambda_entry, new_resolver
from functions.logic import pop
from functions.logic.consume import consume, consume_records
from functions.observability import metrics
from functions.push.trigger import watch_moved_timers
from functions.store import get_store
from shared.settings import get_settings
from tidemq_protocol import acl, codec
from tidemq_protocol.acl import Action
from tidemq_protocol.api.common import MAX_JSON_INTEGER, SqlFilterText, TagFilterText
from tidemq_protocol.api.messages import ConsumeResponse, MessageView
from tidemq_protocol.api.pop import (
    AckRequest,
    AckResponse,
    AckResult,
    ChangeInvisibleResponse,
    ReceivedMessage,
    ReceiveResponse,
)
from tidemq_protocol.filter import MessageFilter, subscription_filter
from tidemq_protocol.limits import MIB
from tidemq_store import RecordBatch

app = new_resolver()
watch_moved_timers()  # a read of a DELAY topic moves its due timers (serverless)
BINARY = {codec.CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}}
LIMITS = get_settings()

Offset = Annotated[int, Query(ge=0, le=MAX_JSON_INTEGER, description="First offset to read (outside the queue: 409).")]
MaxMessages = Annotated[int, Query(ge=1, le=LIMITS.max_get_messages)]
MaxBytes = Annotated[int, Query(ge=1, le=LIMITS.max_get_bytes)]
Tag = Annotated[TagFilterText | None, Query(description="Tag filter: `*`, or tags joined by `||`.")]
Sql = Annotated[
    SqlFilterText | None,
    Query(
        description="SQL92 filter over message properties (docs/filters.md), instead of `tag`: with a `tag` that "
        "filters, or one that does not parse (InvalidFilterExpression, naming its `position`), a 400."
    ),
]
WaitMs = Annotated[
    int, Query(ge=0, le=LIMITS.max_get_wait_ms, description="Long polling: wait up to this long for a message.")
]

# The API's defaults, lowered to the limits when a deployment sets these lower.
JSON_MESSAGES = min(32, LIMITS.max_get_messages)
BINARY_MESSAGES = min(1000, LIMITS.max_get_messages)
READ_BYTES = min(4 * MIB, LIMITS.max_get_bytes)
READ_ERRORS = (400, 404, 409, 503)  # 400: a filter that does not parse, or both filters (the Sql parameter)


@app.get("/v1/topics/<topic>/queues/<queue>/messages", tags=["messages"], responses=responses(*READ_ERRORS))
def consume_json(
    topic: TopicInPath,
    queue: QueueInPath,
    offset: Offset = 0,
    max_messages: MaxMessages = JSON_MESSAGES,
    max_bytes: MaxBytes = READ_BYTES,
    tag: Tag = None,
    sql: Sql = None,
    wait_ms: WaitMs = 0,
) -> ConsumeResponse:
    require((acl.topic(topic), Action.SUB))
    chosen_by = subscription_filter(tag, sql)
    result = consume(get_store(), topic, queue, offset, max_messages, max_bytes, chosen_by, wait_ms)
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
        *READ_ERRORS,
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
    sql: Sql = None,
    wait_ms: WaitMs = 0,
):
    return binary_response(
        batch_bytes(topic, queue, offset, max_messages, max_bytes, tag, sql, wait_ms),
        codec.CONTENT_TYPE,
        app.current_event,
    )


def read_batch(
    topic: str,
    queue: int,
    offset: int,
    max_messages: int,
    max_bytes: int,
    chosen_by: MessageFilter | None,
    wait_ms: int,
) -> tuple[RecordBatch, MessageFilter | None]:
    """A binary read as the caller may make it (Sub on the topic), counted: the batch route's, and a stream's
    opening (servers/stream_opening.py)."""
    require((acl.topic(topic), Action.SUB))
    batch = consume_records(get_store(), topic, queue, offset, max_messages, max_bytes, chosen_by, wait_ms)
    metrics.add_metric(name="MessagesConsumed", unit=MetricUnit.Count, value=batch.count)
    return batch, chosen_by


def batch_bytes(
    topic: str,
    queue: int,
    offset: int,
    max_messages: int,
    max_bytes: int,
    tag: str | None,
    sql: str | None,
    wait_ms: int,
) -> bytes:
    """A binary consume batch (`codec.encode_consume`): what the batch route answers, for the resolver and for the
    long-running servers' lean dispatch (servers/lean.py) alike."""
    batch, _ = read_batch(topic, queue, offset, max_messages, max_bytes, subscription_filter(tag, sql), wait_ms)
    return codec.encode_consume(batch)


# ---- pop -----------------------------------------------------------------------------------------
# Each is Sub on the group and on the topic.

POP_ERRORS = (415, 400, 404, 409, 503)


@app.post("/v1/groups/<group>/topics/<topic>/receive", tags=["pop"], responses=responses(*POP_ERRORS))
def receive(group: GroupInPath, topic: TopicInPath, request: ReceiveRequest) -> ReceiveResponse:
    """Receive up to `max_messages` messages of the topic from any of its queues, each held for this consumer for
    `invisible_ms` and then delivered again (attempt + 1) unless acked first; a message the group holds is never
    delivered to two consumers at once."""
    acks, popped = _receive(group, topic, request)
    return ReceiveResponse.model_construct(
        messages=[ReceivedMessage.held(p.message, p.receipt_handle, p.attempt, p.invisible_until_ms) for p in popped],
        acks=acks,
    )


@app.post(
    "/v1/groups/<group>/topics/<topic>/receive/batch",
    tags=["pop"],
    responses=responses(
        *POP_ERRORS,
        ok_content={codec.RECEIVE_CONTENT_TYPE: BINARY[codec.CONTENT_TYPE]},
        description=f"A `{codec.RECEIVE_CONTENT_TYPE}` body (see tidemq_protocol/codec.py).",
    ),
    description="Like .../receive, the messages in the compact binary encoding (what the SDK uses).",
)
def receive_binary(group: GroupInPath, topic: TopicInPath, request: ReceiveRequest):
    return binary_response(receive_batch(group, topic, request), codec.RECEIVE_CONTENT_TYPE, app.current_event)


def receive_batch(group: str, topic: str, request: ReceiveRequest) -> bytes:
    """A binary receive's body (`codec.encode_receive`): what the route answers, for the resolver and for the
    long-running servers' lean dispatch (servers/lean.py) alike."""
    acks, popped = _receive(group, topic, request)
    return codec.encode_receive(popped, acks)


def _receive(group: str, topic: str, request: ReceiveRequest) -> tuple[list[str], list[pop.Popped]]:
    """What became of each delivery the request acks first, and what it receives then."""
    require((acl.group(group), Action.SUB), (acl.topic(topic), Action.SUB))
    chosen_by = subscription_filter(request.tag, request.sql)  # before the acks: a bad expression changes nothing
    acks, popped = pop.ack_and_receive(
        get_store(),
        LIMITS,
        group,
        topic,
        request.ack,
        request.max_messages,
        request.invisible_ms,
        request.wait_ms,
        chosen_by,
    )
    metrics.add_metric(name="MessagesConsumed", unit=MetricUnit.Count, value=len(popped))
    return acks, popped


@app.post("/v1/groups/<group>/topics/<topic>/ack", tags=["pop"], responses=responses(*POP_ERRORS))
def ack(group: GroupInPath, topic: TopicInPath, request: AckRequest) -> AckResponse:
    """Ack deliveries: each message is gone for the group for good. Each handle's result says what it became."""
    require((acl.group(group), Action.SUB), (acl.topic(topic), Action.SUB))
    statuses = pop.ack(get_store(), LIMITS, group, topic, request.receipt_handles)
    return AckResponse.model_construct(
        results=[
            AckResult.model_construct(receipt_handle=handle, status=status)
            for handle, status in zip(request.receipt_handles, statuses, strict=True)
        ]
    )


@app.post("/v1/groups/<group>/topics/<topic>/change-invisible", tags=["pop"], responses=responses(*POP_ERRORS))
def change_invisible(
    group: GroupInPath, topic: TopicInPath, request: ChangeInvisibleRequest
) -> ChangeInvisibleResponse:
    """Hold a delivery for `invisible_ms` from now, under a new receipt handle (the one sent is spent; a handle
    that names no current delivery is a 409, InvalidReceiptHandle, or MessageDeadLettered if its message went to the
    group's dead letters)."""
    require((acl.group(group), Action.SUB), (acl.topic(topic), Action.SUB))
    held = pop.change_invisible(get_store(), LIMITS, group, topic, request.receipt_handle, request.invisible_ms)
    return ChangeInvisibleResponse.model_construct(**held._asdict())


@app.post("/v1/groups/<group>/topics/<topic>/release", tags=["pop"], responses=responses(*POP_ERRORS, ok=204))
def release(group: GroupInPath, topic: TopicInPath, request: ReleaseRequest):
    """Give a delivery back: the message is delivered again after `delay_ms`, its next attempt; without a
    `delay_ms` (a nack), after the group's backoff for the attempt it was."""
    require((acl.group(group), Action.SUB), (acl.topic(topic), Action.SUB))
    pop.release(get_store(), LIMITS, group, topic, request.receipt_handle, request.delay_ms)
    return Response(204)


lambda_handler = lambda_entry(app)
