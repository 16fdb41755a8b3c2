"""The POSIX medium of the cold tier: segments as files under a local directory or an EFS mount.

A segment is the file `<directory>/<topic>/<queue>/<kind>/<base:020d>` (segment.py): it grows by appends, each
`commit` one pwrite and one fdatasync, until the file queue starts the next one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .segment import FileSegment, SegmentGone, StoredObject, TierDriver, segment_name


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
    kind = "directory"

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def probe(self) -> str:
        stats = os.statvfs(self.directory)
        return f"{stats.f_bavail * stats.f_frsize / 2**20:.0f} MiB free"

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

    def read_range(self, key: str, start: int, length: int) -> bytes | None:
        try:
            with open(self.directory / key, "rb", buffering=0) as handle:
                return os.pread(handle.fileno(), length, start)
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

    def first_object_after(self, prefix: str, after: str) -> StoredObject | None:
        return next((item for item in self.objects(prefix) if item.key > after), None)

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
