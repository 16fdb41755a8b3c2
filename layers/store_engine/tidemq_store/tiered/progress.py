"""The tier's own metadata: each queue's upload progress, in a small RocksDB with WAL under the store's home.

    <home>/tier-progress/   topic 0x00 queue:u32 (BE)  ->  dispatch offset:u64, commit offset:u64 (LE)

The *dispatch offset* is where messages were last handed to an upload, the *commit offset* where the tier
holds them up to (dispatcher.py). The medium has the last word: after a crash the queue's tier ConsumeQueue says
where an upload really got to (container.py). Progress is what lets reads, status and hot release answer without
asking the medium, so a database that is missing (a store from before the tier kept its own, or one lost) is
rebuilt from the medium when the tier opens (dispatcher.py).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from rocksdict import WriteOptions

from ..rocks import Families

PROGRESS = struct.Struct("<QQ")
QUEUE = struct.Struct(">I")


class UploadProgress(NamedTuple):
    dispatch_offset: int
    commit_offset: int


class TierQueueKey(NamedTuple):
    topic: str
    queue: int


def _key(topic: str, queue: int) -> bytes:
    return topic.encode() + b"\x00" + QUEUE.pack(queue)


class ProgressStore:
    """Upload progress per queue; `created` says the database did not exist before this open."""

    def __init__(self, path: Path, sync: bool) -> None:
        self.created = not (path / "CURRENT").exists()
        self._rocks = Families(path, ("progress",))
        self._family = self._rocks.views["progress"]
        self._write = WriteOptions()
        self._write.sync = sync

    def get(self, topic: str, queue: int) -> UploadProgress | None:
        """The queue's progress, None if it never uploaded."""
        raw = self._family.get(_key(topic, queue))
        return UploadProgress._make(PROGRESS.unpack(raw)) if raw is not None else None

    def set(self, topic: str, queue: int, progress: UploadProgress) -> None:
        self._family.put(_key(topic, queue), PROGRESS.pack(*progress), self._write)

    def queues(self) -> Iterator[TierQueueKey]:
        """Every queue that ever uploaded."""
        for key in self._family.keys():  # noqa: SIM118 (an Rdict iterates items)
            yield TierQueueKey(key[:-5].decode(), QUEUE.unpack_from(key, len(key) - 4)[0])

    def drop_topic(self, topic: str) -> None:
        prefix = topic.encode() + b"\x00"
        self._family.delete_range(prefix, topic.encode() + b"\x01", self._write)

    def close(self) -> None:
        self._rocks.close()
