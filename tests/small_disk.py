"""A small disk of its own for the disk-fault tests: a tmpfs mounted on a directory (as root, or with `sudo -n`, as
`make test` installs chromium), filled to a given room and emptied again, so that a store on it meets a real full
disk (ENOSPC from the kernel, RocksDB's writes included), not a mock of one."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

FILLER = ".filler"
CHUNK = 1 << 20


def _as_root(*command: str) -> None:
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    ran = subprocess.run([*prefix, *command], capture_output=True, text=True)
    if ran.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({ran.stderr.strip()}): the disk tests mount a tmpfs as root")


class SmallDisk:
    """A tmpfs of `size_bytes` on `directory` (mounted by `with`, unmounted after)."""

    def __init__(self, directory: Path, size_bytes: int) -> None:
        self.directory, self.size_bytes = directory, size_bytes

    def __enter__(self) -> SmallDisk:
        self.directory.mkdir(parents=True, exist_ok=True)
        _as_root("mount", "-t", "tmpfs", "-o", f"size={self.size_bytes},mode=1777", "tmpfs", str(self.directory))
        return self

    def __exit__(self, *exc_info: object) -> None:
        _as_root("umount", "-l", str(self.directory))

    def free_bytes(self) -> int:
        stats = os.statvfs(self.directory)
        return stats.f_bavail * stats.f_frsize

    def fill(self, leave_bytes: int) -> None:
        """Write a filler file until at most `leave_bytes` are free."""
        with open(self.directory / FILLER, "ab") as filler:
            while (excess := self.free_bytes() - leave_bytes) > 0:
                with contextlib.suppress(OSError):  # full already: what is left is what others freed meanwhile
                    filler.write(b"\0" * min(CHUNK, excess))
                    filler.flush()

    def empty(self) -> None:
        """Remove the filler: the room it took is free again."""
        (self.directory / FILLER).unlink(missing_ok=True)
