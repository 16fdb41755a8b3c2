"""What every body of the HTTP API shares: the JSON Schema spelling of the server's checks, the base model and
the error body."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from tidemq_protocol import kv as kv_model
from tidemq_protocol import names
from tidemq_protocol.filter import MAX_EXPRESSION_LENGTH, TagFilter
from tidemq_protocol.limits import DEFAULT_MAX_BATCH_MESSAGES, MAX_QUEUES
from tidemq_protocol.names import NAME_RULE
from tidemq_protocol.record import MAX_MESSAGE_GROUP, MESSAGE_GROUP, MESSAGE_ID, TIMER_DELAY_MS, TIMER_DELIVER_MS

BodyEncoding = Literal["utf-8", "base64"]

# ---- what the server enforces, declared so that docs/openapi.json says it ---------------------------
# Each pattern below is the JSON Schema spelling of a check the engine makes (tests/unit/test_models.py holds
# them equal); the checks themselves stay where they are, so their messages stay the engine's own.

MAX_JSON_INTEGER = 2**53 - 1
"""The largest offset, timestamp or duration the API takes: every JSON parser reads it exactly (JavaScript's
Number.MAX_SAFE_INTEGER), and the store keeps it (u64 keys in RocksDB, numbers in DynamoDB)."""

MAX_BATCH_MESSAGES = DEFAULT_MAX_BATCH_MESSAGES
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
JSON_RESERVED_PROPERTIES = (MESSAGE_GROUP, TIMER_DELIVER_MS, TIMER_DELAY_MS, MESSAGE_ID)
"""Property names a JSON message does not give: its fields set them (`message_group`, `delivery_time_ms`,
`delay_ms`), or the broker does (MESSAGE_ID, the message's id: UNIQ_KEY)."""
PROPERTY_NAME_SCHEMA = {
    "pattern": f"^[^{_CONTROL}]+$",
    "not": {"enum": sorted(("KEYS", "TAGS", *JSON_RESERVED_PROPERTIES))},
}
PROPERTY_VALUE_PATTERN = "^[^\\x01\\x02]*$"
"""Property names carry no control character and are not the reserved KEYS and TAGS, nor one a field sets or the
broker does (JSON_RESERVED_PROPERTIES); values carry no \\x01 or \\x02 (RocketMQ's separators in the stored
properties)."""
MessageGroup = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_MESSAGE_GROUP,
        pattern=f"^[^{_CONTROL}]+$",
        description="The message's message group (RocketMQ's messageGroup, SQS's MessageGroupId): no control "
        "characters.",
    ),
]
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
"""The push targets anyone may register, as `tidemq_protocol.push_target` reads them: a Lambda function or a webhook
(one at an IPv6 literal is taken but not declared). `python:` targets are the operator's, for local runs: taken, not
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
    if kv_model.is_kv_topic(name):
        raise ValueError(
            f"topic names starting with {kv_model.TOPIC_PREFIX} are KV namespaces' own: use /v1/kv/{{namespace}}"
        )
    return name


TOPIC_PATTERN = f"^(?!{re.escape(kv_model.TOPIC_PREFIX)}){NAME_RULE.pattern}$"
"""A topic name the API takes: not one of a KV namespace's topics (`%KV%<namespace>`, reached through /v1/kv)."""


def checked_tag_filter(expression: str) -> str:
    """`expression` if it is a tag filter (`TagFilter.parse`), else InvalidArgument saying why (a ValueError)."""
    TagFilter.parse(expression)
    return expression


TopicName = Annotated[
    names.TopicName,
    AfterValidator(_not_a_namespace_topic),
    name_schema("topic", pattern=TOPIC_PATTERN, more=f", not starting with {kv_model.TOPIC_PREFIX}"),
]
GroupName = Annotated[names.GroupName, name_schema("group")]
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
SQL_FORMAT = "rocketmq-sql92"
"""The JSON Schema format of a SQL92 filter expression (`tidemq_protocol.filter.sql`'s grammar), which no pattern
can say: the server parses it when the subscription is made, and refuses one that does not parse with a 400
(InvalidFilterExpression, with the `position` where it goes wrong)."""
SqlFilterText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_EXPRESSION_LENGTH),
    WithJsonSchema(
        {
            "type": "string",
            "format": SQL_FORMAT,
            "minLength": 1,
            "maxLength": MAX_EXPRESSION_LENGTH,
            "description": "SQL92 filter over message properties (RocketMQ's), e.g. `region = 'eu' AND amount > 100`;"
            " instead of a tag filter.",
        }
    ),
]

ONE_FILTER = {
    "not": {
        "required": ["tag", "sql"],
        "properties": {"sql": {"type": "string"}, "tag": {"type": "string", "not": {"pattern": f"^{_BLANK_OR_STAR}$"}}},
    }
}
"""A body's JSON Schema where a subscription's filter is `tag` or `sql`, never both: a `sql` with a `tag` that
filters (not blank or `*`) is refused (422; RocketMQ's subscription has one filter type): `filter.one_filter`."""


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
    position: int | None = Field(
        default=None, description="400 InvalidFilterExpression: where the expression goes wrong (0-based character)."
    )


class DependencyHealthView(ApiModel):
    """A service the server's store relies on, as last probed (a second or two ago at most)."""

    name: str = Field(description='"disk", "dynamodb", or the cold tier\'s medium: "s3" or "directory".')
    status: Literal["ok", "failing"]
    required: bool = Field(description="Whether writes need it: while it fails, the server takes no messages.")
    detail: str = Field(description="How fast it answered or how much room is left; or what went wrong.")


class Health(ApiModel):
    """ok; degraded (200: a service writes do not need is failing, e.g. the cold tier's: uploads wait); failing
    (503: one writes need is failing, or the store stopped taking writes; `message` says which and why)."""

    status: Literal["ok", "degraded", "failing"]
    message: str | None = None
    dependencies: list[DependencyHealthView] = Field(default_factory=list)
