"""A topic's or group's `attributes`: their bounds, and the ones TideMQ itself reads (`TopicPolicy`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from .errors import InvalidArgument
from .limits import DAY_MS

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
    segments older than `storage_class_after_ms` move to (None: they stay STANDARD), and whether the broker traces
    its messages (`trace.enabled`, default true). Other attributes are the
    user's own and mean nothing to TideMQ."""

    cleanup: CleanupPolicy = CleanupPolicy.DELETE
    tombstone_grace_ms: int = DAY_MS
    storage_class: StorageClass | None = None
    storage_class_after_ms: int = 30 * DAY_MS
    trace: bool = True

    CLEANUP = "cleanup.policy"
    TOMBSTONE_GRACE_MS = "compaction.tombstone_grace_ms"
    STORAGE_CLASS = "tier.storage_class"
    STORAGE_CLASS_AFTER_MS = "tier.storage_class_after_ms"
    TRACE = "trace.enabled"  # "false": the broker records no trace of the topic's messages (functions/logic/trace.py)

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

        def flag(name: str) -> bool:
            value = attributes.get(name, "true")
            if value not in ("true", "false"):
                raise InvalidArgument(f"attribute {name}={value!r} must be true or false")
            return value == "true"

        default = cls()
        return cls(
            cleanup=choice(cls.CLEANUP, CleanupPolicy) or default.cleanup,
            tombstone_grace_ms=milliseconds(cls.TOMBSTONE_GRACE_MS, default.tombstone_grace_ms),
            storage_class=choice(cls.STORAGE_CLASS, StorageClass),
            storage_class_after_ms=milliseconds(cls.STORAGE_CLASS_AFTER_MS, default.storage_class_after_ms),
            trace=flag(cls.TRACE),
        )


def check_topic_attributes(attributes: dict[str, str]) -> dict[str, str]:
    """Return a topic's `attributes` if the ones TideMQ reads (TopicPolicy) hold valid values, else raise."""
    TopicPolicy.of(attributes)
    return attributes


TopicAttributes = Annotated[Attributes, AfterValidator(check_topic_attributes)]
"""A topic's attributes as a caller sets them: `Attributes`, with TopicPolicy's names checked."""
