"""Health (the store and each service it relies on, as `GET /health` reports them; the cold tier) and, when a
BrokerContainer serves the console, its brokers with their roles, disk usage and quotas (the container's own API
needs: List or Get on `Cluster:*`)."""

from __future__ import annotations

from collections.abc import Callable

from functions.api.auth import require_any
from functions.logic.health import health_of
from tidemq_protocol.acl import CLUSTER, Action
from tidemq_protocol.api.container import BrokerView

from ..visit import Visit, page
from ..web import Answer

BrokerSource = Callable[[], list[BrokerView]]
_brokers: list[BrokerSource] = []


def serve_brokers(source: BrokerSource) -> None:
    """Called by a BrokerContainer at start: its brokers, for the container page (the console itself imports no
    server)."""
    _brokers[:] = [source]


@page("GET", "/health")
def health(visit: Visit) -> Answer:
    require_any(CLUSTER, Action.GET, Action.LIST)
    report = health_of(visit.store)
    return visit.page("health.html", report=report, store=visit.store, in_container=bool(_brokers))


@page("GET", "/container")
def container(visit: Visit) -> Answer:
    require_any(CLUSTER, Action.LIST, Action.GET)
    brokers = _brokers[0]() if _brokers else None
    return visit.page("container.html", brokers=brokers)
