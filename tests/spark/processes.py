"""Spark jobs run as spark-submit processes, and killed."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def kill_at(command: list[str], stage: str | None, after_s: float) -> None:
    """Run `command` in its own process group and SIGKILL the whole group `after_s` seconds after its stderr first
    shows `stage` (None: after it starts)."""
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if stage is not None:
            for line in process.stderr:
                if stage.encode() in line:
                    break
        time.sleep(after_s)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()
