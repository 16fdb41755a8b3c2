"""End-to-end fixtures: a real local gateway process (what `make run` starts) on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from functions.local_gateway import running_gateway


class Gateway(NamedTuple):
    url: str
    home: Path


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[Gateway]:
    """One gateway per test module, its store in a fresh directory; tests share it, so each uses its own names."""
    home = tmp_path_factory.mktemp("gateway") / "data"
    with running_gateway(home) as url:
        yield Gateway(url, home)
