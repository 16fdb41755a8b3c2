"""A record's properties: its keys, its tag and its user properties, in RocketMQ's encoding.

    properties := (name 0x01 value 0x02)*        UTF-8; empty when a message has none

KEYS holds the message keys joined by single spaces (a key has no space), TAGS the tag; every other name is a user
property (at most MAX_PROPERTIES of them). One of those names is the broker's too: MESSAGE_GROUP holds a message's
message group (RocketMQ 5's messageGroup, SQS's MessageGroupId), under the name RocketMQ 5 stores it by
(`__SHARDINGKEY`), so a record carries its group in every encoding (JSON produce, frames, records) and to every
reader. Its value is at most MAX_MESSAGE_GROUP characters, none a control character; a message without one has no
group (a FIFO topic takes only messages with one, any other topic only messages without: tidemq_store/batch.py).
A delay message (a DELAY topic's) carries its delivery time as TIMER_DELIVER_MS or TIMER_DELAY_MS, RocketMQ's
names (tidemq_protocol.timer says how).
All of it encoded fits in properties_length's 2 bytes, less its sign as RocketMQ has it (MAX_PROPERTIES_BYTES). A
producer encodes them (`encode_properties`) and the broker takes only what that would have made
(`check_properties`).

MESSAGE_ID (RocketMQ's `UNIQ_KEY`, the message id a client sees) is the broker's alone: a record that carries it
has that id rather than its position's (ids.py), so a message the broker moves keeps the id it was given (the
embedded engine's committed transactional messages, tidemq_store/transactions; a timer message once due, with its
timer id: tidemq_store/timer), and a message a RocketMQ 5 client
sent through the gRPC proxy has the id the client gave it (`Message.msg_id`), as RocketMQ has it. Readers take it out
of the properties into the message's id (reader.py); a producer's properties may not name it (`encode_properties`
refuses it: it would forge an id), and the broker adds it with `with_message_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..errors import InvalidArgument

MAX_PROPERTIES_BYTES = 32767  # RocketMQ's Short.MAX_VALUE limit on encoded properties
MAX_PROPERTIES = 128  # user properties of one message, besides its keys and tag

KEYS = "KEYS"
TAGS = "TAGS"
RESERVED_PROPERTIES = frozenset({KEYS, TAGS})
MESSAGE_GROUP = "__SHARDINGKEY"
MAX_MESSAGE_GROUP = 128  # SQS's bound on a MessageGroupId
MESSAGE_ID = "UNIQ_KEY"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # a delay message's delivery time, ms since the epoch (tidemq_protocol.timer)
TIMER_DELAY_MS = "TIMER_DELAY_MS"  # ... or its delay after the broker receives it; the broker keeps TIMER_DELIVER_MS
_NAME_SEP, _PROP_SEP = "\x01", "\x02"


def _check_text(what: str, value: object, *, spaces: bool) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string")
    if any(ord(c) < 0x20 for c in value) or (not spaces and any(c.isspace() for c in value)):
        raise InvalidArgument(
            f"{what} {value!r} must not contain control characters" + ("" if spaces else " or spaces")
        )
    return value


def encode_properties(keys: tuple[str, ...], tag: str | None, properties: Mapping[str, str]) -> bytes:
    """Validate and encode a message's keys, tag and user properties (empty bytes when there are none)."""
    if not keys and tag is None and not properties:
        return b""
    parts = []
    if keys:
        if isinstance(keys, str):
            raise InvalidArgument("keys must be a list of strings, not one string")
        parts.append(KEYS + _NAME_SEP + " ".join(_check_text("message key", k, spaces=False) for k in keys))
    if tag is not None:
        _check_text("tag", tag, spaces=True)
        if "||" in tag or tag.strip() in ("", "*"):
            raise InvalidArgument(f"tag {tag!r} must not be '*' or contain '||'")
        parts.append(TAGS + _NAME_SEP + tag)
    if len(properties) > MAX_PROPERTIES:
        raise InvalidArgument(f"a message has at most {MAX_PROPERTIES} properties, got {len(properties)}")
    for name, value in properties.items():
        _check_text("property name", name, spaces=True)
        if name in RESERVED_PROPERTIES:
            raise InvalidArgument(f"property name {name!r} is reserved; use the message's keys and tag")
        if name == MESSAGE_ID:
            raise InvalidArgument(f"property name {name!r} is reserved: the broker writes a message's id")
        if not isinstance(value, str) or _NAME_SEP in value or _PROP_SEP in value:
            raise InvalidArgument(f"property {name!r} must be a string without \\x01 or \\x02")
        if name == MESSAGE_GROUP:
            check_message_group(value)
        parts.append(name + _NAME_SEP + value)
    encoded = (_PROP_SEP.join(parts) + _PROP_SEP).encode()
    if len(encoded) > MAX_PROPERTIES_BYTES:
        raise InvalidArgument(f"properties take {len(encoded)} bytes encoded; the limit is {MAX_PROPERTIES_BYTES}")
    return encoded


def with_message_id(raw: bytes, msg_id: str) -> bytes:
    """Encoded properties `raw` (as `encode_properties` made them) that also give the message the id `msg_id`
    (MESSAGE_ID: the broker's, never a producer's)."""
    encoded = raw + (MESSAGE_ID + _NAME_SEP + msg_id + _PROP_SEP).encode()
    if len(encoded) > MAX_PROPERTIES_BYTES:
        raise InvalidArgument(f"properties take {len(encoded)} bytes encoded; the limit is {MAX_PROPERTIES_BYTES}")
    return encoded


def check_message_group(group: object) -> str:
    """`group` if it is a message group's name, else InvalidArgument saying why."""
    name = _check_text("message_group", group, spaces=True)
    if len(name) > MAX_MESSAGE_GROUP:
        raise InvalidArgument(f"message_group is {len(name)} characters long; the limit is {MAX_MESSAGE_GROUP}")
    return name


def message_group_of(properties: Mapping[str, str]) -> str | None:
    """The message group a message's properties name, or None."""
    return properties.get(MESSAGE_GROUP)


RESENT_FOR_GROUP = "RESENT_FOR_GROUP"
"""Set on a dead letter put back on its origin topic (functions/logic/dead_letters.py): the one consumer group it was
resent for. The broker's pop and push hand such a message to that group only; every other group passes over it."""


def addressed_to(properties: Mapping[str, str], group: str) -> bool:
    """Whether a message is for consumer `group`: every message is, but one resent for another group."""
    return properties.get(RESENT_FOR_GROUP, group) == group


def decode_properties(raw: bytes) -> tuple[tuple[str, ...], str | None, dict[str, str]]:
    """Split encoded properties into (keys, tag, user properties)."""
    if not raw:
        return (), None, {}
    props = dict(pair.split(_NAME_SEP, 1) for pair in raw.decode().split(_PROP_SEP) if pair)
    keys = props.pop(KEYS, None)
    return (tuple(keys.split(" ")) if keys else ()), props.pop(TAGS, None), props


class CheckedProperties(NamedTuple):
    """What the broker keeps of a producer's properties besides their bytes (`properties`: the user properties)."""

    keys: tuple[str, ...]
    tag: str | None
    message_group: str | None
    properties: dict[str, str]


def check_properties(raw: bytes) -> CheckedProperties:
    """A producer's encoded properties, checked as `encode_properties` checks them when it encodes: its keys, tag
    and message group, or InvalidArgument saying what is wrong (they must be exactly what `encode_properties` would
    have made)."""
    try:
        keys, tag, properties = decode_properties(raw)
    except (UnicodeDecodeError, ValueError):
        raise InvalidArgument("properties are not `name\\x01value\\x02` pairs of UTF-8 text") from None
    if encode_properties(keys, tag, properties) != raw:
        raise InvalidArgument("properties are not encoded as tidemq_protocol.record.encode_properties encodes them")
    return CheckedProperties(keys, tag, message_group_of(properties), properties)


def property_map(keys: tuple[str, ...], tag: str | None, properties: Mapping[str, str]) -> dict[str, str]:
    """A decoded message's properties by the names they are stored under, KEYS and TAGS included (what
    `PropertiesView` reads from a record's bytes): the properties a SQL92 filter sees."""
    found = dict(properties)
    if keys:
        found[KEYS] = " ".join(keys)
    if tag is not None:
        found[TAGS] = tag
    return found


_NAME_END, _VALUE_END = _NAME_SEP.encode(), _PROP_SEP.encode()[0]


class PropertiesView:
    """A record's encoded properties read where they lie, `data[start:end]`, one name at a time and by the name it
    is stored under (KEYS and TAGS included): what a SQL92 filter reads of a record it may pass over, without
    decoding the record, or even all of its properties. `get` is a `Mapping.get` of `property_map`'s result."""

    __slots__ = ("data", "end", "start")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.data, self.start, self.end = data, start, end

    def get(self, name: str) -> str | None:
        """The value of property `name`, or None if the record has none."""
        data, start, end = self.data, self.start, self.end
        key = name.encode() + _NAME_END
        found = data.find(key, start, end)
        while found >= 0:
            if found == start or data[found - 1] == _VALUE_END:  # a whole name, not the end of a longer one
                value = found + len(key)
                value_end = data.find(_VALUE_END, value, end)
                # unchecked bytes: a damaged one decodes to U+FFFD; a record chosen by it is checked when read
                return data[value : value_end if value_end >= 0 else end].decode(errors="replace")
            found = data.find(key, found + 1, end)
        return None
