"""The HTTP API's JSON bodies (pydantic), shared by the handlers, the OpenAPI document and the SDK."""

from __future__ import annotations

import base64
import re
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tidemq_store import model
from tidemq_store.acl import MAX_POLICY_ENTRIES, AclEntry, UserName, UserType
from tidemq_store.config import StoreConfig
from tidemq_store.kv import model as kv_model
from tidemq_store.kv import record as kv_record
from tidemq_store.model import (
    HOUR_MS,
    MAX_QUEUES,
    NAME_RULE,
    Attributes,
    MessageType,
    StoredMessage,
    TagFilter,
    TopicAttributes,
)

from .push_target import TARGET_FORMS, checked_push_target, shown_target

BodyEncoding = Literal["utf-8", "base64"]

# ---- what the server enforces, declared so that docs/openapi.json says it ---------------------------
# Each pattern below is the JSON Schema spelling of a check the engine makes (tests/unit/test_models.py holds
# them equal); the checks themselves stay where they are, so their messages stay the engine's own.

MAX_JSON_INTEGER = 2**53 - 1
"""The largest offset, timestamp or duration the API takes: every JSON parser reads it exactly (JavaScript's
Number.MAX_SAFE_INTEGER), and the store keeps it (u64 keys in RocksDB, numbers in DynamoDB)."""

MAX_BATCH_MESSAGES = StoreConfig.model_fields["max_batch_messages"].default
"""Most messages one JSON produce request may carry (`TIDEMQ_MAX_BATCH_MESSAGES` at its default)."""

_CONTROL = r"\x00-\x1f"
_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""Python's whitespace (`str.isspace`, `str.strip`), spelled out: ECMA's `\\s` is not the same set."""

NAME_PATTERN = f"^{NAME_RULE.pattern}$"
KEY_PATTERN = f"^[^{_CONTROL}{_SPACE}]+$"
"""A message key: no control characters, no whitespace (keys are stored joined by spaces)."""
_BLANK_OR_STAR = f"[{_SPACE}]*\\*?[{_SPACE}]*"
TAG_PATTERN = f"^(?!{_BLANK_OR_STAR}$)(?![^{_CONTROL}]*\\|\\|)[^{_CONTROL}]+$"
"""A message's tag: no control characters, not blank, not `*`, no `||` (those are the filter's syntax)."""
_FILTER_PART = f"(?!{_BLANK_OR_STAR}(?:\\|\\||$))(?:[^|]|\\|(?!\\|))+"
TAG_FILTER_PATTERN = f"^(?:{_BLANK_OR_STAR}|{_FILTER_PART}(?:\\|\\|{_FILTER_PART})*)$"
"""A tag filter (`TagFilter.parse`): blank or `*` (every message), or tags joined by `||`, none blank or `*`."""
PROPERTY_NAME_SCHEMA = {"pattern": f"^[^{_CONTROL}]+$", "not": {"enum": sorted(("KEYS", "TAGS"))}}
PROPERTY_VALUE_PATTERN = "^[^\\x01\\x02]*$"
"""Property names carry no control character and are not the reserved KEYS and TAGS; values carry no \\x01 or
\\x02 (RocketMQ's separators in the stored properties)."""
BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_BASE64 = re.compile(BASE64_PATTERN.strip("^$"))
MSG_ID_PATTERN = "^[0-9a-f]{24}$"
_PORT = "(?:0*(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
"""A URL's port as Python reads it: none, or a number from 0 to 65535, leading zeros allowed."""
TARGET_PATTERN = (
    "^(?:lambda:(?:arn:aws[A-Za-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:)?[A-Za-z0-9_-]{1,64}"
    "(?::(?:\\$LATEST|[A-Za-z0-9_-]{1,128}))?"
    f"|https?://(?:[^{_SPACE}/?#]*@)?[^{_SPACE}/?#@:\\[\\]]+(?::{_PORT})?(?:[/?#][^{_SPACE}]*)?)$"
)
"""The push targets anyone may register, as `shared.push_target` reads them: a Lambda function or a webhook (one
at an IPv6 literal is taken but not declared). `python:` targets are the operator's, for local runs: taken, not
declared."""
_QUEUE_NUMBER = "(?:[0-9]|[1-9][0-9]|[1-9][0-9]{2}|10[01][0-9]|102[0-3])"
QUEUE_KEY_PATTERN = f"^{_QUEUE_NUMBER}$"
"""A queue number as a JSON object key: 0..MAX_QUEUES-1 (1023) in decimal, no sign, no leading zero."""


def name_schema(kind: str, max_length: int = 127, pattern: str = NAME_PATTERN, more: str = "") -> WithJsonSchema:
    """The JSON Schema of a topic or group name (`check_name` checks it)."""
    return WithJsonSchema(
        {
            "type": "string",
            "pattern": pattern,
            "minLength": 1,
            "maxLength": max_length,
            "description": f"A {kind} name: letters, digits and `_ % | -`, at most {max_length} characters{more}.",
        }
    )


def _not_a_namespace_topic(name: str) -> str:
    if kv_record.is_kv_topic(name):
        raise ValueError(
            f"topic names starting with {kv_record.TOPIC_PREFIX} are KV namespaces' own: use /v1/kv/{{namespace}}"
        )
    return name


TOPIC_PATTERN = f"^(?!{re.escape(kv_record.TOPIC_PREFIX)}){NAME_RULE.pattern}$"
"""A topic name the API takes: not one of a KV namespace's topics (`%KV%<namespace>`, reached through /v1/kv)."""


def checked_tag_filter(expression: str) -> str:
    """`expression` if it is a tag filter (`TagFilter.parse`), else InvalidArgument saying why (a ValueError)."""
    TagFilter.parse(expression)
    return expression


TopicName = Annotated[
    model.TopicName,
    AfterValidator(_not_a_namespace_topic),
    name_schema("topic", pattern=TOPIC_PATTERN, more=f", not starting with {kv_record.TOPIC_PREFIX}"),
]
GroupName = Annotated[model.GroupName, name_schema("group")]
QueueIndex = Annotated[int, Field(ge=0, le=MAX_QUEUES - 1)]
MessageId = Annotated[str, Field(pattern=MSG_ID_PATTERN, description="24 lowercase hexadecimal digits.")]
Offset = Annotated[int, Field(ge=0, le=MAX_JSON_INTEGER)]
TagFilterText = Annotated[
    str,
    AfterValidator(checked_tag_filter),
    WithJsonSchema(
        {"type": "string", "pattern": TAG_FILTER_PATTERN, "description": "Tag filter: `*`, or tags joined by `||`."}
    ),
]


def json_integer(value: Any) -> Any:
    """JSON's integers as JSON Schema has them: a number without a fraction (`2.0` is one), never `true` or a
    string of digits, which pydantic's lax mode would take for one."""
    if isinstance(value, bool | str):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def _is_integer(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return _is_integer(get_args(annotation)[0])
    return annotation is int or any(_is_integer(arg) for arg in get_args(annotation))


def integer_fields(model: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """`json_integer` for the fields of `model` declared as integers (a `field_validator("*")` of it)."""
    return json_integer(value) if _is_integer(model.model_fields[info.field_name].annotation) else value


def _queue_key(value: Any) -> Any:
    """A queue number as a JSON object key ("0", "7"), or as an int from Python callers."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_QUEUES:
        return value
    if not isinstance(value, str) or not re.fullmatch(QUEUE_KEY_PATTERN, value):
        raise PydanticCustomError("queue_key", "a queue is a number 0..1023, without sign or leading zero")
    return int(value)


QueueKey = Annotated[int, BeforeValidator(_queue_key), WithJsonSchema({"type": "string", "pattern": QUEUE_KEY_PATTERN})]


class ApiModel(BaseModel):
    """A JSON body of the API: no field beyond those declared, and integers only where integers are declared."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _json_integers(cls, value: Any, info: ValidationInfo) -> Any:
        return integer_fields(cls, value, info)


class ErrorBody(ApiModel):
    """Every 4xx says what was wrong; offset errors also carry the valid range."""

    error: str = Field(description="The error's class, e.g. TopicNotFound.")
    message: str
    min_offset: int | None = None
    max_offset: int | None = None
    current_version: int | None = Field(default=None, description="412: the key's version now (absent: no key).")
    oldest_revision: int | None = Field(default=None, description="410: the oldest revision still kept.")


class Health(ApiModel):
    status: Literal["ok"]


# ---- topics --------------------------------------------------------------------------------------


class TopicSpec(ApiModel):
    name: TopicName
    queues: int = Field(default=8, ge=1, le=MAX_QUEUES)
    retention_ms: int | None = Field(
        default=72 * HOUR_MS, ge=1000, le=MAX_JSON_INTEGER, description="null keeps messages forever."
    )
    message_type: MessageType = MessageType.NORMAL
    attributes: TopicAttributes = Field(
        default_factory=dict,
        description="Free-form, except the ones TideMQ reads: cleanup.policy (DELETE or COMPACTION), "
        "compaction.tombstone_grace_ms, tier.storage_class (STANDARD_IA or GLACIER_IR), tier.storage_class_after_ms.",
    )


class TopicView(TopicSpec):
    attributes: Attributes = Field(default_factory=dict)  # as stored: a view is never refused
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

    retention_ms: int | None = Field(default=None, ge=1000, le=MAX_JSON_INTEGER)
    queues: int | None = Field(
        default=None, ge=1, le=MAX_QUEUES, description="Queues can grow, not shrink (fewer than now: 409)."
    )
    attributes: TopicAttributes | None = Field(default=None, description="Replace the attributes (as at create).")


# ---- messages ------------------------------------------------------------------------------------


class MessageIn(ApiModel):
    """One message to produce. Its body and properties together take at most `TIDEMQ_MAX_MESSAGE_BYTES`
    (4 MiB), the properties (keys, tag and user properties, encoded) at most 32767 bytes: over either, 413."""

    model_config = ConfigDict(
        json_schema_extra={
            # a base64 body is valid base64: what `body_bytes` decodes
            "if": {"properties": {"body_encoding": {"const": "base64"}}, "required": ["body_encoding"]},
            "then": {"properties": {"body": {"pattern": BASE64_PATTERN}}},
        }
    )

    body: str
    body_encoding: BodyEncoding = "utf-8"
    keys: list[Annotated[str, WithJsonSchema({"type": "string", "pattern": KEY_PATTERN})]] = Field(
        default_factory=list, description="Keys to look the message up by: no whitespace or control characters."
    )
    tag: Annotated[str, WithJsonSchema({"type": "string", "pattern": TAG_PATTERN})] | None = Field(
        default=None, description="One tag for consumers' tag filters: not blank, not `*`, no `||`."
    )
    properties: dict[str, str] = Field(
        default_factory=dict,
        json_schema_extra={
            "propertyNames": PROPERTY_NAME_SCHEMA,
            "additionalProperties": {"type": "string", "pattern": PROPERTY_VALUE_PATTERN},
        },
        description="User properties. Names: no control characters, not KEYS or TAGS; values: no \\x01 or \\x02.",
    )
    queue: QueueIndex | None = Field(default=None, description="Target queue; default: by sharding key, else any.")
    sharding_key: str | None = Field(default=None, min_length=1, description="Same key, same queue: order per key.")

    @model_validator(mode="after")
    def _body_decodes(self) -> MessageIn:
        self.body_bytes()
        return self

    def body_bytes(self) -> bytes:
        if self.body_encoding == "utf-8":
            return self.body.encode()
        # RFC 4648 base64, padding and all, as BASE64_PATTERN declares (the decoder alone takes a stray "=" too)
        if not _BASE64.fullmatch(self.body):
            raise ValueError("body is not valid base64")
        return base64.b64decode(self.body)


class ProduceRequest(ApiModel):
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_BATCH_MESSAGES)


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
    topic: TopicName
    target: Annotated[str, AfterValidator(checked_push_target)] = Field(
        description=f"Where messages go: {TARGET_FORMS}. Shown with `***` for a webhook URL's credentials.",
        json_schema_extra={"pattern": TARGET_PATTERN},
    )
    tag: TagFilterText = "*"

    @field_validator("*", mode="before")
    @classmethod
    def _json_integers(cls, value: Any, info: ValidationInfo) -> Any:
        return integer_fields(cls, value, info)


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


ShownPush = Annotated[PushSubscription, BeforeValidator(_shown)]
"""A group's push subscription as every answer shows it (made from the store's record too)."""


class GroupSpec(ApiModel):
    name: GroupName
    attributes: Attributes = Field(default_factory=dict)


class GroupView(GroupSpec):
    push: ShownPush | None = Field(default=None, description="Set: a push group (see .../push).")
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
    offsets: dict[QueueKey, Annotated[Offset, BeforeValidator(json_integer)]] = Field(
        min_length=1,
        description="Next offset to consume, by queue (in the queue's range, else 409).",
        json_schema_extra={"additionalProperties": False},
    )


class OffsetReset(ApiModel):
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"to": {"const": "timestamp"}}},
            "then": {"required": ["timestamp"], "properties": {"timestamp": {"type": "integer"}}},
        }
    )

    topic: TopicName
    to: Literal["earliest", "latest", "timestamp"]
    timestamp: int | None = Field(
        default=None, ge=0, le=MAX_JSON_INTEGER, description="Required when `to` is timestamp (ms)."
    )

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
    """A group's push subscription and where its dead letters go."""

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


# ---- KV namespaces (tidemq_store/kv) ---------------------------------------------------------------

KV_KEY_PATTERN = f"^{kv_model.KEY_RULE.pattern.decode()}$"
KV_VALUE_CHARS = 4 * ((kv_model.MAX_VALUE_BYTES - 1) // 3)
"""The longest base64 value the API takes: any base64 text this long decodes within the engine's limit."""
KvKey = Annotated[
    str,
    Field(min_length=1, max_length=kv_model.MAX_KEY_BYTES, pattern=KV_KEY_PATTERN),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": kv_model.MAX_KEY_BYTES, "pattern": KV_KEY_PATTERN}),
]
KvPrefix = Annotated[
    str,
    Field(max_length=kv_model.MAX_KEY_BYTES, pattern=f"^[\\x20-\\x7e]{{0,{kv_model.MAX_KEY_BYTES}}}$"),
]
NamespaceName = Annotated[
    str,
    Field(min_length=1, max_length=64, pattern=f"^{kv_model.NAMESPACE_RULE.pattern}$"),
]
Base64Value = Annotated[
    str,
    Field(max_length=KV_VALUE_CHARS, pattern=BASE64_PATTERN, description="The value, base64 (RFC 4648)."),
]
TtlMs = Annotated[int, Field(ge=1, le=kv_model.MAX_TTL_MS, description="Expire the key this many ms from now.")]


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


class NamespaceSpec(ApiModel):
    name: NamespaceName
    history_ms: int = Field(
        default=kv_model.DEFAULT_HISTORY_MS,
        ge=60_000,
        le=kv_model.MAX_TTL_MS,
        description="How long changes stay watchable on the serverless backend (the embedded one keeps its topic).",
    )


class NamespaceView(NamespaceSpec):
    created_at: int
    revision: int = Field(description="The revision of the namespace's last write (0: none).")


class NamespaceList(ApiModel):
    namespaces: list[NamespaceView]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class KvPut(ApiModel):
    value: Base64Value
    ttl_ms: TtlMs | None = None

    def value_bytes(self) -> bytes:
        return base64.b64decode(self.value)


class KvWritten(ApiModel):
    key: str
    version: int = Field(description="The key's version now (a delete: the revision it made).")
    revision: int = Field(description="The namespace's revision after this write.")


class KvEntryView(ApiModel):
    key: str
    value: str = Field(description="base64")
    version: int
    expires_at_ms: int | None = None

    @classmethod
    def of(cls, entry: kv_model.Entry) -> KvEntryView:
        return cls(key=entry.key, value=_b64(entry.value), version=entry.version, expires_at_ms=entry.expires_at_ms)

    def entry(self) -> kv_model.Entry:
        return kv_model.Entry(self.key, base64.b64decode(self.value), self.version, self.expires_at_ms)


class KvRead(KvEntryView):
    revision: int = Field(description="The namespace's revision when the key was read.")


class KvBatchGet(ApiModel):
    keys: list[KvKey] = Field(min_length=1, max_length=kv_model.MAX_PAGE)


class KvEntryList(ApiModel):
    entries: list[KvEntryView]
    revision: int
    next_after: str | None = Field(default=None, description="A scan's next `after`; null when it is done.")


class KvChangeView(ApiModel):
    revision: int
    previous: int
    kind: kv_model.ChangeKind
    key: str
    value: str = Field(default="", description="base64 (a delete: empty)")
    version: int
    expires_at_ms: int | None = None

    @classmethod
    def of(cls, change: kv_model.Change) -> KvChangeView:
        return cls(
            revision=change.revision,
            previous=change.previous,
            kind=change.kind,
            key=change.key,
            value=_b64(change.value),
            version=change.version,
            expires_at_ms=change.expires_at_ms,
        )

    def change(self) -> kv_model.Change:
        return kv_model.Change(
            self.revision,
            self.previous,
            self.kind,
            self.key,
            base64.b64decode(self.value),
            self.version,
            self.expires_at_ms,
        )


class KvChangeList(ApiModel):
    changes: list[KvChangeView]
    revision: int
    next_revision: int = Field(description="Watch from here next: no change of this page again, none missed.")


class KvImportEntry(ApiModel):
    key: KvKey
    value: Base64Value
    version: int = Field(ge=1, le=MAX_JSON_INTEGER)
    expires_at_ms: int | None = Field(default=None, ge=1, le=MAX_JSON_INTEGER)

    def entry(self) -> kv_model.Entry:
        return kv_model.Entry(self.key, base64.b64decode(self.value), self.version, self.expires_at_ms)


class KvImport(ApiModel):
    """A snapshot (or, with `append`, its next part) to write into the namespace, keys keeping their versions."""

    entries: list[KvImportEntry] = Field(max_length=kv_model.MAX_PAGE)
    history_ms: int = Field(default=kv_model.DEFAULT_HISTORY_MS, ge=60_000, le=kv_model.MAX_TTL_MS)
    append: StrictBool = Field(
        default=False,
        description="false: the namespace must be empty (or missing: it is created); true: a later part of the same "
        "import, whose versions are all above the namespace's revision.",
    )


class KvImported(ApiModel):
    keys: int
    revision: int


# ---- the BrokerContainer (functions/container) ---------------------------------------------------


class BrokerAdd(ApiModel):
    """A broker to add: the text of its config file (Java properties; README: BrokerContainer)."""

    properties: str = Field(min_length=1, max_length=64 * 1024, description="`key=value` lines, as in broker-a.conf.")


class BrokerSettings(ApiModel):
    """A broker's settings by their config-file keys (secrets hidden when shown); as a change, the keys to set."""

    settings: dict[
        Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,99}$")], Annotated[str, Field(max_length=4096)]
    ]


class BrokerQuota(ApiModel):
    usage_bytes: int = Field(description="Its commit log and ConsumeQueue on disk.")
    quota_bytes: int | None = Field(description="quotaPercentForDiskPartition of the partition (null: no quota).")
    threshold_bytes: int | None = Field(description="Past this, it frees space or refuses writes.")
    state: Literal["ok", "freed", "waiting_for_tier", "refusing_writes"]
    segments_released: int = Field(description="Segments the last check removed (safe in the cold tier).")
    warning: str | None


class BrokerView(ApiModel):
    name: str
    cluster: str
    id: int
    identity: str = Field(description="cluster_name_id, as RocketMQ names a broker (and its log directory).")
    role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"]
    store: str
    tier: str
    in_flight: int
    quota: BrokerQuota
    replication: dict[str, Any] | None = Field(description="A master: its slave's position; a slave: its own.")
    isolated_log: bool


class BrokerList(ApiModel):
    brokers: list[BrokerView]


SEND_STATUS_HEADER = "x-tidemq-send-status"
"""The header of a produce answered by a BrokerContainer's master: RocketMQ's sendStatus (SEND_OK,
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE; functions/container/replication.py says when each)."""
