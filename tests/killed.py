"""Child processes a test kills, and what they had written: read through the very pipes a `readline()` before the kill
read from. `Popen.communicate` reads the pipes' descriptors directly, so the rest of a chunk that `readline()` had
buffered would be lost, and the next line read would start in the middle of one."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from typing import AnyStr


def output_after_kill(process: subprocess.Popen[AnyStr], timeout_s: float = 60) -> tuple[AnyStr, AnyStr]:
    """The stdout and stderr of `process`, killed already, each to its end (the kill closed them)."""
    process.wait(timeout=timeout_s)
    return process.stdout.read(), process.stderr.read()


def killed_at_random(command: list[str], run: int, rng: random.Random, window_s: float = 1.5) -> tuple[bytes, bytes]:
    """Start `command`, SIGKILL it at a random moment, and return what it wrote (stdout, stderr). One run in four is
    killed at any moment of its first `window_s` (start-up and recovery included); the others at any moment of
    `window_s` once the process has written its first line (mid-write, however long a busy machine takes to start a
    process)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = b"" if run % 4 == 0 else process.stdout.readline()
    time.sleep(rng.uniform(0.0, window_s))
    process.send_signal(signal.SIGKILL)
    out, err = output_after_kill(process)
    assert process.returncode == -signal.SIGKILL, err.decode()[-2000:]
    return first + out, err
