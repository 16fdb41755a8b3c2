"""Produce function: store a batch of messages, as JSON or in the compact binary batch encoding, and tell
this process's push notifier (`functions.push.trigger.push_notifier`); recall a delay message before it is due."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.metrics import MetricUnit

from functions.api.auth import require
from functions.api.binary import request_bytes
from functions.api.errors import responses, unsupported_media_type
from functions.api.params import TopicInPath
from functions.api.resolver import lambda_entry, new_resolver
from functions.logic import produce
from functions.observability import metrics
from functions.push.trigger import push_notifier, watch_moved_timers
from functions.store import get_store
from shared.settings import get_settings
from tidemq_protocol import acl, codec
from tidemq_protocol.acl import Action
from tidemq_protocol.api.messages import ProduceRequest, ProduceResponse, RecallRequest, RecallResponse
from tidemq_protocol.errors import InvalidArgument

app = new_resolver()
watch_moved_timers()  # the embedded engine's mover runs in this process


@app.post("/v1/topics/<topic>/messages", tags=["messages"], responses=responses(415, 400, 404, 409, 413, 503))
def produce_json(topic: TopicInPath, request: ProduceRequest) -> ProduceResponse:
    """Store a batch atomically; each message's id, queue and offset come back in order."""
    require((acl.topic(topic), Action.PUB))
    response = produce.produce_json(get_store(), topic, request.messages, push_notifier())
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
        ok_content={"text/plain": {"schema": {"type": "string"}}},
        description="One line `msg_id queue offset` per message, in order; a delay message sent for later has offset"
        " -1 and its recall handle after it (`msg_id queue -1 recall_handle`).",
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
def produce_binary(topic: TopicInPath):
    require((acl.topic(topic), Action.PUB))
    content_type = app.current_event.headers.get("content-type", "")
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type == codec.RECORDS_CONTENT_TYPE:
        results = produce.produce_records(get_store(), topic, request_bytes(app.current_event), push_notifier())
    elif media_type == codec.CONTENT_TYPE:
        frames = codec.decode_produce(request_bytes(app.current_event), get_settings())
        if not frames:
            raise InvalidArgument("the batch holds no messages")
        results = produce.produce_frames(get_store(), topic, frames, push_notifier())
    else:
        return unsupported_media_type(content_type)
    metrics.add_metric(name="MessagesProduced", unit=MetricUnit.Count, value=len(results))
    body = "".join(produce.result_line(r) for r in results)
    return Response(200, content_types.TEXT_PLAIN, body)


@app.post("/v1/topics/<topic>/recall", tags=["messages"], responses=responses(415, 404, 409))
def recall(topic: TopicInPath, request: RecallRequest) -> RecallResponse:
    """Recall a delay message before it is due, by the handle its produce answered: it is then never delivered
    (RocketMQ 5.3's RecallMessage). A publish to the topic, as the ACL has it. 404: the handle names none of the
    topic's timer messages; 409: too late, it was delivered."""
    require((acl.topic(topic), Action.PUB))
    return produce.recall(get_store(), topic, request.recall_handle)


lambda_handler = lambda_entry(app)
