"""Wall-clock time as TideMQ stores it: milliseconds since the epoch (RocketMQ's born and store timestamps)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """The current time in ms since the epoch."""
    return time.time_ns() // 1_000_000
