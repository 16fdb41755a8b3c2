"""Segment files on the shared directory (EFS in AWS): where the serverless backend's records are.

    <efs>/segments/<key:06x>

Each writer (a process, a Lambda execution environment) appends only to files of its own, created
exclusively under a random 24-bit key, so writers never share a file and need no lock between them.
A file holds whole produce batches back to back, each one `tidemq_protocol.record` records (CRC'd) with
queue offsets relative to the batch (0, 1, ...): a batch is written before it is sequenced, and
`record.rebase` gives records their real offsets when they are read. A record's physical offset is
`key << 40 | position`, so a message id (record.py) names its file and place.

A writer moves to a new file when the current one reaches `efs_segment_bytes` or is older than
`efs_segment_age_s` (wall clock) or half of `efs_segment_grace_s`, so every file stops growing. The
maintenance run (maintenance.py) deletes a file once no batch references it and nobody has written it for
`efs_segment_grace_s` (1 h). So a writer never appends to a file that may be deleted (it stopped using it
at half that age), and no batch is sequenced into a deleted file: a put takes far less than half an hour
from its append to its sequencing (DynamoDB calls time out and stop retrying within a minute, tables.py;
a Lambda invocation ends within 15).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tidemq_protocol.errors import DependencyUnavailable, StoreUnavailable

from ..health import DiskWatch

KEY_BITS = 24
POSITION_BITS = 40


class Appended(NamedTuple):
    """Where a batch went: its file and position."""

    file: str
    position: int


def file_name(key: int) -> str:
    return f"{key:06x}"


def physical_offset(file: str, position: int) -> int:
    return (int(file, 16) << POSITION_BITS) | position


def split_physical(physical: int) -> tuple[str, int]:
    """(file, position) of a physical offset."""
    return file_name(physical >> POSITION_BITS), physical & ((1 << POSITION_BITS) - 1)


class SegmentWriter:
    """This process's own segment file: one append per batch, fsync'd before `append` returns."""

    def __init__(self, directory: Path, segment_bytes: int, segment_age_s: float) -> None:
        self.directory, self.segment_bytes, self.segment_age_s = directory, segment_bytes, segment_age_s
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd = -1
        self._key = 0
        self._position = 0
        self._opened_at = 0.0
        self.disk = DiskWatch(directory)

    def _open_new(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        while True:
            key = random.getrandbits(KEY_BITS)
            try:
                self._fd = os.open(self.directory / file_name(key), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            self._key, self._position, self._opened_at = key, 0, time.time()
            return

    def append(self, encode: Callable[[int], bytes]) -> Appended:
        """Write `encode(physical offset of the batch)` at the end of the current file, durably.

        A write or fsync that fails leaves the file for good (after a failed fsync its unwritten pages may be
        gone while a later fsync succeeds, PostgreSQL's "fsyncgate"): the next batch goes to a new file, and this
        one raises `StoreUnavailable` (DependencyUnavailable when it was the disk's fault: full, failing; `disk`
        says so until a write succeeds). Nothing was sequenced, so nothing was stored; the bytes nobody references
        are deleted by maintenance."""
        with self._lock:
            try:
                full = self._position >= self.segment_bytes
                if self._fd < 0 or full or time.time() - self._opened_at > self.segment_age_s:
                    self._open_new()
                position = self._position
                data = encode((self._key << POSITION_BITS) | position)
                written = os.pwrite(self._fd, data, position)
                if written != len(data):
                    raise OSError(f"a short write ({written} of {len(data)} bytes)")
                os.fsync(self._fd)
            except OSError as error:
                failed = file_name(self._key)
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1
                if self.disk.failed(error):
                    reason = f"a write to the shared directory failed: {error.strerror}; nothing was stored"
                    raise DependencyUnavailable("disk", reason, retry_after_s=5) from error
                raise StoreUnavailable(
                    f"writing a batch to segment {failed} failed ({error}); nothing was stored, send it again"
                ) from error
            self.disk.wrote()
            self._position += len(data)
            return Appended(file_name(self._key), position)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_segment(directory: Path, file: str, position: int, length: int) -> bytes:
    """`length` bytes of a segment file from `position` (OSError if the file is shorter or gone)."""
    with open(directory / file, "rb", buffering=0) as handle:
        data = os.pread(handle.fileno(), length, position)
    if len(data) != length:
        raise OSError(f"segment {file} holds fewer bytes than its index says ({len(data)} of {length} at {position})")
    return data


def read_segment_at(path: Path, start: int, length: int) -> bytes:
    """Up to `length` bytes of the segment file at `path` from `start` (its records scanned whole: directory.py)."""
    with open(path, "rb", buffering=0) as handle:
        return os.pread(handle.fileno(), length, start)


def newest_write(directory: Path) -> float:
    """The latest mtime of any segment file (0 when there is none): one directory scan, no reads."""
    try:
        return max((entry.stat().st_mtime for entry in os.scandir(directory)), default=0.0)
    except FileNotFoundError:
        return 0.0
