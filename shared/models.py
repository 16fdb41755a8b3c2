"""The HTTP API's JSON bodies (pydantic), shared by the handlers, the OpenAPI document and the SDK."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from tidemq_store import model
from tidemq_store.acl import MAX_POLICY_ENTRIES, AclEntry, UserName, UserType
from tidemq_store.model import (
    HOUR_MS,
    MAX_QUEUES,
    Attributes,
    GroupName,
    MessageType,
    StoredMessage,
    TopicName,
)

from .push_target import TARGET_FORMS, checked_push_target, shown_target

BodyEncoding = Literal["utf-8", "base64"]


class ApiModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(ApiModel):
    """Every 4xx says what was wrong; offset errors also carry the valid range."""

    error: str = Field(description="The error's class, e.g. TopicNotFound.")
    message: str
    min_offset: int | None = None
    max_offset: int | None = None


class Health(ApiModel):
    status: Literal["ok"]


# ---- topics --------------------------------------------------------------------------------------


class TopicSpec(ApiModel):
    name: TopicName
    queues: int = Field(default=8, ge=1, le=MAX_QUEUES)
    retention_ms: int | None = Field(default=72 * HOUR_MS, ge=1000, description="null keeps messages forever.")
    message_type: MessageType = MessageType.NORMAL
    attributes: Attributes = Field(default_factory=dict)


class TopicView(TopicSpec):
    created_at: int


class TopicList(ApiModel):
    topics: list[TopicView]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class QueueRange(ApiModel):
    queue: int
    min_offset: int
    max_offset: int


class TopicDescription(TopicView):
    queue_offsets: list[QueueRange]


class TierQueueView(ApiModel):
    """Where one queue's messages are, and how far its upload to the cold tier lags."""

    queue: int
    hot_min_offset: int = Field(description="Oldest offset the hot tier still holds.")
    cold_min_offset: int | None = Field(description="Oldest offset in the cold tier (null: none there).")
    cold_max_offset: int | None = Field(description="Just past the newest offset in the cold tier.")
    max_offset: int
    upload_lag_messages: int = Field(description="Acknowledged messages not yet in the cold tier.")
    upload_lag_seconds: float = Field(description="Age of the oldest of them.")


class TierStatus(ApiModel):
    topic: str
    tier: str | None = Field(description="The cold tier (e.g. s3://bucket/prefix); null when tiering is off.")
    level: str = Field(description="tieredStorageLevel: which tier serves reads.")
    queues: list[TierQueueView]


class TierUpload(ApiModel):
    topic: str
    uploaded: int = Field(description="Messages uploaded by this request.")


class TopicChange(ApiModel):
    """Fields to change; absent fields stay as they are (`retention_ms: null` keeps forever)."""

    retention_ms: int | None = Field(default=None, ge=1000)
    queues: int | None = Field(default=None, ge=1, le=MAX_QUEUES, description="Queues can grow, not shrink.")
    attributes: Attributes | None = None


# ---- messages ------------------------------------------------------------------------------------


class MessageIn(ApiModel):
    body: str
    body_encoding: BodyEncoding = "utf-8"
    keys: list[str] = Field(default_factory=list)
    tag: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)
    queue: int | None = Field(default=None, ge=0, description="Target queue; default: by sharding key, else any.")
    sharding_key: str | None = Field(default=None, min_length=1, description="Same key, same queue: order per key.")

    @model_validator(mode="after")
    def _body_decodes(self) -> MessageIn:
        self.body_bytes()
        return self

    def body_bytes(self) -> bytes:
        if self.body_encoding == "utf-8":
            return self.body.encode()
        try:
            return base64.b64decode(self.body, validate=True)
        except binascii.Error:
            raise ValueError("body is not valid base64") from None


class ProduceRequest(ApiModel):
    messages: list[MessageIn] = Field(min_length=1)


class PutView(ApiModel):
    msg_id: str
    queue: int
    offset: int
    store_timestamp: int


class ProduceResponse(ApiModel):
    messages: list[PutView]


class MessageView(ApiModel):
    msg_id: str
    topic: str
    queue: int
    offset: int
    body: str
    body_encoding: BodyEncoding
    keys: list[str]
    tag: str | None
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int

    @classmethod
    def of(cls, message: StoredMessage) -> MessageView:
        try:
            body, encoding = message.body.decode(), "utf-8"
        except UnicodeDecodeError:
            body, encoding = base64.b64encode(message.body).decode(), "base64"
        return cls.model_construct(
            msg_id=message.msg_id,
            topic=message.topic,
            queue=message.queue,
            offset=message.queue_offset,
            body=body,
            body_encoding=encoding,
            keys=list(message.keys),
            tag=message.tag,
            properties=message.properties,
            born_timestamp=message.born_timestamp,
            store_timestamp=message.store_timestamp,
        )

    def body_bytes(self) -> bytes:
        return self.body.encode() if self.body_encoding == "utf-8" else base64.b64decode(self.body)


class ConsumeResponse(ApiModel):
    messages: list[MessageView]
    next_offset: int = Field(description="Where the next read starts: past every message examined.")
    min_offset: int
    max_offset: int


class MessageList(ApiModel):
    messages: list[MessageView]


class OffsetForTime(ApiModel):
    topic: str
    queue: int
    timestamp: int
    offset: int = Field(description="The first offset stored at or after `timestamp` (max_offset if none).")


# ---- consumer groups -----------------------------------------------------------------------------


class PushSubscription(model.PushSpec):
    """A group's push delivery (RocketMQ's push consumer): new messages of `topic` matching `tag` go to
    `target`, `batch_size` at a time, each queue in order; a failed call is retried with exponential backoff
    (`backoff_base_ms` doubling up to `backoff_max_ms`, with jitter), and after `max_attempts` calls the batch
    goes to the group's dead-letter topic `%DLQ%<group>`."""

    # What the API takes, and shows of the store's record (`ShownPush`): `target` checked against the
    # push-target grammar, so that a malformed one is a 422 naming the field.
    target: Annotated[str, AfterValidator(checked_push_target)] = Field(
        description=f"Where messages go: {TARGET_FORMS}. Shown with `***` for a webhook URL's credentials."
    )


def _shown(push: object) -> object:
    """A stored subscription as the API shows it: without its signing secret, credentials in its target
    redacted (`shared.push_target.shown_target`)."""
    if isinstance(push, BaseModel):
        push = push.model_dump()
    if isinstance(push, dict):
        push = {name: value for name, value in push.items() if name != "signing_secret"}
        if isinstance(push.get("target"), str):
            push["target"] = shown_target(push["target"])
    return push


ShownPush = Annotated[PushSubscription | None, BeforeValidator(_shown)]
"""A group's push subscription as every answer shows it (made from the store's record too)."""


class GroupSpec(ApiModel):
    name: GroupName
    attributes: Attributes = Field(default_factory=dict)


class GroupView(GroupSpec):
    push: ShownPush = Field(default=None, description="Set: a push group (see .../push).")
    created_at: int


class GroupList(ApiModel):
    groups: list[GroupView]
    next_after: str | None


class QueueLag(ApiModel):
    queue: int
    committed_offset: int | None = Field(description="null: the group never committed on this queue.")
    min_offset: int
    max_offset: int
    lag: int = Field(description="Messages from the committed offset (or the queue's start) to max_offset.")


class TopicLag(ApiModel):
    topic: str
    lag: int
    queues: list[QueueLag]


class GroupDescription(GroupView):
    lag: int
    topics: list[TopicLag]


class OffsetCommit(ApiModel):
    topic: TopicName
    offsets: dict[int, int] = Field(min_length=1, description="Next offset to consume, by queue.")


class OffsetReset(ApiModel):
    topic: TopicName
    to: Literal["earliest", "latest", "timestamp"]
    timestamp: int | None = Field(default=None, ge=0, description="Required when `to` is timestamp (ms).")

    @model_validator(mode="after")
    def _timestamp_given(self) -> OffsetReset:
        if self.to == "timestamp" and self.timestamp is None:
            raise ValueError("timestamp is required when resetting to a timestamp")
        return self


class CommittedOffsets(ApiModel):
    group: str
    topic: str
    offsets: dict[int, int]


# ---- push delivery -------------------------------------------------------------------------------


class GroupPush(ApiModel):
    """A group's push subscription (null: the group is not pushed to) and where its dead letters go."""

    group: str
    push: ShownPush
    dead_letter_topic: str = Field(description="Batches that failed max_attempts times land here (`%DLQ%<group>`).")


class PushSubscribed(GroupPush):
    """The answer to setting a subscription: the subscription, and the secret its webhook deliveries are signed
    with, shown this once (never again: keep it where the receiver verifies `X-TideMQ-Signature`)."""

    signing_secret: str | None = Field(
        description="HMAC-SHA256 key of the `X-TideMQ-Signature` header of every webhook delivery (null for Lambda "
        "and Python targets, which are not signed)."
    )


class PushPing(ApiModel):
    """What a webhook receives once when a subscription to it is set (header `X-TideMQ-Event: ping`): no
    messages. Any answer but a redirect lets the subscription be set."""

    group: str
    topic: str
    ping: Literal[True] = True


class PushDelivery(ApiModel):
    """What a push target receives (a webhook's JSON body, a Lambda function's event, a Python callable's
    argument): messages of one queue in offset order."""

    group: str
    topic: str
    queue: int
    attempt: int = Field(description="1 on the first call with these messages, then 2, 3, ... on retries.")
    messages: list[MessageView]


class PendingRetry(ApiModel):
    """A queue waiting to retry its head batch: `attempts` calls failed so far; the next one is due at `due_ms`."""

    group: str
    queue: int
    offset: int
    attempts: int
    due_ms: int


class PushEvent(ApiModel):
    """The push function's event: deliver `topic` to every group pushing from it (or to `group` only).
    The function sends itself `not_before_ms` and `retries` when it continues in a new invocation."""

    topic: TopicName
    group: GroupName | None = None
    not_before_ms: int | None = Field(default=None, description="Start delivering at this time (ms since epoch).")
    retries: list[PendingRetry] = Field(default_factory=list)
    continues: bool = Field(default=False, description="Sent by the push function itself, to go on where it stopped.")


# ---- users and access control (RocketMQ ACL 2.0: tidemq_store/acl.py) ------------------------------


class UserSpec(ApiModel):
    """A user to create: a super user may do anything (and alone manages users); a normal one what its
    policies allow."""

    name: UserName = Field(description="The user's name, which is also its access key.")
    user_type: UserType = UserType.NORMAL
    policies: list[AclEntry] = Field(default_factory=list, max_length=MAX_POLICY_ENTRIES)


class UserView(ApiModel):
    """A user as the API shows it: never its secret."""

    name: str
    user_type: UserType
    policies: list[AclEntry]
    created_at: int


class UserCreated(UserView):
    """A user with its secret key, shown this once (at creation and rotation): keep it, it cannot be read back."""

    secret_key: str


class UserList(ApiModel):
    users: list[UserView]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class AclRevoke(ApiModel):
    resource: str = Field(description="The resource pattern whose entries go, as it was granted.")


class Caller(ApiModel):
    """Who the request was signed by."""

    name: str
    user_type: UserType
