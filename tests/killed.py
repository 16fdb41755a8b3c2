"""What a child process killed by a test had written: read through the very pipes a `readline()` before the kill
read from. `Popen.communicate` reads the pipes' descriptors directly, so the rest of a chunk that `readline()` had
buffered would be lost, and the next line read would start in the middle of one."""

from __future__ import annotations

import subprocess
from typing import AnyStr


def output_after_kill(process: subprocess.Popen[AnyStr], timeout_s: float = 60) -> tuple[AnyStr, AnyStr]:
    """The stdout and stderr of `process`, killed already, each to its end (the kill closed them)."""
    process.wait(timeout=timeout_s)
    return process.stdout.read(), process.stderr.read()
