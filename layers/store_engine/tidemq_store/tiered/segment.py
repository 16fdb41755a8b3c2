"""The tier's driver layer: `FileSegment`, one physical file of a logical tier file, and one driver per medium.

A logical tier file (one queue's commit log or ConsumeQueue, see container.py) is a run of segments,
each holding the file's bytes [base, base + size). A segment takes `append`s into a buffer that
`commit` makes durable and readable; `seal` ends it; `delete` removes it. Adding a medium means adding
one `TierDriver` and its `FileSegment`.

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

import os
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from botocore.exceptions import ClientError

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
    def objects(self, prefix: str) -> list[StoredObject]:
        """Every object whose key starts with `prefix`, in key order."""

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


# ---- POSIX: a local directory or an EFS mount ------------------------------------------------------


class PosixSegment(FileSegment):
    def __init__(self, file: Path, base: int, size: int, sealed: bool = False) -> None:
        super().__init__(base, size, sealed)
        self.file = file

    @property
    def name(self) -> str:
        return self.file.name

    def _write(self, data: bytes) -> None:
        fd = os.open(self.file, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            written = os.pwrite(fd, data, self.size)
            if written != len(data):
                raise OSError(f"short write to {self.file}: {written} of {len(data)} bytes")
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def _read(self, offset: int, length: int) -> bytes:
        try:
            with open(self.file, "rb", buffering=0) as file:
                return os.pread(file.fileno(), length, offset)
        except FileNotFoundError:
            raise SegmentGone(f"tier file {self.file} is gone") from None

    def truncate(self, size: int) -> None:
        os.truncate(self.file, size)
        self.size = size

    def delete(self) -> None:
        self.file.unlink(missing_ok=True)


class PosixDriver(TierDriver):
    appendable = True

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _dir(self, path: str) -> Path:
        return self.directory / path

    def segments(self, path: str) -> list[FileSegment]:
        directory = self._dir(path)
        if not directory.is_dir():
            return []
        files = sorted(f for f in directory.iterdir() if f.name.isdigit())
        return [PosixSegment(f, int(f.name), f.stat().st_size) for f in files]

    def create(self, path: str, base: int, name: str | None = None) -> FileSegment:
        directory = self._dir(path)
        directory.mkdir(parents=True, exist_ok=True)
        file = directory / (name or segment_name(base))
        file.touch()
        return PosixSegment(file, base, 0)

    def segment(self, path: str, name: str, base: int, size: int) -> FileSegment:
        return PosixSegment(self._dir(path) / name, base, size, sealed=True)

    def create_object(self, key: str, data: bytes) -> bool:
        file = self.directory / key
        file.parent.mkdir(parents=True, exist_ok=True)
        scratch = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        scratch.write_bytes(data)
        with open(scratch, "rb") as handle:
            os.fsync(handle.fileno())
        try:
            os.link(scratch, file)  # atomic, and fails if `file` exists
        except FileExistsError:
            return False
        finally:
            scratch.unlink(missing_ok=True)
        return True

    def read_object(self, key: str) -> bytes | None:
        try:
            return (self.directory / key).read_bytes()
        except FileNotFoundError:
            return None

    def objects(self, prefix: str) -> list[StoredObject]:
        directory = prefix.rpartition("/")[0]
        root = self.directory / directory
        if not root.is_dir():
            return []
        found = []
        for file in root.rglob("*"):
            key = file.relative_to(self.directory).as_posix()
            if file.is_file() and key.startswith(prefix) and not file.name.startswith("."):
                stat = file.stat()
                found.append(StoredObject(key, stat.st_size, stat.st_mtime))
        return sorted(found, key=lambda o: o.key)

    def delete_object(self, key: str) -> None:
        (self.directory / key).unlink(missing_ok=True)

    def queues(self) -> list[tuple[str, int]]:
        return sorted(
            (topic.name, int(queue.name))
            for topic in self.directory.iterdir()
            if topic.is_dir()
            for queue in topic.iterdir()
            if queue.name.isdigit()
        )

    def delete_topic(self, topic: str) -> None:
        shutil.rmtree(self._dir(topic), ignore_errors=True)

    def describe(self) -> str:
        return f"posix:{self.directory}"


# ---- S3 (or anything speaking its API: LocalStack, MinIO, moto) ------------------------------------


def _missing(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound")


class S3Segment(FileSegment):
    def __init__(self, driver: S3Driver, key: str, base: int, size: int) -> None:
        super().__init__(base, size, sealed=size > 0)
        self.driver, self.key = driver, key

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def _write(self, data: bytes) -> None:
        if self.size:
            raise CorruptStore(f"s3 segment {self.key} is already written")
        self.driver.client.put_object(Bucket=self.driver.bucket, Key=self.key, Body=data)

    def commit(self) -> None:
        super().commit()
        if self.size:
            self.sealed = True

    def _read(self, offset: int, length: int) -> bytes:
        try:
            reply = self.driver.client.get_object(
                Bucket=self.driver.bucket, Key=self.key, Range=f"bytes={offset}-{offset + length - 1}"
            )
        except ClientError as error:
            if _missing(error):
                raise SegmentGone(f"tier object s3://{self.driver.bucket}/{self.key} is gone") from None
            raise
        return reply["Body"].read()

    def truncate(self, size: int) -> None:
        if size != self.size:
            raise CorruptStore(f"s3 segment {self.key} is {self.size} bytes; an object cannot be cut to {size}")

    def delete(self) -> None:
        self.driver.client.delete_object(Bucket=self.driver.bucket, Key=self.key)


class S3Driver(TierDriver):
    """Segments as objects in `bucket` under `prefix`; `client` is a boto3 S3 client (see s3.py)."""

    appendable = False

    def __init__(self, client, bucket: str, prefix: str) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix.strip("/")

    def _key(self, path: str) -> str:
        return f"{self.prefix}/{path}/" if self.prefix else f"{path}/"

    def _list(self, prefix: str, delimiter: str | None = None):
        paginator = self.client.get_paginator("list_objects_v2")
        arguments = {"Bucket": self.bucket, "Prefix": prefix}
        if delimiter:
            arguments["Delimiter"] = delimiter
        yield from paginator.paginate(**arguments)

    def segments(self, path: str) -> list[FileSegment]:
        prefix = self._key(path)
        found = []
        for page in self._list(prefix):
            for item in page.get("Contents", ()):
                name = item["Key"][len(prefix) :]
                if name.isdigit():
                    found.append(S3Segment(self, item["Key"], int(name), item["Size"]))
        return sorted(found, key=lambda segment: segment.base)

    def create(self, path: str, base: int, name: str | None = None) -> FileSegment:
        return S3Segment(self, self._key(path) + (name or segment_name(base)), base, 0)

    def segment(self, path: str, name: str, base: int, size: int) -> FileSegment:
        return S3Segment(self, self._key(path) + name, base, size)

    def _full(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def create_object(self, key: str, data: bytes) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data, IfNoneMatch="*")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
                return False  # the object exists
            raise
        return True

    def read_object(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"].read()
        except ClientError as error:
            if _missing(error):
                return None
            raise

    def objects(self, prefix: str) -> list[StoredObject]:
        root = len(self._full(""))
        return [
            StoredObject(item["Key"][root:], item["Size"], item["LastModified"].timestamp())
            for page in self._list(self._full(prefix))
            for item in page.get("Contents", ())
        ]

    def delete_object(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._full(key))

    def queues(self) -> list[tuple[str, int]]:
        root = f"{self.prefix}/" if self.prefix else ""
        found = []
        for page in self._list(root, "/"):
            for topic_prefix in page.get("CommonPrefixes", ()):
                for queue_page in self._list(topic_prefix["Prefix"], "/"):
                    for queue_prefix in queue_page.get("CommonPrefixes", ()):
                        topic, queue = queue_prefix["Prefix"][len(root) :].rstrip("/").rsplit("/", 1)
                        if queue.isdigit():
                            found.append((topic, int(queue)))
        return sorted(found)

    def delete_topic(self, topic: str) -> None:
        keys = [item["Key"] for page in self._list(self._key(topic)) for item in page.get("Contents", ())]
        for first in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[first : first + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"
