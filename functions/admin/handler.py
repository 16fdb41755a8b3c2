"""Admin function: topics, consumer groups (with their push subscriptions), message queries, users and their
policies, health and the OpenAPI document. Every route but health and the document says what the caller must
be allowed (`functions.api.auth.require`)."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.metrics import MetricUnit

from functions.api.auth import authenticator, caller, require, require_any, require_super, secret_box, visible
from functions.api.errors import responses
from functions.api.params import GroupInPath, MessageIdInPath, PushGroupInPath, QueueInPath, TopicInPath, UserInPath
from functions.api.resolver import lambda_entry, new_resolver
from functions.logic import dead_letters, groups, queries, subscriptions, tiers, topics, trace, transactions, users
from functions.logic.health import health_of
from functions.logic.push import dead_letter_topic
from functions.logic.targets import TargetRules
from functions.observability import metrics
from functions.push.trigger import push_notifier
from functions.store import get_store
from shared.settings import get_settings
from tidemq_protocol import acl
from tidemq_protocol.acl import AclEntry, Action
from tidemq_protocol.api.common import MAX_JSON_INTEGER, Health, TopicName
from tidemq_protocol.api.dead_letters import DeadLetterList, ResendRequest, ResendResponse
from tidemq_protocol.api.groups import (
    CommittedOffsets,
    GroupChange,
    GroupDescription,
    GroupList,
    GroupSpec,
    GroupView,
    OffsetCommit,
    OffsetReset,
    PushSubscription,
)
from tidemq_protocol.api.messages import MessageList, MessageView, OffsetForTime
from tidemq_protocol.api.push import GroupPush, PushSubscribed
from tidemq_protocol.api.topics import (
    TierStatus,
    TierUpload,
    TopicChange,
    TopicDescription,
    TopicList,
    TopicSpec,
    TopicView,
)
from tidemq_protocol.api.trace import MessageTrace
from tidemq_protocol.api.transactions import LISTING_AFTER_PATTERN, TransactionList, TransactionView
from tidemq_protocol.api.users import AclRevoke, Caller, UserCreated, UserList, UserSpec, UserView
from tidemq_protocol.errors import AccessDenied

app = new_resolver()

Limit = Annotated[int, Query(ge=1, le=1000, description="Most items to return.")]
After = Annotated[str | None, Query(description="Return items after this name (paging).")]


HEALTH = {"application/json": {"model": Health}}


@app.get(
    "/health",
    tags=["admin"],
    responses={
        200: {"description": "ok, or degraded (a service writes do not need is failing)", "content": HEALTH},
        503: {
            "description": "failing: a service writes need is failing, or the store takes no writes",
            "content": HEALTH,
        },
    },
)
def health():
    """The store and each service it relies on, probed with a short deadline (within a second or two, however they
    fail): 200 ok, or degraded while a service writes do not need fails (the cold tier's); 503 failing, saying
    which and why, while one writes need fails (the disk, DynamoDB) or the store takes no more writes."""
    report = health_of(get_store())
    body = report.model_dump_json(exclude_none=True)
    if report.status == "failing":
        return Response(503, content_types.APPLICATION_JSON, body, headers={"Retry-After": "5"})
    return Response(200, content_types.APPLICATION_JSON, body)


@app.get("/openapi.json", tags=["admin"], include_in_schema=False)
def openapi_document():
    from functions.openapi import openapi_json

    return Response(200, content_types.APPLICATION_JSON, openapi_json())


# ---- topics --------------------------------------------------------------------------------------


@app.post("/v1/topics", status_code=201, tags=["topics"], responses=responses(415, 400, 409, ok=201))
def create_topic(spec: TopicSpec) -> TopicView:
    require((acl.topic(spec.name), Action.CREATE))
    return topics.create_topic(get_store(), spec)


@app.get("/v1/topics", tags=["topics"], responses=responses())
def list_topics(after: After = None, limit: Limit = 100) -> TopicList:
    """A page of the topics the caller may see (List or Get); `next_after` pages through all of them."""
    page = topics.list_topics(get_store(), after, limit)
    return page.model_copy(update={"topics": [t for t in page.topics if visible(acl.topic(t.name))]})


@app.get("/v1/topics/<topic>", tags=["topics"], responses=responses(404))
def describe_topic(topic: TopicInPath) -> TopicDescription:
    require_any(acl.topic(topic), Action.GET, Action.PUB, Action.SUB)  # producers and consumers learn its queues
    return topics.describe_topic(get_store(), topic, get_settings())


@app.patch("/v1/topics/<topic>", tags=["topics"], responses=responses(415, 400, 404, 409))
def change_topic(topic: TopicInPath, change: TopicChange) -> TopicView:
    require((acl.topic(topic), Action.UPDATE))
    return topics.change_topic(get_store(), topic, change)


@app.delete("/v1/topics/<topic>", tags=["topics"], responses=responses(404, ok=204))
def delete_topic(topic: TopicInPath):
    require((acl.topic(topic), Action.DELETE))
    topics.delete_topic(get_store(), topic)
    return Response(204)


@app.get("/v1/topics/<topic>/tier", tags=["topics"], responses=responses(404))
def tier_status(topic: TopicInPath) -> TierStatus:
    """Per queue: the hot minimum, the cold range and the upload lag (also as metrics)."""
    require((acl.topic(topic), Action.GET))
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
    require((acl.topic(topic), Action.UPDATE))
    return tiers.upload_now(get_store(), topic)


# ---- queries -------------------------------------------------------------------------------------


TransactionState = Annotated[
    Literal["prepared", "committed", "rolled_back"] | None, Query(description="Only transactions in this state.")
]
TransactionsAfter = Annotated[
    str | None, Query(pattern=LISTING_AFTER_PATTERN, description="Return transactions after this (a `next_after`).")
]


@app.get("/v1/topics/<topic>/transactions", tags=["transactions"], responses=responses(400, 404))
def list_transactions(
    topic: TopicInPath, state: TransactionState = None, after: TransactionsAfter = None, limit: Limit = 100
) -> TransactionList:
    """The topic's transactions, newest first, with how each ended (an operator's view of outcomes; kept 72 h)."""
    require((acl.topic(topic), Action.GET))
    return transactions.list_transactions(get_store(), topic, state, after, limit)


@app.get("/v1/topics/<topic>/transactions/<msg_id>", tags=["transactions"], responses=responses(404))
def describe_transaction(topic: TopicInPath, msg_id: MessageIdInPath) -> TransactionView:
    require((acl.topic(topic), Action.GET))
    return transactions.get_transaction(get_store(), topic, msg_id)


@app.get("/v1/messages/<msg_id>", tags=["queries"], responses=responses(404))
def message_by_id(msg_id: MessageIdInPath) -> MessageView:
    """The message with this id, if the caller may Get its topic."""
    message = queries.message_by_id(get_store(), msg_id)
    require((acl.topic(message.topic), Action.GET))
    return message


@app.get("/v1/messages/<msg_id>/trace", tags=["queries"], responses=responses(404))
def message_trace(msg_id: MessageIdInPath) -> MessageTrace:
    """What the broker recorded of the message, oldest event first (docs/trace.md): stored, delivered and retried
    per group, acked, nacked, dead-lettered, resent. Found while the message or its trace records live; the caller
    must be allowed to Get the message's topic, as for the message itself."""
    found = trace.message_trace(get_store(), msg_id)
    require((acl.topic(found.topic), Action.GET))
    return found


@app.get("/v1/topics/<topic>/messages", tags=["queries"], responses=responses(404))
def messages_by_key(
    topic: TopicInPath,
    key: Annotated[str, Query(min_length=1, description="Message key to look up.")],
    limit: Annotated[int, Query(ge=1, le=1000)] = 32,
) -> MessageList:
    require((acl.topic(topic), Action.GET))
    return queries.messages_by_key(get_store(), topic, key, limit)


@app.get("/v1/topics/<topic>/queues/<queue>/offset", tags=["queries"], responses=responses(404))
def offset_for_time(
    topic: TopicInPath,
    queue: QueueInPath,
    timestamp: Annotated[int, Query(ge=0, le=MAX_JSON_INTEGER, description="ms since the epoch")],
) -> OffsetForTime:
    require((acl.topic(topic), Action.GET))
    return queries.offset_for_time(get_store(), topic, queue, timestamp)


# ---- consumer groups -----------------------------------------------------------------------------


@app.post("/v1/groups", status_code=201, tags=["groups"], responses=responses(415, 400, 409, ok=201))
def create_group(spec: GroupSpec) -> GroupView:
    require((acl.group(spec.name), Action.CREATE))
    return groups.create_group(get_store(), spec)


@app.get("/v1/groups", tags=["groups"], responses=responses())
def list_groups(after: After = None, limit: Limit = 100) -> GroupList:
    """A page of the groups the caller may see (List or Get); `next_after` pages through all of them."""
    page = groups.list_groups(get_store(), after, limit)
    return page.model_copy(update={"groups": [g for g in page.groups if visible(acl.group(g.name))]})


@app.get("/v1/groups/<group>", tags=["groups"], responses=responses(404))
def describe_group(
    group: GroupInPath,
    topic: Annotated[
        TopicName | None, Query(description="Only this topic (default: every topic with commits).")
    ] = None,
) -> GroupDescription:
    require_any(acl.group(group), Action.GET, Action.SUB)  # a consumer reads its group's offsets
    if topic:
        require_any(acl.topic(topic), Action.GET, Action.SUB)
    return groups.describe_group(get_store(), group, topic)


@app.patch("/v1/groups/<group>", tags=["groups"], responses=responses(415, 400, 404))
def change_group(group: GroupInPath, change: GroupChange) -> GroupView:
    """Change the group's attributes or retry policy (absent fields stay; `retry: null`: the server's defaults)."""
    require((acl.group(group), Action.UPDATE))
    return groups.change_group(get_store(), group, change)


@app.delete("/v1/groups/<group>", tags=["groups"], responses=responses(404, ok=204))
def delete_group(group: GroupInPath):
    require((acl.group(group), Action.DELETE))
    groups.delete_group(get_store(), group)
    return Response(204)


@app.post("/v1/groups/<group>/offsets", tags=["groups"], responses=responses(415, 400, 404, 409))
def commit_offsets(group: GroupInPath, commit: OffsetCommit) -> CommittedOffsets:
    require((acl.group(group), Action.SUB), (acl.topic(commit.topic), Action.SUB))
    return groups.commit_offsets(get_store(), group, commit.topic, commit.offsets)


@app.post("/v1/groups/<group>/reset", tags=["groups"], responses=responses(415, 400, 404, 409))
def reset_offsets(group: GroupInPath, reset: OffsetReset) -> CommittedOffsets:
    require((acl.group(group), Action.UPDATE), (acl.topic(reset.topic), Action.SUB))
    return groups.reset_offsets(get_store(), group, reset)


# ---- push delivery -------------------------------------------------------------------------------


@app.put("/v1/groups/<group>/push", tags=["groups"], responses=responses(415, 400, 404, 409))
def set_push(group: PushGroupInPath, subscription: PushSubscription) -> PushSubscribed:
    """Push the topic's new messages to a target (a Lambda function, an HTTP webhook, locally a Python
    callable the operator allows), at least once and in order per queue, retrying with backoff, then to
    `%DLQ%<group>`. A webhook must be at a public address (or a host the operator allows) and answer the
    signed ping this sends with anything but a redirect; the answer carries the secret that signs its
    deliveries, shown this once."""
    require((acl.group(group), Action.UPDATE), (acl.topic(subscription.topic), Action.SUB))
    store = get_store()  # first: opening it may start the embedded AWS endpoint, which webhooks may not reach
    return subscriptions.set_push(store, group, subscription, push_notifier(), TargetRules.of(get_settings()))


@app.get("/v1/groups/<group>/push", tags=["groups"], responses=responses(404, 409))
def show_push(group: GroupInPath) -> GroupPush:
    """The group's push subscription and its dead-letter topic; 409 if it has none (the group pulls)."""
    require((acl.group(group), Action.GET))
    return subscriptions.show_push(get_store(), group)


@app.delete("/v1/groups/<group>/push", tags=["groups"], responses=responses(404, ok=204))
def clear_push(group: GroupInPath):
    """Stop pushing to the group; its committed offsets stay."""
    require((acl.group(group), Action.UPDATE))
    subscriptions.clear_push(get_store(), group, push_notifier())
    return Response(204)


# ---- dead letters --------------------------------------------------------------------------------


@app.get("/v1/groups/<group>/dead-letters", tags=["groups"], responses=responses(404, 409))
def list_dead_letters(
    group: PushGroupInPath,
    offset: Annotated[int, Query(ge=0, le=MAX_JSON_INTEGER, description="First offset of `%DLQ%<group>`.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Most dead letters to return.")] = 32,
) -> DeadLetterList:
    """The group's dead letters from `offset`, each with its origin (properties) and when it was resent, if it
    was. Sub on the group and on its dead-letter topic."""
    require((acl.group(group), Action.SUB), (acl.topic(dead_letter_topic(group)), Action.SUB))
    return dead_letters.list_dead_letters(get_store(), group, offset, limit)


@app.post("/v1/groups/<group>/dead-letters/resend", tags=["groups"], responses=responses(415, 400, 404, 409, 503))
def resend_dead_letters(group: PushGroupInPath, request: ResendRequest) -> ResendResponse:
    """Put dead letters (by id, or a range of offsets, at most 64 a request) back on the topics they came from,
    each as a new message (received with attempt 1). A dead letter resent before is answered `already_resent` and
    not sent again; an origin topic deleted since is a 409, resending nothing. Sub on the group, and Pub on each
    origin topic."""
    require((acl.group(group), Action.SUB))
    store = get_store()
    letters, next_offset = dead_letters.chosen(store, group, request)
    return dead_letters.resend(
        store, group, letters, next_offset, push_notifier(), lambda topic: require((acl.topic(topic), Action.PUB))
    )


# ---- users and access control (super users only) ---------------------------------------------------


@app.post("/v1/users", status_code=201, tags=["users"], responses=responses(415, 400, 409, ok=201))
def create_user(spec: UserSpec) -> UserCreated:
    """A new user, with its secret key shown this once."""
    require_super()
    return users.create_user(get_store(), secret_box(), spec)


@app.get("/v1/users", tags=["users"], responses=responses())
def list_users(after: After = None, limit: Limit = 100) -> UserList:
    require_super()
    page = get_store().list_users(after, limit)
    return UserList(users=[users.view(user) for user in page], next_after=page.next_after)


@app.get("/v1/users/<user>", tags=["users"], responses=responses(404))
def describe_user(user: UserInPath) -> UserView:
    """A user and its policies (never its secret). Users may read their own."""
    if user != caller().user.name:
        require_super()
    return users.view(get_store().get_user(user))


@app.delete("/v1/users/<user>", tags=["users"], responses=responses(404, ok=204))
def delete_user(user: UserInPath):
    require_super()
    if user == caller().user.name:
        raise AccessDenied("a super user cannot delete itself: another super user can")
    get_store().delete_user(user)
    authenticator().forget(user)
    return Response(204)


@app.post("/v1/users/<user>/rotate", tags=["users"], responses=responses(404))
def rotate_secret(user: UserInPath) -> UserCreated:
    """A new secret key for the user, shown this once; the old one stops working."""
    require_super()
    rotated = users.rotate_secret(get_store(), secret_box(), user)
    authenticator().forget(user)
    return rotated


@app.post("/v1/users/<user>/acl", tags=["users"], responses=responses(415, 404, 409))
def grant(user: UserInPath, entry: AclEntry) -> UserView:
    """Add a policy entry (resource, actions, Allow or Deny, source CIDRs) to the user."""
    require_super()
    granted = users.grant(get_store(), user, entry)
    authenticator().forget(user)
    return granted


@app.post("/v1/users/<user>/acl/revoke", tags=["users"], responses=responses(415, 404, 409))
def revoke(user: UserInPath, revocation: AclRevoke) -> UserView:
    """Remove the user's policy entries on a resource."""
    require_super()
    revoked = users.revoke(get_store(), user, revocation.resource)
    authenticator().forget(user)
    return revoked


@app.get("/v1/whoami", tags=["users"])
def whoami() -> Caller:
    """The user this request was signed by."""
    who = caller().user
    return Caller(name=who.name, user_type=who.user_type)


lambda_handler = lambda_entry(app)
