"""The tier's driver layer: `FileSegment`, one physical file of a logical tier file, and `TierDriver`, a medium.

A logical tier file (one queue's commit log or ConsumeQueue, see container.py) is a run of segments,
each holding the file's bytes [base, base + size). A segment takes `append`s into a buffer that
`commit` makes durable and readable; `seal` ends it; `delete` removes it. Adding a medium means adding
one `TierDriver` and its `FileSegment`, in a module of their own:

    posix.py  a local directory or an EFS mount
    s3.py     S3, or anything speaking its API (LocalStack, MinIO, moto)

so a tier opens only the medium it uses (a POSIX tier never imports boto3).

Layout, the same on every medium (`path` is `<topic>/<queue>/<kind>`, kind `commitlog` or
`consumequeue`):

    posix:  <directory>/<topic>/<queue>/<kind>/<base:020d>
    s3:     s3://<bucket>/<prefix>/<topic>/<queue>/<kind>/<base:020d>

so `aws s3 ls s3://bucket/prefix/orders/3/commitlog/` lists queue 3's segments in order, and a segment's
name says where its bytes belong. Compaction (manifest.py) adds large segments named `<base:020d>.g<generation>...`,
which a plain listing skips: only the queue's manifest makes them part of the file.

S3 objects cannot be appended to: an S3 segment is written once, by its
one `commit`, and is sealed from then on (`TierDriver.appendable` is False), so the file queue starts a new
segment for every upload. A POSIX segment grows by appends until it is full.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from tidemq_protocol.errors import CorruptStore

NAME_DIGITS = 20


def segment_name(base: int) -> str:
    return f"{base:0{NAME_DIGITS}d}"


class SegmentGone(CorruptStore):
    """A segment's object is no longer there: compaction replaced it (or retention removed it) after this
    process listed it. The reader lists the queue again and retries (container.py)."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object of the tier, by its key under the driver's root."""

    key: str
    size: int
    modified_s: float


class FileSegment(ABC):
    """Bytes [base, base + size) of a logical file; appended bytes count once committed."""

    def __init__(self, base: int, size: int, sealed: bool) -> None:
        self.base, self.size, self.sealed = base, size, sealed
        self._pending: list[bytes] = []
        self.pending_bytes = 0

    @property
    def end(self) -> int:
        """The logical position just past the committed bytes."""
        return self.base + self.size

    def append(self, data: bytes) -> None:
        """Buffer `data` after everything appended so far; it is neither durable nor readable before `commit`."""
        if self.sealed:
            raise CorruptStore(f"segment {self.base} is sealed")
        self._pending.append(data)
        self.pending_bytes += len(data)

    def commit(self) -> None:
        """Make the appended bytes durable and readable. On an error nothing counts as committed, the
        bytes stay buffered, and calling `commit` again retries them."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._write(data)
        self.size += len(data)
        self._pending.clear()
        self.pending_bytes = 0

    def read(self, position: int, length: int) -> bytes:
        """`length` committed bytes from logical `position`."""
        if position < self.base or position + length > self.end:
            raise CorruptStore(f"segment {self.base} holds [{self.base}, {self.end}), not [{position}, +{length})")
        data = self._read(position - self.base, length)
        if len(data) != length:
            raise CorruptStore(f"segment {self.base}: read {len(data)} of {length} bytes at {position}")
        return data

    def seal(self) -> None:
        self.sealed = True

    @property
    @abstractmethod
    def name(self) -> str:
        """The segment's file or object name within its logical file's directory."""

    @abstractmethod
    def _write(self, data: bytes) -> None:
        """Durably add `data` after the committed bytes."""

    @abstractmethod
    def _read(self, offset: int, length: int) -> bytes:
        """Bytes at `offset` within the segment."""

    @abstractmethod
    def truncate(self, size: int) -> None:
        """Keep only the first `size` bytes (recovery cuts a torn tail)."""

    @abstractmethod
    def delete(self) -> None: ...


class TierDriver(ABC):
    """A medium: creates, lists and removes segments under logical file paths."""

    appendable: bool
    """Whether a committed segment can take more appends."""
    kind: str
    """What the medium is, as `GET /health` names it: "s3" or "directory"."""

    @abstractmethod
    def probe(self) -> str:
        """Whether the medium answers now, within a second or so (health.py): a word on how it is, or an error."""

    @abstractmethod
    def segments(self, path: str) -> list[FileSegment]:
        """The segments of the file at `path`, in order (committed, not sealed unless the medium seals)."""

    @abstractmethod
    def create(self, path: str, base: int, name: str | None = None) -> FileSegment:
        """A new, empty segment of the file at `path` starting at `base` (named `name`, else by its base)."""

    @abstractmethod
    def segment(self, path: str, name: str, base: int, size: int) -> FileSegment:
        """The committed segment `name` of the file at `path` (one a manifest lists)."""

    # whole small objects: the manifests, and what compaction lists to delete

    @abstractmethod
    def create_object(self, key: str, data: bytes) -> bool:
        """Write object `key` unless it exists (False then): the one atomic create-only write."""

    @abstractmethod
    def read_object(self, key: str) -> bytes | None:
        """The object's bytes (None: there is no such object)."""

    @abstractmethod
    def read_range(self, key: str, start: int, length: int) -> bytes | None:
        """`length` bytes of object `key` from `start` (fewer at its end; None: there is no such object): the
        ranged read of the tier's index (index.py)."""

    @abstractmethod
    def objects(self, prefix: str) -> list[StoredObject]:
        """Every object whose key starts with `prefix`, in key order."""

    @abstractmethod
    def first_object_after(self, prefix: str, after: str) -> StoredObject | None:
        """The first object, in key order, whose key starts with `prefix` and comes after `after` (None: none does):
        one listing of one key, how the id directory (directory.py) finds the object covering a position."""

    @abstractmethod
    def delete_object(self, key: str) -> None:
        """Remove the object (no error when it is already gone)."""

    @abstractmethod
    def queues(self) -> list[tuple[str, int]]:
        """(topic, queue) of every queue with files in the tier."""

    @abstractmethod
    def delete_topic(self, topic: str) -> None: ...

    def describe(self) -> str:
        return type(self).__name__
