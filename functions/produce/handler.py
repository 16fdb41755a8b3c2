"""Produce function: store a batch of messages, as JSON or in the compact binary batch encoding, and tell
this process's push notifier (`functions.push.trigger.push_notifier`); recall a delay message before it is due;
transactional messages: send a half message, end it, and a producer group's long poll for its check-backs
(functions/logic/transactions.py)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, NamedTuple

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.metrics import MetricUnit

from functions.api.auth import require
from functions.api.binary import binary_response, request_bytes
from functions.api.errors import responses, unsupported_media_type
from functions.api.params import GroupInPath, IdempotencyKey, MessageIdInPath, TopicInPath
from functions.api.resolver import lambda_entry, new_resolver
from functions.logic import produce, transactions
from functions.observability import metrics
from functions.push.trigger import push_notifier, watch_moved_timers
from functions.store import get_store
from shared.settings import get_settings
from tidemq_protocol import acl, codec
from tidemq_protocol.acl import Action
from tidemq_protocol.api.messages import ProduceRequest, ProduceResponse, RecallRequest, RecallResponse
from tidemq_protocol.api.transactions import (
    MOST_CHECKS,
    EndTransactionRequest,
    HalfMessageRequest,
    TransactionChecks,
    TransactionView,
)
from tidemq_protocol.errors import InvalidArgument
from tidemq_store import PutResult

app = new_resolver()
watch_moved_timers()  # the embedded engine's mover runs in this process


@app.post("/v1/topics/<topic>/messages", tags=["messages"], responses=responses(415, 400, 404, 409, 413, 503))
def produce_json(
    topic: TopicInPath, request: ProduceRequest, idempotency_key: IdempotencyKey = None
) -> ProduceResponse:
    """Store a batch atomically; each message's id, queue and offset come back in order. With an Idempotency-Key,
    a batch sent again is stored once (docs/producing.md)."""
    require((acl.topic(topic), Action.PUB))
    response = produce.produce_json(get_store(), topic, request.messages, push_notifier(), idempotency_key)
    metrics.add_metric(name="MessagesProduced", unit=MetricUnit.Count, value=len(response.messages))
    return response


@app.post(
    "/v1/topics/<topic>/batch",
    tags=["messages"],
    responses=responses(
        415,
        400,
        404,
        409,
        413,
        503,
        ok_content={
            "text/plain": {"schema": {"type": "string"}},
            codec.SENT_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}},
        },
        description="One line `msg_id queue offset` per message, in order; a delay message sent for later has offset"
        " -1 and its recall handle after it (`msg_id queue -1 recall_handle`). With `Accept:"
        f" {codec.SENT_CONTENT_TYPE}`, the same and each message's store time in binary (tidemq_protocol/codec.py).",
    ),
    description=(
        f"Body: `{codec.RECORDS_CONTENT_TYPE}` (records the store appends as they are) or `{codec.CONTENT_TYPE}`"
        " (frames), see tidemq_protocol/codec.py."
    ),
    # Powertools declares JSON bodies only; this route reads its own. OpenAPI describes a body by what it holds,
    # each media type by its own encoding: here the messages of a JSON produce, each one frame of
    # tidemq_protocol/codec.py.
    openapi_extensions={
        "requestBody": {
            "required": True,
            "content": {codec.CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/ProduceRequest"}}},
        }
    },
)
def produce_binary(topic: TopicInPath, idempotency_key: IdempotencyKey = None):
    event = app.current_event
    headers = event.headers
    sent = send_batch(topic, headers.get("content-type", ""), lambda: request_bytes(event), idempotency_key)
    return batch_reply(sent, headers.get("accept", ""), partial(binary_response, event=event))


def send_batch(topic: str, content_type: str, body: Callable[[], bytes], idempotency_key: str | None) -> BatchSent:
    """Store a binary batch (`body`: its bytes, read once the caller may publish to the topic): what the batch
    route does, for the resolver and for the long-running servers' lean dispatch (servers/lean.py) alike."""
    require((acl.topic(topic), Action.PUB))
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type == codec.RECORDS_CONTENT_TYPE:
        results = produce.produce_records(get_store(), topic, body(), push_notifier(), idempotency_key)
    elif media_type == codec.CONTENT_TYPE:
        frames = codec.decode_produce(body(), get_settings())
        if not frames:
            raise InvalidArgument("the batch holds no messages")
        results = produce.produce_frames(get_store(), topic, frames, push_notifier(), idempotency_key)
    else:
        return BatchSent(content_type, None)
    metrics.add_metric(name="MessagesProduced", unit=MetricUnit.Count, value=len(results))
    return BatchSent(content_type, results)


class BatchSent(NamedTuple):
    """What became of a binary batch: where each message went, or None for a body of a type the route does not take."""

    content_type: str
    results: list[PutResult] | None


def batch_reply(sent: BatchSent, accept: str, binary: Callable[[bytes, str], Response]) -> Response:
    """The answer to a binary batch: a line per message, or (`accept` naming it) the binary reply `binary` makes;
    a 415 for a body of a type the route does not take."""
    if sent.results is None:
        return unsupported_media_type(sent.content_type)
    accepted = {media.partition(";")[0].strip().lower() for media in accept.split(",")}
    if codec.SENT_CONTENT_TYPE in accepted:
        return binary(codec.encode_sent(sent.results), codec.SENT_CONTENT_TYPE)
    return Response(200, content_types.TEXT_PLAIN, "".join(produce.result_line(r) for r in sent.results))


@app.post("/v1/topics/<topic>/recall", tags=["messages"], responses=responses(415, 404, 409))
def recall(topic: TopicInPath, request: RecallRequest) -> RecallResponse:
    """Recall a delay message before it is due, by the handle its produce answered: it is then never delivered
    (RocketMQ 5.3's RecallMessage). A publish to the topic, as the ACL has it. 404: the handle names none of the
    topic's timer messages; 409: too late, it was delivered."""
    require((acl.topic(topic), Action.PUB))
    return produce.recall(get_store(), topic, request.recall_handle)


# ---- transactional messages ----------------------------------------------------------------------
# Each is Pub on the topic: who may send to it may end its transactions and see and answer their check-backs (a
# producer group is no ACL resource: it only says which producers a check-back goes to).


@app.post("/v1/topics/<topic>/transactions", tags=["transactions"], responses=responses(415, 400, 404, 409, 413, 503))
def send_half(
    topic: TopicInPath, request: HalfMessageRequest, idempotency_key: IdempotencyKey = None
) -> TransactionView:
    """Send a half message: stored, invisible to every consumer until its transaction is committed (then visible
    once, with this id); checked back with its producer group if not ended within the transaction timeout. With an
    Idempotency-Key, sent again it is answered its transaction as it is now, and nothing is prepared."""
    require((acl.topic(topic), Action.PUB))
    settings = get_settings()
    store = get_store()
    sent = transactions.send_half(store, settings, topic, request.producer_group, request, idempotency_key)
    metrics.add_metric(name="HalfMessagesSent", unit=MetricUnit.Count, value=1)
    return transactions.view(sent)


@app.post(
    "/v1/topics/<topic>/transactions/<msg_id>", tags=["transactions"], responses=responses(415, 400, 404, 409, 503)
)
def end_transaction(topic: TopicInPath, msg_id: MessageIdInPath, request: EndTransactionRequest) -> TransactionView:
    """Commit or roll back (or answer unknown to a check-back). Sent again, an end changes nothing; a commit after a
    rollback, or the reverse, is a 409."""
    require((acl.topic(topic), Action.PUB))
    ended = transactions.end(get_store(), push_notifier(), topic, msg_id, request.resolution, request.check)
    return transactions.view(ended)


WaitMs = Annotated[
    int,
    Query(ge=0, le=get_settings().max_get_wait_ms, description="Long polling: wait up to this long for a check-back."),
]
MaxChecks = Annotated[int, Query(ge=1, le=MOST_CHECKS, description="Most check-backs to take.")]


@app.post(
    "/v1/producer-groups/<group>/topics/<topic>/checks",
    tags=["transactions"],
    responses=responses(400, 404, 503),
)
def take_checks(
    group: GroupInPath, topic: TopicInPath, wait_ms: WaitMs = 0, max_checks: MaxChecks = 16
) -> TransactionChecks:
    """Take the producer group's open check-backs of the topic's half messages, waiting up to `wait_ms` for one:
    each is given to one caller, which answers it with .../transactions/{msg_id} (`check`: its number). One left
    unanswered is asked again after the check interval."""
    require((acl.topic(topic), Action.PUB))
    checks = transactions.take_checks(get_store(), get_settings(), topic, group, max_checks, wait_ms)
    return TransactionChecks.model_construct(checks=checks)


lambda_handler = lambda_entry(app)
