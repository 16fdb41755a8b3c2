"""How the services under a store are doing, for `GET /health`: each dependency probed with a short deadline, its
answer kept a moment, so that a load balancer asking often costs little and a stalled service cannot hold the
answer (a probe that has not answered within PROBE_TIMEOUT_S has failed).

A store's `health()` lists its dependencies (the embedded engine: its disk, and S3 or a directory under a cold tier;
the serverless backend: DynamoDB, the shared directory and the tier). A `required` one is one writes need: while it
fails the store takes no messages (the health is "failing", a 503); an optional one failing leaves it "degraded"
(a 200: the tier's uploads wait, and cold reads may fail, while produce and hot reads go on).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tidemq_protocol.errors import DependencyUnavailable

from .faults import DISK_ERRORS, reason_of

PROBE_TIMEOUT_S = 1.0
"""How long a probe may take (to connect, and to get an answer) before it counts as failed."""
FRESH_S = 2.0
"""How long a probe's answer stands before the next `health()` probes again."""
FREE_FRESH_S = 0.5
"""How long a reading of a disk's free space stands (less what was written since) before it is read again."""
RECOVERED_BYTES = 64 * 2**20
"""A disk a write found full is taken for fine again once this much more is free than then."""


@dataclass(frozen=True, slots=True)
class DependencyHealth:
    """One dependency as last probed: `name` ("dynamodb", "s3", "disk", ...), whether it answered, whether writes
    need it (`required`), and a short `detail` (how fast it answered, or what went wrong)."""

    name: str
    ok: bool
    required: bool
    detail: str


class Probe:
    """One dependency's probe: `check()` returns a detail when the dependency is fine and raises when it is not; its
    answer is kept FRESH_S."""

    def __init__(self, name: str, required: bool, check: Callable[[], str]) -> None:
        self.name, self.required, self.check = name, required, check
        self._lock = threading.Lock()
        self._last: tuple[float, DependencyHealth] | None = None

    def __call__(self) -> DependencyHealth:
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < FRESH_S:
                return self._last[1]
            started = time.monotonic()
            try:
                detail, ok = self.check(), True
            except Exception as error:  # what went wrong is the answer
                detail, ok = reason_of(error), False
            took_ms = (time.monotonic() - started) * 1000
            answer = DependencyHealth(
                self.name, ok, self.required, detail if not ok else f"{detail} ({took_ms:.0f} ms)"
            )
            self._last = (time.monotonic(), answer)
            return answer


_probing = ThreadPoolExecutor(8, thread_name_prefix="health")


def probe_all(probes: Sequence[Probe]) -> list[DependencyHealth]:
    """Every probe's answer, probed at once (so the slowest bounds the whole)."""
    return list(_probing.map(lambda probe: probe(), probes))


class DiskWatch:
    """The disk under a directory the store writes, with `reserve_bytes` kept free there (`admit` refuses a write
    that would leave less). Failing while less than the reserve is free, and from a write that failed for the
    disk's fault (full, over quota, an I/O error, read-only) until a write succeeds again or, when the write found
    no room, until RECOVERED_BYTES more are free than then (so that a server a load balancer took out for its full
    disk is taken back once room is made, before any write tries). Its free space is the detail."""

    def __init__(self, directory: Path, reserve_bytes: int = 0) -> None:
        self.directory, self.reserve_bytes = directory, reserve_bytes
        self._failure: tuple[str, int | None] | None = None  # what failed, and the free bytes then (full disks)
        self._free, self._free_at = 0, -FREE_FRESH_S  # free bytes as last read, less what was admitted since

    def admit(self, size: int) -> None:
        """Refuse (DependencyUnavailable) a write of `size` bytes that would leave less than the reserve free."""
        if not self.reserve_bytes:
            return
        if time.monotonic() - self._free_at > FREE_FRESH_S or self._free - size < self.reserve_bytes:
            self._free, self._free_at = _free_bytes(self.directory), time.monotonic()
        if self._free - size < self.reserve_bytes:
            reason = f"{_mib(self._free)} free, and {_mib(self.reserve_bytes)} are kept for the store's indexes"
            raise DependencyUnavailable("disk", reason, retry_after_s=5)
        self._free -= size

    def failed(self, error: OSError) -> bool:
        """Note a write's error; whether it was the disk's fault."""
        if error.errno not in DISK_ERRORS:
            return False
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        self._failure = (os.strerror(error.errno).lower(), _free_bytes(self.directory) if full else None)
        return True

    def wrote(self) -> None:
        """Note a write that succeeded."""
        self._failure = None

    def check(self) -> str:
        free, failure = _free_bytes(self.directory), self._failure
        if failure is not None and (failure[1] is None or free < failure[1] + RECOVERED_BYTES):
            raise DiskFailing(errno.EIO, f"a write failed: {failure[0]} ({_mib(free)} free)")
        if free < self.reserve_bytes:
            raise DiskFailing(errno.ENOSPC, f"{_mib(free)} free, less than the {_mib(self.reserve_bytes)} reserve")
        return f"{_mib(free)} free"


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


class DiskFailing(OSError):
    """A disk whose last write failed (DiskWatch): the probe's answer."""


def _free_bytes(directory: Path) -> int:
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


__all__ = ["DependencyHealth", "DiskWatch", "Probe", "probe_all"]
