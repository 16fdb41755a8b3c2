"""Every route has a sample event in events/, and each is served by its handler as Lambda invokes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from functions import store as store_module
from functions.local_gateway import LocalContext
from functions.routes import handler_for, routes
from shared.settings import get_settings
from tidemq_store import GroupConfig, Message, TopicConfig

EVENTS = Path(__file__).parents[2] / "events"
SAMPLES = sorted(EVENTS.glob("*.json"))


@pytest.fixture
def seeded_store(tmp_path, monkeypatch):
    """The state the sample events refer to: topic `orders`, group `billing`, message `order-1001`."""
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    get_settings.cache_clear()
    store = store_module.get_store()
    store.create_topic(TopicConfig(name="orders", queues=4))
    store.create_group(GroupConfig(name="billing"))
    first = store.put("orders", [Message(b"order 1001 created", keys=("order-1001",), tag="created")])[0]
    yield first.msg_id
    store_module.close_store()
    get_settings.cache_clear()


def test_every_route_has_a_sample_event():
    sampled = {json.loads(path.read_text())["routeKey"] for path in SAMPLES}
    assert sorted(r.route_key for r in routes() if r.route_key not in sampled) == []


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_sample_event_is_served_by_its_handler(seeded_store, path):
    event = json.loads(path.read_text())
    if "{msg_id}" in event["routeKey"]:
        assert event["pathParameters"]["msg_id"] == seeded_store, "the seed no longer yields the sample's id"
    route = next(r for r in routes() if r.route_key == event["routeKey"])
    response = handler_for(route.function)(event, LocalContext(f"tidemq-{route.function}"))
    assert 200 <= response["statusCode"] < 300, response
