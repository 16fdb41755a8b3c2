"""Delay and timer messages (a DELAY topic's: RocketMQ 5's DELIVERY_TIMESTAMP, SQS's DelaySeconds) as client and
broker share them: how a message says when it is due, the bounds of that, and the recall handle of one sent.

A message says when it is due in one of two properties (RocketMQ's names, record/properties.py):

    TIMER_DELIVER_MS  its delivery time, in ms since the epoch       (the JSON API's `delivery_time_ms`)
    TIMER_DELAY_MS    how long after the broker receives it, in ms   (the JSON API's `delay_ms`)

The broker makes either the time the message is due (`due_ms`): at most its TIDEMQ_TIMER_MAX_DELAY_MS ahead (3 days
by default, RocketMQ's timerMaxDelaySec; configurable up to MAX_DELAY_MS, 40 days); a time already past delivers at
once. Out of those bounds is an InvalidArgument naming the field. The message it stores carries the due time as
TIMER_DELIVER_MS, whichever the producer gave.

A timer message sent for later comes back with a recall handle beside its id (RocketMQ 5.3's RecallMessage):

    handle := base64url("v1 " topic " " msg_id), without padding

Opaque to clients, which send it back to recall the message before it is due. A handle names a topic and a timer
id (record/ids.py) and nothing else: it grants nothing (a recall is a publish to the topic, as the ACL says), and
one forged or changed names no pending timer, so it changes nothing (TimerNotFound).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime, timedelta

from .errors import InvalidArgument, TimerNotFound
from .limits import DAY_MS
from .record import TIMER_DELAY_MS, TIMER_DELIVER_MS, is_timer_id

MAX_DELAY_MS = 40 * DAY_MS
"""The longest TIDEMQ_TIMER_MAX_DELAY_MS may be (RocketMQ's timer wheel holds 40 days at most, too)."""
DEFAULT_MAX_DELAY_MS = 3 * DAY_MS
"""TIDEMQ_TIMER_MAX_DELAY_MS by default: RocketMQ's timerMaxDelaySec."""
FIELDS = {TIMER_DELIVER_MS: "delivery_time_ms", TIMER_DELAY_MS: "delay_ms"}
"""The JSON API's field of each property."""
MAX_RECALL_HANDLE = 256
"""Characters of the longest recall handle (a topic name is at most 127, an id 24)."""
_VERSION = "v1"


def delivery_properties(
    delivery_time: datetime | int | None = None, delay: timedelta | int | None = None
) -> dict[str, str]:
    """The property saying when a message is due, from a delivery time (a datetime, or ms since the epoch) or a
    delay (a timedelta, or ms): empty when neither is given; InvalidArgument when both are."""
    if delivery_time is not None and delay is not None:
        raise InvalidArgument("give a delivery time or a delay, not both")
    if delivery_time is not None:
        millis = round(delivery_time.timestamp() * 1000) if isinstance(delivery_time, datetime) else delivery_time
        return {TIMER_DELIVER_MS: str(_whole(millis, FIELDS[TIMER_DELIVER_MS]))}
    if delay is not None:
        millis = round(delay.total_seconds() * 1000) if isinstance(delay, timedelta) else delay
        return {TIMER_DELAY_MS: str(_whole(millis, FIELDS[TIMER_DELAY_MS]))}
    return {}


def _whole(value: object, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"{field} must be a non-negative integer (ms), got {value!r}")
    return value


def has_delivery(properties: Mapping[str, str]) -> bool:
    """Whether a message's properties say when it is due (a DELAY topic's messages all do, no other's does)."""
    return TIMER_DELIVER_MS in properties or TIMER_DELAY_MS in properties


def due_ms(properties: Mapping[str, str], now_ms: int, max_delay_ms: int, index: int = 0) -> int:
    """When the message `index` of a batch, whose properties these are, is due: its delivery time, or `now_ms` plus
    its delay. InvalidArgument naming the field when it is not a whole number of ms, is more than `max_delay_ms`
    ahead, or the message gives both."""
    deliver, delay = properties.get(TIMER_DELIVER_MS), properties.get(TIMER_DELAY_MS)
    if deliver is not None and delay is not None:
        raise InvalidArgument(f"message {index}: give delivery_time_ms or delay_ms, not both")
    if deliver is not None:
        due = _millis(deliver, TIMER_DELIVER_MS, index)
        if due - now_ms > max_delay_ms:
            raise InvalidArgument(
                f"message {index}: delivery_time_ms {due} is {due - now_ms} ms ahead; the limit is {max_delay_ms} ms"
                " ahead (TIDEMQ_TIMER_MAX_DELAY_MS)"
            )
        return due
    if delay is None:
        raise InvalidArgument(f"message {index} has neither delivery_time_ms nor delay_ms")
    wait = _millis(delay, TIMER_DELAY_MS, index)
    if wait > max_delay_ms:
        raise InvalidArgument(
            f"message {index}: delay_ms {wait} is more than the limit, {max_delay_ms} ms (TIDEMQ_TIMER_MAX_DELAY_MS)"
        )
    return now_ms + wait


def _millis(text: str, name: str, index: int) -> int:
    """A property's value as a whole number of ms (at most 15 digits: past the year 30000)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 15):
        raise InvalidArgument(f"message {index}: {FIELDS[name]} ({name}) must be a whole number of ms, got {text!r}")
    return int(text)


def recall_handle(topic: str, msg_id: str) -> str:
    """The recall handle of the timer message `msg_id` of `topic` (see the module docstring)."""
    return base64.urlsafe_b64encode(f"{_VERSION} {topic} {msg_id}".encode()).decode().rstrip("=")


def parse_recall_handle(handle: str, topic: str) -> str:
    """The timer id a recall handle names on `topic`; TimerNotFound if it is none of this topic's."""
    try:
        text = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    version, _, rest = text.partition(" ")
    named, _, msg_id = rest.rpartition(" ")
    if version != _VERSION or not is_timer_id(msg_id):
        raise TimerNotFound(f"recall handle {handle!r} names no timer message: it is not one this broker gave")
    if named != topic:
        raise TimerNotFound(f"recall handle {handle!r} names no timer message of topic {topic!r}")
    return msg_id.lower()
