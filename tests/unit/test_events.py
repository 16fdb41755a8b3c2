"""Every sample event in events/ is served by its handler, invoked as Lambda invokes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from functions import store as store_module
from functions.local_gateway import LocalContext
from functions.routes import ROUTES, handler_for

EVENTS = Path(__file__).parents[2] / "events"


@pytest.fixture(autouse=True)
def isolated_store(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / "data"))
    from shared.settings import get_settings

    get_settings.cache_clear()
    yield
    store_module.close_store()
    get_settings.cache_clear()


def test_every_route_has_a_sample_event():
    keys = {json.loads(p.read_text())["routeKey"] for p in EVENTS.glob("*.json")}
    assert {route.route_key for route in ROUTES} <= keys


@pytest.mark.parametrize("path", sorted(EVENTS.glob("*.json")), ids=lambda p: p.name)
def test_sample_event_is_served(path):
    event = json.loads(path.read_text())
    route = next(r for r in ROUTES if r.route_key == event["routeKey"])
    response = handler_for(route.function)(event, LocalContext(route.function))
    assert response["statusCode"] < 400, response
