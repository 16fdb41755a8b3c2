"""The streaming read's framing (GET /v1/topics/{topic}/queues/{queue}/stream, `CONTENT_TYPE`): one HTTP answer,
sent in chunks for as long as the consumer holds it open, made of frames back to back:

    u32 size    bytes after this field (little-endian); 0: a heartbeat, nothing follows
    ... batch   a consume batch exactly as GET .../batch answers it (`tidemq_protocol.codec`: its head, then the
                records as stored), the next frame starting at its `next_offset`

A frame is sent as soon as the broker stored a message past the previous one's `next_offset`; an idle stream
sends a heartbeat every `HEARTBEAT_HEADER` milliseconds, so each side learns when the other is gone. Frames
are whole: a client splits the bytes it reads on the sizes, never on the transport's chunks.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from .errors import CorruptStore

CONTENT_TYPE = "application/x-tidemq-stream"
HEARTBEAT_HEADER = "x-tidemq-heartbeat-ms"
"""Response header: how often (ms) the server sends a heartbeat on an idle stream."""

_SIZE = struct.Struct("<I")
HEARTBEAT = _SIZE.pack(0)


def frame(batch: bytes) -> bytes:
    """The frame carrying one consume batch (`codec.encode_consume`'s bytes)."""
    return _SIZE.pack(len(batch)) + batch


def read_frame(read: Callable[[int], bytes]) -> bytes | None:
    """The next frame's batch from `read` (a file's read: up to n bytes, fewer only at the end), None for a
    heartbeat; EOFError when the stream ended between frames, CorruptStore when it ended inside one."""
    head = read(_SIZE.size)
    if not head:
        raise EOFError("the stream ended")
    if len(head) < _SIZE.size:
        raise CorruptStore("the stream ended inside a frame's size")
    (size,) = _SIZE.unpack(head)
    if size == 0:
        return None
    batch = read(size)
    if len(batch) < size:
        raise CorruptStore(f"the stream ended {size - len(batch)} bytes short of a frame's end")
    return batch
