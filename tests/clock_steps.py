"""The wall clock as TideMQ reads it (tidemq_protocol.clock) set ahead for a while, so that a test can have the clock
step back afterwards, as NTP steps it: only what stamps records through that module sees the difference."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from tidemq_protocol import clock


@contextlib.contextmanager
def clock_ahead(ahead_ms: int) -> Iterator[None]:
    """Within this, `clock.now_ms()` reads `ahead_ms` later than the real clock; after it, the clock has stepped
    back by as much."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(clock, "time", SimpleNamespace(time_ns=lambda: time.time_ns() + ahead_ms * 1_000_000))
        yield
