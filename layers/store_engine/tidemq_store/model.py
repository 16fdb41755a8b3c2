"""The values that cross the `MessageStore` API: messages in and out, topic and group configs, results.

Names follow RocketMQ: a topic has `queues` numbered 0..n-1, each an ordered log addressed by a dense
`queue_offset`; `max_offset` is the offset the next message will get (so a queue holds
[min_offset, max_offset)).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Annotated, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from .errors import InvalidArgument, InvalidName, QueueOutOfRange

NAME_RULE = re.compile(r"[A-Za-z0-9_%|-]{1,127}")
"""RocketMQ's rule for topic and group names: letters, digits, `_ % | -`, at most 127 characters."""

HOUR_MS = 3_600_000
MAX_QUEUES = 1024

MAX_ATTRIBUTES = 32
MAX_ATTRIBUTE_NAME_CHARS = 64
MAX_ATTRIBUTE_VALUE_CHARS = 256
MAX_ATTRIBUTES_BYTES = MAX_ATTRIBUTES * (MAX_ATTRIBUTE_NAME_CHARS + MAX_ATTRIBUTE_VALUE_CHARS) * 4
"""A topic's or group's `attributes`: at most 32 names of 1..64 characters with values of at most 256, so at most
40 KiB in UTF-8 (4 bytes a character at worst). A config is one DynamoDB item (400 KB at most) and one entry of a
listing page; bounding it by characters keeps the bound declarable in the API's JSON schema."""

Attributes = Annotated[
    dict[
        Annotated[str, StringConstraints(min_length=1, max_length=MAX_ATTRIBUTE_NAME_CHARS)],
        Annotated[str, StringConstraints(max_length=MAX_ATTRIBUTE_VALUE_CHARS)],
    ],
    Field(max_length=MAX_ATTRIBUTES),
]


DAY_MS = 24 * HOUR_MS
MAX_ATTRIBUTE_MS = 100 * 365 * DAY_MS  # the longest duration an attribute may give


class CleanupPolicy(StrEnum):
    """What happens to a topic's old messages (the attribute `cleanup.policy`, as in RocketMQ 5 and Kafka)."""

    DELETE = "DELETE"  # retention deletes whole segments past `retention_ms` (the default)
    COMPACTION = "COMPACTION"  # the Spark key compaction keeps the newest message per key (RIP-30's CompactionTopic)


class StorageClass(StrEnum):
    """The cheaper S3 classes old cold segments may move to: both serve reads directly, as the tier needs."""

    STANDARD_IA = "STANDARD_IA"
    GLACIER_IR = "GLACIER_IR"


@dataclass(frozen=True, slots=True)
class TopicPolicy:
    """What a topic's attributes ask of the pipeline that keeps its cold tier, parsed once: `cleanup`, how long a
    tombstone (an empty body) of a compacted topic stays (Kafka's delete.retention.ms), and which storage class
    segments older than `storage_class_after_ms` move to (None: they stay STANDARD). Other attributes are the
    user's own and mean nothing to TideMQ."""

    cleanup: CleanupPolicy = CleanupPolicy.DELETE
    tombstone_grace_ms: int = DAY_MS
    storage_class: StorageClass | None = None
    storage_class_after_ms: int = 30 * DAY_MS

    CLEANUP = "cleanup.policy"
    TOMBSTONE_GRACE_MS = "compaction.tombstone_grace_ms"
    STORAGE_CLASS = "tier.storage_class"
    STORAGE_CLASS_AFTER_MS = "tier.storage_class_after_ms"

    @classmethod
    def of(cls, attributes: Mapping[str, str]) -> TopicPolicy:
        """The policy `attributes` ask for; raises InvalidArgument naming the attribute that is wrong and why."""

        def choice(name: str, kind: type[StrEnum]) -> StrEnum | None:
            value = attributes.get(name)
            if value is None:
                return None
            if value not in kind.__members__:
                raise InvalidArgument(f"attribute {name}={value!r} must be one of {', '.join(kind.__members__)}")
            return kind(value)

        def milliseconds(name: str, default: int) -> int:
            value = attributes.get(name)
            if value is None:
                return default
            if not value.isascii() or not value.isdigit() or int(value) > MAX_ATTRIBUTE_MS:
                raise InvalidArgument(
                    f"attribute {name}={value!r} must be a number of milliseconds, 0..{MAX_ATTRIBUTE_MS}"
                )
            return int(value)

        default = cls()
        return cls(
            cleanup=choice(cls.CLEANUP, CleanupPolicy) or default.cleanup,
            tombstone_grace_ms=milliseconds(cls.TOMBSTONE_GRACE_MS, default.tombstone_grace_ms),
            storage_class=choice(cls.STORAGE_CLASS, StorageClass),
            storage_class_after_ms=milliseconds(cls.STORAGE_CLASS_AFTER_MS, default.storage_class_after_ms),
        )


def check_topic_attributes(attributes: dict[str, str]) -> dict[str, str]:
    """Return a topic's `attributes` if the ones TideMQ reads (TopicPolicy) hold valid values, else raise."""
    TopicPolicy.of(attributes)
    return attributes


TopicAttributes = Annotated[Attributes, AfterValidator(check_topic_attributes)]
"""A topic's attributes as a caller sets them: `Attributes`, with TopicPolicy's names checked."""


def check_name(kind: str, name: object) -> str:
    """Return `name` if it is a valid topic/group name, else raise `InvalidName` saying why."""
    if not isinstance(name, str):
        raise InvalidName(f"{kind} name must be a string, got {type(name).__name__}")
    if not NAME_RULE.fullmatch(name):
        if not name:
            raise InvalidName(f"{kind} name must not be empty")
        if len(name) > 127:
            raise InvalidName(f"{kind} name is {len(name)} characters long; the limit is 127")
        bad = sorted({c for c in name if not NAME_RULE.fullmatch(c)})
        raise InvalidName(f"{kind} name {name!r} has characters outside [A-Za-z0-9_%|-]: {''.join(bad)!r}")
    return name


def check_queue(config: TopicConfig, queue: object) -> int:
    """Return `queue` if it is one of the topic's queues, else raise `QueueOutOfRange`."""
    if not isinstance(queue, int) or isinstance(queue, bool) or not 0 <= queue < config.queues:
        raise QueueOutOfRange(config.name, queue, config.queues)  # type: ignore[arg-type]
    return queue


def check_page_limit(limit: object) -> int:
    """Return `limit` if it is a valid page size for listings (1..1000), else raise `InvalidArgument`."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise InvalidArgument(f"limit must be 1..1000, got {limit!r}")
    return limit


M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class Page(list[T]):
    """One page of a listing (topics, groups) in name order: at most the `limit` asked for, and past its first item
    at most `StoreConfig.max_page_bytes` of stored configs, so that no page outgrows a Lambda response (6 MB).
    `next_after` is where the next page starts; None when nothing follows."""

    def __init__(self, items: list[T], next_after: str | None) -> None:
        super().__init__(items)
        self.next_after = next_after


C = TypeVar("C", bound=BaseModel)  # a stored config with a `name`: a topic, a group, a user


def take_page(stored: Iterable[str | bytes], model: type[C], limit: int, max_bytes: int) -> Page[C]:
    """A page of the configs `stored` holds as JSON, in name order: the first `limit`, stopping before the one that
    would take the page past `max_bytes` of JSON (the first always fits), which is read but not decoded."""
    items: list[C] = []
    size = 0
    for raw in stored:
        if items and size + len(raw) > max_bytes:
            return Page(items, items[-1].name)
        items.append(model.model_validate_json(raw))
        size += len(raw)
        if len(items) == limit:
            return Page(items, items[-1].name)
    return Page(items, None)


def validated(model: type[M], data: dict) -> M:
    """Build a model, turning pydantic's ValidationError into InvalidArgument naming the field."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or model.__name__
        raise InvalidArgument(f"{field}: {first['msg']}") from None


class MessageType(StrEnum):
    """RocketMQ 5's topic message types; a topic accepts one kind."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"


TopicName = Annotated[str, AfterValidator(partial(check_name, "topic"))]
GroupName = Annotated[str, AfterValidator(partial(check_name, "group"))]


class TopicConfig(BaseModel):
    """A topic's metadata. `retention_ms=None` keeps messages until the topic is deleted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: TopicName
    queues: int = Field(default=8, ge=1, le=MAX_QUEUES)
    retention_ms: int | None = Field(default=72 * HOUR_MS, ge=1000)
    message_type: MessageType = MessageType.NORMAL
    attributes: Attributes = Field(default_factory=dict)
    created_at: int = 0


class PushSpec(BaseModel):
    """What a group's push delivery (RocketMQ's push consumer) is asked to do: the topic and tag filter it
    delivers, the target, the batch size and the retry policy, each field bounded. The store never delivers: the
    functions check how `target` is written when a subscription is set, and deliver to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: TopicName
    target: str = Field(min_length=1, description="Where messages go, as given when the subscription was set.")
    tag: str = Field(default="*", description="Tag filter: `*`, or tags joined by `||`.")
    max_attempts: int = Field(default=16, ge=1, le=1000, description="Calls per batch before it is dead-lettered.")
    batch_size: int = Field(default=1, ge=1, le=1000, description="Most messages in one call.")
    backoff_base_ms: int = Field(default=1000, ge=1, description="Wait before the first retry; doubles each time.")
    backoff_max_ms: int = Field(
        default=300_000, ge=1, description="Longest wait between two attempts (below backoff_base_ms: every wait)."
    )

    @field_validator("tag")
    @classmethod
    def _tag_filter(cls, tag: str) -> str:
        TagFilter.parse(tag)
        return tag


class PushSubscription(PushSpec):
    """What the store keeps of a group's push delivery: its `PushSpec` and the secret its deliveries are signed
    with (generated when the subscription is set, for the targets that are signed; None for the others)."""

    signing_secret: str | None = Field(default=None, repr=False, description="Key of the deliveries' HMAC.")


class GroupConfig(BaseModel):
    """A consumer (subscription) group's metadata; `push` set makes it a push group."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: GroupName
    attributes: Attributes = Field(default_factory=dict)
    push: PushSubscription | None = None
    created_at: int = 0


@dataclass(slots=True)
class Message:
    """A message to store. `queue` is chosen by the caller (the produce logic routes sharding keys)."""

    body: bytes
    queue: int = 0
    keys: tuple[str, ...] = ()
    tag: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    born_timestamp: int | None = None


@dataclass(slots=True)
class StoredMessage:
    """A message read back from the store, with where and when it was stored."""

    topic: str
    queue: int
    queue_offset: int
    msg_id: str
    born_timestamp: int
    store_timestamp: int
    body: bytes
    keys: tuple[str, ...]
    tag: str | None
    properties: dict[str, str]


@dataclass(slots=True)
class PutResult:
    msg_id: str
    queue: int
    queue_offset: int
    store_timestamp: int


@dataclass(slots=True, frozen=True)
class QueueOffsets:
    """The readable range [min_offset, max_offset) of one queue."""

    queue: int
    min_offset: int
    max_offset: int


@dataclass(slots=True, frozen=True)
class TierQueueStatus:
    """Where one queue's messages are: hot from `hot_min_offset`, cold in [cold_min_offset, cold_max_offset)
    (None: nothing in the tier), and how far the upload lags (acknowledged messages not yet in the tier)."""

    queue: int
    hot_min_offset: int
    cold_min_offset: int | None
    cold_max_offset: int | None
    max_offset: int
    upload_lag_messages: int
    upload_lag_seconds: float


@dataclass(slots=True)
class GetResult:
    """Messages read from one queue. `next_offset` is where the next read should start: past every
    entry examined, including those a tag filter skipped."""

    messages: list[StoredMessage]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(slots=True)
class RecordBatch:
    """Records read from one queue as they are stored (`tidemq_store.record` format), for zero-copy
    delivery: the reader decodes and CRC-checks them (`record.decode_records`). With a tag filter,
    a record whose tag merely shares the tag code can slip through: readers confirm the tag."""

    records: bytes
    count: int
    next_offset: int
    min_offset: int
    max_offset: int


def tag_hash(tag: str | None) -> int:
    """The 32-bit tag code kept in each ConsumeQueue entry (0 for no tag); reads confirm the real tag."""
    return zlib.crc32(tag.encode()) if tag else 0


@dataclass(slots=True, frozen=True)
class TagFilter:
    """RocketMQ's tag expression: `*` (or empty) matches everything, `TagA || TagB` matches either tag."""

    tags: frozenset[str]

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter | None:
        """Return a filter, or None when the expression matches every message."""
        if expression is None or expression.strip() in ("", "*"):
            return None
        tags = [part.strip() for part in expression.split("||")]
        if any(not tag or tag == "*" for tag in tags):
            raise InvalidArgument(f"tag filter {expression!r} must be '*' or tags joined by '||'")
        return cls(frozenset(tags))

    @property
    def codes(self) -> frozenset[int]:
        return frozenset(tag_hash(tag) for tag in self.tags)

    def matches(self, tag: str | None) -> bool:
        return tag in self.tags
