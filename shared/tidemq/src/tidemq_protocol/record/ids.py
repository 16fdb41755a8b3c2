"""Message ids: where a message's record is, so that an id is read without any index.

    id := hex(physical_offset, 16 digits) hex(total_size, 8 digits)      24 lowercase hexadecimal digits

The position is a commit-log position (the serverless backend's: a segment file's key and a position in it,
tidemq_store/serverless/segments.py). Ids come from clients, so a lookup trusts no part of one: `read_by_id`
(reader.py) reads at most the largest record the store writes, and only once the header found at that position
names that position and size.
"""

from __future__ import annotations

import struct

from ..errors import MessageNotFound

ID = struct.Struct(">QI")  # physical_offset, total_size: the 12 bytes an id spells in hexadecimal


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
