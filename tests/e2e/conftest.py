"""End-to-end fixtures: a real local gateway process (what `make run` starts) on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests import push_targets
from tests.gateways import gateway_as_admin


class Gateway(NamedTuple):
    url: str
    home: Path
    backend: str


@pytest.fixture(scope="module")
def dispatch() -> str:
    """How the module's gateways serve the hot routes (TIDEMQ_GATEWAY_DISPATCH): the default, unless the module
    imports `tests.gateways.each_dispatch` to run against both."""
    return "lean"


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def gateway(request, tmp_path_factory, dispatch) -> Iterator[Gateway]:
    """One gateway per test module and backend (and dispatch), its store in a fresh directory (the serverless one
    with its own moto server for DynamoDB), allowing the test push targets; tests share it, so each uses its own
    names."""
    home = tmp_path_factory.mktemp(f"gateway-{request.param}-{dispatch}") / "data"
    env = {"TIDEMQ_BACKEND": request.param, "TIDEMQ_GATEWAY_DISPATCH": dispatch, **push_targets.ALLOWED}
    with gateway_as_admin(home, **env) as url:
        yield Gateway(url, home, request.param)
