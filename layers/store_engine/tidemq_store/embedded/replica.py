"""What a master broker sends its slave: a run of whole batches of its commit log, and the configs of the topics
they belong to. The one module that knows this format; the container's transport (servers/container) carries
it as the body of one HTTP response.

    <JSON header, one line>\\n<data>

The header holds `position` (the commit-log position of the data's first byte), `segment_start` (the start of the
master's segment that holds the data: a chunk never crosses a segment, so the slave rolls its log exactly where the
master rolled), `master_written` (how far the master's log goes: the slave's lag), and `topics` (the config of every
topic the data holds messages of, so the slave indexes them as the master did). The data is the master's bytes as
they are: the same records at the same positions, so message ids and queue offsets are the same on both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tidemq_protocol.errors import InvalidArgument

from ..model import TopicConfig, validated

CONTENT_TYPE = "application/x-tidemq-replica"


@dataclass(frozen=True, slots=True)
class ReplicaChunk:
    position: int
    segment_start: int
    master_written: int
    data: bytes
    topics: tuple[TopicConfig, ...] = ()

    @property
    def end(self) -> int:
        """The position after the chunk's data: where the slave asks from next."""
        return self.position + len(self.data)

    def encode(self) -> bytes:
        header = {
            "position": self.position,
            "segment_start": self.segment_start,
            "master_written": self.master_written,
            "topics": [topic.model_dump(mode="json") for topic in self.topics],
        }
        return json.dumps(header, separators=(",", ":")).encode() + b"\n" + self.data

    @classmethod
    def decode(cls, body: bytes) -> ReplicaChunk:
        line, newline, data = body.partition(b"\n")
        try:
            header = json.loads(line) if newline else None
            topics = tuple(validated(TopicConfig, topic) for topic in header["topics"])
            numbers = [header[name] for name in ("position", "segment_start", "master_written")]
        except (ValueError, TypeError, KeyError) as error:
            raise InvalidArgument(f"not a replica chunk: {error}") from None
        if not all(type(n) is int and n >= 0 for n in numbers):
            raise InvalidArgument(f"not a replica chunk: bad positions {numbers}")
        return cls(*numbers, data, topics)
