"""Message ids: where a message's record is, so that an id is read without any index; and timer ids.

    id := hex(physical_offset, 16 digits) hex(total_size, 8 digits)      24 lowercase hexadecimal digits

The position is a commit-log position (the serverless backend's: a segment file's key and a position in it,
tidemq_store/serverless/segments.py). Ids come from clients, so a lookup trusts no part of one: `read_by_id`
(reader.py) reads at most the largest record the store writes, and only once the header found at that position
names that position and size.

A timer message (a DELAY topic's, sent for later: tidemq_store/timer) has its id from its send, before it has a
record on its topic, and keeps it once delivered (its record carries it, properties.MESSAGE_ID). Its id has the
same 24 digits, laid out otherwise:

    timer id := hex(due_ms, 12 digits) hex(random, 4 digits) hex(2^31 | random, 8 digits)

the time it is due first, so that timer ids sort by due time as the timer stores keep them, then 47 random bits.
Read as a record's id, its last 8 digits are a size of 2 GiB or more, which no record has: `is_timer_id` tells
the two kinds apart, and a lookup of a timer id by position finds nothing.
"""

from __future__ import annotations

import secrets
import struct

from ..errors import MessageNotFound

ID = struct.Struct(">QI")  # physical_offset, total_size: the 12 bytes an id spells in hexadecimal
TIMER_FLAG = 0x8000_0000  # set in a timer id's last 4 bytes: no record is that large
MAX_DUE_MS = (1 << 48) - 1  # a timer id holds its due time in 48 bits (until the year 10889)


def message_id(physical_offset: int, size: int) -> str:
    return ID.pack(physical_offset, size).hex()


def parse_message_id(msg_id: str) -> tuple[int, int]:
    """Return (physical_offset, size) from a message id, or raise MessageNotFound if it is not one."""
    if isinstance(msg_id, str) and len(msg_id) == 24:
        try:
            location = int.from_bytes(bytes.fromhex(msg_id), "big")
            return location >> 32, location & 0xFFFFFFFF
        except ValueError:
            pass
    raise MessageNotFound(f"with id {msg_id!r}: an id is 24 hexadecimal digits")


def new_timer_id(due_ms: int) -> str:
    """A fresh id for a timer message due at `due_ms` (clamped to 0..MAX_DUE_MS), random past its due time."""
    due = min(max(due_ms, 0), MAX_DUE_MS)
    return ID.pack(due << 16 | secrets.randbits(16), TIMER_FLAG | secrets.randbits(31)).hex()


def is_timer_id(msg_id: str) -> bool:
    """Whether `msg_id` is a timer message's id (False for a record's, and for anything that is no id)."""
    try:
        return bool(parse_message_id(msg_id)[1] & TIMER_FLAG)
    except MessageNotFound:
        return False


def timer_due_ms(msg_id: str) -> int:
    """The due time a timer id holds (MessageNotFound if it is no timer id)."""
    physical, size = parse_message_id(msg_id)
    if not size & TIMER_FLAG:
        raise MessageNotFound(f"with id {msg_id}: not a timer message's id")
    return physical >> 16
