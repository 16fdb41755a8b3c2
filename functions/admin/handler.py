"""Admin function: topics, consumer groups (with their push subscriptions), message queries, health and the
OpenAPI document."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.metrics import MetricUnit

from functions.api.errors import responses
from functions.api.observability import metrics
from functions.api.params import GroupInPath, MessageIdInPath, PushGroupInPath, QueueInPath, TopicInPath
from functions.api.resolver import lambda_entry, new_resolver
from functions.logic import groups, queries, subscriptions, tiers, topics
from functions.push.trigger import push_notifier
from functions.store import get_store
from shared.models import (
    MAX_JSON_INTEGER,
    CommittedOffsets,
    GroupDescription,
    GroupList,
    GroupPush,
    GroupSpec,
    GroupView,
    Health,
    MessageList,
    MessageView,
    OffsetCommit,
    OffsetForTime,
    OffsetReset,
    PushSubscription,
    TierStatus,
    TierUpload,
    TopicChange,
    TopicDescription,
    TopicList,
    TopicName,
    TopicSpec,
    TopicView,
)

app = new_resolver()

Limit = Annotated[int, Query(ge=1, le=1000, description="Most items to return.")]
After = Annotated[str | None, Query(description="Return items after this name (paging).")]


@app.get("/health", tags=["admin"], responses=responses(503))
def health() -> Health:
    """200 once the store is open and answering; 503 saying why once it takes no more writes."""
    store = get_store()
    store.check_health()
    store.list_topics(limit=1)
    return Health(status="ok")


@app.get("/openapi.json", tags=["admin"], include_in_schema=False)
def openapi_document():
    from functions.openapi import openapi_json

    return Response(200, content_types.APPLICATION_JSON, openapi_json())


# ---- topics --------------------------------------------------------------------------------------


@app.post("/v1/topics", status_code=201, tags=["topics"], responses=responses(415, 400, 409, ok=201))
def create_topic(spec: TopicSpec) -> TopicView:
    return topics.create_topic(get_store(), spec)


@app.get("/v1/topics", tags=["topics"], responses=responses())
def list_topics(after: After = None, limit: Limit = 100) -> TopicList:
    return topics.list_topics(get_store(), after, limit)


@app.get("/v1/topics/<topic>", tags=["topics"], responses=responses(404))
def describe_topic(topic: TopicInPath) -> TopicDescription:
    return topics.describe_topic(get_store(), topic)


@app.patch("/v1/topics/<topic>", tags=["topics"], responses=responses(415, 400, 404, 409))
def change_topic(topic: TopicInPath, change: TopicChange) -> TopicView:
    return topics.change_topic(get_store(), topic, change)


@app.delete("/v1/topics/<topic>", tags=["topics"], responses=responses(404, ok=204))
def delete_topic(topic: TopicInPath):
    topics.delete_topic(get_store(), topic)
    return Response(204)


@app.get("/v1/topics/<topic>/tier", tags=["topics"], responses=responses(404))
def tier_status(topic: TopicInPath) -> TierStatus:
    """Per queue: the hot minimum, the cold range and the upload lag (also as metrics)."""
    status = tiers.tier_status(get_store(), topic)
    metrics.add_metric(
        name="TierUploadLagMessages", unit=MetricUnit.Count, value=sum(q.upload_lag_messages for q in status.queues)
    )
    metrics.add_metric(
        name="TierUploadLagSeconds",
        unit=MetricUnit.Seconds,
        value=max((q.upload_lag_seconds for q in status.queues), default=0.0),
    )
    return status


@app.post("/v1/topics/<topic>/tier/upload", tags=["topics"], responses=responses(404))
def upload_now(topic: TopicInPath) -> TierUpload:
    """Upload the topic's waiting messages to the cold tier now, instead of at their age or size."""
    return tiers.upload_now(get_store(), topic)


# ---- queries -------------------------------------------------------------------------------------


@app.get("/v1/messages/<msg_id>", tags=["queries"], responses=responses(404))
def message_by_id(msg_id: MessageIdInPath) -> MessageView:
    return queries.message_by_id(get_store(), msg_id)


@app.get("/v1/topics/<topic>/messages", tags=["queries"], responses=responses(404))
def messages_by_key(
    topic: TopicInPath,
    key: Annotated[str, Query(min_length=1, description="Message key to look up.")],
    limit: Annotated[int, Query(ge=1, le=1000)] = 32,
) -> MessageList:
    return queries.messages_by_key(get_store(), topic, key, limit)


@app.get("/v1/topics/<topic>/queues/<queue>/offset", tags=["queries"], responses=responses(404))
def offset_for_time(
    topic: TopicInPath,
    queue: QueueInPath,
    timestamp: Annotated[int, Query(ge=0, le=MAX_JSON_INTEGER, description="ms since the epoch")],
) -> OffsetForTime:
    return queries.offset_for_time(get_store(), topic, queue, timestamp)


# ---- consumer groups -----------------------------------------------------------------------------


@app.post("/v1/groups", status_code=201, tags=["groups"], responses=responses(415, 400, 409, ok=201))
def create_group(spec: GroupSpec) -> GroupView:
    return groups.create_group(get_store(), spec)


@app.get("/v1/groups", tags=["groups"], responses=responses())
def list_groups(after: After = None, limit: Limit = 100) -> GroupList:
    return groups.list_groups(get_store(), after, limit)


@app.get("/v1/groups/<group>", tags=["groups"], responses=responses(404))
def describe_group(
    group: GroupInPath,
    topic: Annotated[
        TopicName | None, Query(description="Only this topic (default: every topic with commits).")
    ] = None,
) -> GroupDescription:
    return groups.describe_group(get_store(), group, topic)


@app.delete("/v1/groups/<group>", tags=["groups"], responses=responses(404, ok=204))
def delete_group(group: GroupInPath):
    groups.delete_group(get_store(), group)
    return Response(204)


@app.post("/v1/groups/<group>/offsets", tags=["groups"], responses=responses(415, 400, 404, 409))
def commit_offsets(group: GroupInPath, commit: OffsetCommit) -> CommittedOffsets:
    return groups.commit_offsets(get_store(), group, commit.topic, commit.offsets)


@app.post("/v1/groups/<group>/reset", tags=["groups"], responses=responses(415, 400, 404, 409))
def reset_offsets(group: GroupInPath, reset: OffsetReset) -> CommittedOffsets:
    return groups.reset_offsets(get_store(), group, reset)


# ---- push delivery -------------------------------------------------------------------------------


@app.put("/v1/groups/<group>/push", tags=["groups"], responses=responses(415, 400, 404, 409))
def set_push(group: PushGroupInPath, subscription: PushSubscription) -> GroupPush:
    """Push the topic's new messages to a target (a Lambda function, an HTTP webhook, locally a Python
    callable), at least once and in order per queue, retrying with backoff, then to `%DLQ%<group>`."""
    return subscriptions.set_push(get_store(), group, subscription, push_notifier())


@app.get("/v1/groups/<group>/push", tags=["groups"], responses=responses(404, 409))
def show_push(group: GroupInPath) -> GroupPush:
    """The group's push subscription and its dead-letter topic; 409 if it has none (the group pulls)."""
    return subscriptions.show_push(get_store(), group)


@app.delete("/v1/groups/<group>/push", tags=["groups"], responses=responses(404, ok=204))
def clear_push(group: GroupInPath):
    """Stop pushing to the group; its committed offsets stay."""
    subscriptions.clear_push(get_store(), group, push_notifier())
    return Response(204)


lambda_handler = lambda_entry(app)
