"""The values that cross the `MessageStore` API besides the messages (`tidemq_protocol.message`): topic and group
configs, results, pages.

Names follow RocketMQ: a topic has `queues` numbered 0..n-1, each an ordered log addressed by a dense
`queue_offset`; `max_offset` is the offset the next message will get (so a queue holds
[min_offset, max_offset)).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tidemq_protocol.attributes import Attributes
from tidemq_protocol.errors import InvalidArgument, QueueOutOfRange
from tidemq_protocol.limits import HOUR_MS, MAX_QUEUES
from tidemq_protocol.message import MessageType, StoredMessage
from tidemq_protocol.names import GroupName, TopicName
from tidemq_protocol.push import LEGACY_RETRY_FIELDS, PushSpec
from tidemq_protocol.retry import MAX_DELAY_MS, MAX_DELIVERY_ATTEMPTS, ExponentialBackoff, RetryPolicy


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


class TopicConfig(BaseModel):
    """A topic's metadata. `retention_ms=None` keeps messages until the topic is deleted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: TopicName
    queues: int = Field(default=8, ge=1, le=MAX_QUEUES)
    retention_ms: int | None = Field(default=72 * HOUR_MS, ge=1000)
    message_type: MessageType = MessageType.NORMAL
    attributes: Attributes = Field(default_factory=dict)
    created_at: int = 0


class PushSubscription(PushSpec):
    """What the store keeps of a group's push delivery: its `PushSpec` and the secret its deliveries are signed
    with (generated when the subscription is set, for the targets that are signed; None for the others)."""

    signing_secret: str | None = Field(default=None, repr=False, description="Key of the deliveries' HMAC.")


class GroupConfig(BaseModel):
    """A consumer (subscription) group's metadata; `push` set makes it a push group. `retry` is how often and when
    its messages are delivered again, pop or push (None, or a field of it None: the server's defaults). A `fifo`
    group consumes a FIFO topic's messages of one message group in order, one batch of a group at a time
    (RocketMQ 5's FIFO subscription; pop/receive.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: GroupName
    attributes: Attributes = Field(default_factory=dict)
    fifo: bool = False
    push: PushSubscription | None = None
    retry: RetryPolicy | None = None
    created_at: int = 0

    @model_validator(mode="before")
    @classmethod
    def _legacy_push_retry(cls, data: object) -> object:
        """A group stored when push subscriptions had retry fields of their own (max_attempts, backoff_base_ms
        doubling up to backoff_max_ms) loads with them as its retry policy, so it retries as it did (less the
        jitter), and its subscription without them."""
        push = data.get("push") if isinstance(data, dict) else None
        if not isinstance(push, dict) or not any(name in push for name in LEGACY_RETRY_FIELDS):
            return data
        legacy = {name: push[name] for name in LEGACY_RETRY_FIELDS if name in push}
        push = {name: value for name, value in push.items() if name not in LEGACY_RETRY_FIELDS}
        retry = data.get("retry")
        if retry is None:
            initial = min(legacy.get("backoff_base_ms", 1000), MAX_DELAY_MS)
            retry = RetryPolicy(
                max_delivery_attempts=min(legacy.get("max_attempts", 16), MAX_DELIVERY_ATTEMPTS),
                backoff=ExponentialBackoff(
                    initial_ms=initial, multiplier=2, max_ms=min(legacy.get("backoff_max_ms", 300_000), MAX_DELAY_MS)
                ),
            )
        return {**data, "push": push, "retry": retry}


@dataclass(slots=True)
class PutResult:
    """Where a put's message went. A timer message (a DELAY topic's, due later) is on no queue yet: its queue_offset
    is -1 until it is delivered, and `recall_handle` recalls it until then (None for every other message)."""

    msg_id: str
    queue: int
    queue_offset: int
    store_timestamp: int
    recall_handle: str | None = None


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
    """Records read from one queue as they are stored (`tidemq_protocol.record` format), for zero-copy
    delivery: the reader decodes and CRC-checks them (`record.decode_records`). With a tag filter,
    a record whose tag merely shares the tag code can slip through: readers confirm the tag."""

    records: bytes
    count: int
    next_offset: int
    min_offset: int
    max_offset: int
