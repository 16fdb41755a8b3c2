"""The HTTP API's body for a message's trace (`GET /v1/messages/{id}/trace`): what the broker recorded of the
message, oldest first. The record format and its design are functions/logic/trace.py's."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .common import ApiModel


class TraceEventKind(StrEnum):
    """What happened to a message (each event's `event`)."""

    STORED = "stored"  # put on its queue (produce, a resend, a committed transaction)
    DELIVERED = "delivered"  # first delivery to a group (pop or push)
    RETRIED = "retried"  # a later delivery to a group (attempt 2 on)
    ACKED = "acked"
    NACKED = "nacked"  # given back (pop release), visible again after its backoff
    INVISIBLE_CHANGED = "invisible_changed"  # a pop delivery's invisible time changed
    DEAD_LETTERED = "dead_lettered"  # put to the group's `%DLQ%<group>`
    RESENT = "resent"  # its dead letter resent to its topic as a new message
    # seen in the store's state when the trace is read (not recorded: their time is the read's)
    TIERED = "tiered"  # moved to the cold tier: the tier holds its offset
    EXPIRED = "expired"  # its queue's retention passed it
    COMPACTED = "compacted"  # removed by key compaction (a later message has its key)


class TraceEvent(ApiModel):
    """One event: its kind, when (ns since the epoch, the recording broker's clock) and its attributes, named as
    OpenTelemetry's messaging conventions name them (`messaging.operation.type`, `messaging.destination.name`,
    `messaging.consumer.group.name`, `messaging.message.id`, ...) or `tidemq.*` where they have no name."""

    event: TraceEventKind
    time_unix_nano: int
    attributes: dict[str, str | int]


class MessageTrace(ApiModel):
    """A message's trace, oldest event first. `note` says why it is empty or short (the topic opts out, trace is
    off, the records expired), so an empty trace is never silent."""

    msg_id: str
    topic: str = Field(description="The message's topic.")
    events: list[TraceEvent]
    note: str | None = None
