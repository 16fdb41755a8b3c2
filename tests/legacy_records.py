"""Version 1 commit-log records as the code before version 2 wrote them, to build stores of that era in tests.

`encode_v1_batch` is that code's `record.encode_batch`, kept as it was (the engine only reads version 1 now);
`append_v1_put` puts its output at the end of a closed embedded store's commit log, as that code's put did.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from crc32c import crc32c

from tidemq_protocol.record import END_OF_BATCH, MAGIC_V1, PendingRecord

_HEAD = struct.Struct("<IBI")  # total_size, magic, crc
_REST = struct.Struct("<BIQQQQBHI")  # flags .. body_length: the CRC'd part of the header
HEADER_SIZE_V1 = _HEAD.size + _REST.size  # 53


def encode_v1_batch(topic: bytes, records: list[PendingRecord], physical_start: int, store_timestamp: int) -> bytes:
    parts: list[bytes] = []
    fixed, topic_length, last = HEADER_SIZE_V1 + len(topic), len(topic), len(records) - 1
    position = physical_start
    for i, (queue, queue_offset, born, props, body) in enumerate(records):
        size = fixed + len(props) + len(body)
        flags = END_OF_BATCH if i == last else 0
        rest = (
            _REST.pack(flags, queue, queue_offset, position, born, store_timestamp, topic_length, len(props), len(body))
            + topic
            + props
        )
        parts += (_HEAD.pack(size, MAGIC_V1, crc32c(body, crc32c(rest))), rest, body)
        position += size
    return b"".join(parts)


def append_v1_put(home: Path, topic: str, records: list[PendingRecord], store_timestamp: int) -> int:
    """Append one put of version 1 records to the commit log of the closed embedded store in `home`, durably;
    return the position it starts at."""
    segments = sorted((home / "commitlog").iterdir())
    last = segments[-1]
    start = int(last.name) + last.stat().st_size
    with open(last, "ab") as file:
        file.write(encode_v1_batch(topic.encode(), records, start, store_timestamp))
        file.flush()
        os.fsync(file.fileno())
    return start
