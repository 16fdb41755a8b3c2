"""The broker's check of what a producer sends: version 2 records (v2.py), back to back, each checked as every
record read is (`reader.check_records`) and, besides, whole, of version 2 and of the topic produced to.

A producer encodes its records itself (`v2.encode_record`); the broker takes them only if every byte is as the
producer made it, and then writes its own fields in place (`v2.stamp`). What is wrong is an InvalidArgument naming
the record by its index in the batch.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import InvalidArgument, InvalidBatch
from . import v2
from .reader import BROKER_CRC, CRC, MAGIC_AT, SIZE, check_records

_WORDS = {  # what the reader's checks say to a producer, once the record is whole and of version 2
    SIZE: "record {index} claims {size} bytes, which its lengths or the batch contradict",
    CRC: "record {index} fails its CRC32C check: a byte changed after the producer encoded it",
    BROKER_CRC: "record {index} fails its CRC32C check: a byte changed after the producer encoded it",
}


class ProducedRecords(NamedTuple):
    """What the broker learns from a producer's records by checking them (`check_produced`), a column per field:
    record i is `sizes[i]` bytes long, asks for queue `queues[i]` (ANY_QUEUE: the broker's choice), and has encoded
    properties `properties[i]` (empty when none)."""

    sizes: list[int]
    queues: list[int]
    properties: list[bytes]


def _check_whole_v2(data: bytes | bytearray, position: int, index: int, most: int) -> None:
    """InvalidBatch if the record `index` (at `position`) is one more than `most`; InvalidArgument unless it has a
    whole version 2 header."""
    if index == most:
        raise InvalidBatch(f"a batch holds at most {most} messages; this one holds more")
    left = len(data) - position
    if left < v2.HEADER_SIZE:
        raise InvalidArgument(f"record {index} is cut short: {left} bytes, less than a header")
    magic = data[position + MAGIC_AT]
    if magic != v2.MAGIC:
        raise InvalidArgument(f"record {index} has magic {magic:#x}; producers send version 2 records ({v2.MAGIC:#x})")


def check_produced(data: bytes | bytearray, topic: bytes, most: int) -> ProducedRecords:
    """Check a producer's version 2 records, back to back in `data`, for `topic`: InvalidArgument naming the first
    record that is cut short, not version 2, of another topic, or fails its CRC32C (a byte changed on the way);
    InvalidBatch beyond `most` records. Properties are returned as sent: `check_properties` judges them."""
    checked, damage = check_records(data)
    sizes, queues, properties = [], [], []
    view, position = memoryview(data), 0
    for index, (version, (size, _, _, queue, _, _, _, _, _, _, tlen, plen, _)) in enumerate(checked):
        if index == most or version is not v2:  # a version 1 record passed the reader's checks: refused here
            _check_whole_v2(data, position, index, most)
        start = position + v2.HEADER_SIZE
        if view[start : start + tlen] != topic:  # of another length too
            raise InvalidArgument(f"record {index} is for another topic than {topic.decode()!r}")
        sizes.append(size)
        queues.append(queue)
        properties.append(bytes(view[start + tlen : start + tlen + plen]) if plen else b"")
        position += size
    if damage is not None:
        _check_whole_v2(data, position, len(sizes), most)
        raise InvalidArgument(damage.told(_WORDS, index=len(sizes)))
    return ProducedRecords(sizes, queues, properties)
