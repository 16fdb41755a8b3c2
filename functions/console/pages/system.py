"""Health (the store answering, the cold tier, the settings the console runs by) and, when a BrokerContainer serves
the console, its brokers with their roles, disk usage and quotas (the container's own API needs: List or Get on
`Cluster:*`)."""

from __future__ import annotations

from collections.abc import Callable

from functions.api.auth import require_any
from tidemq_protocol.acl import CLUSTER, Action
from tidemq_protocol.api.container import BrokerView
from tidemq_protocol.errors import TideMQError

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
    problem = None
    try:
        visit.store.check_health()
        visit.store.list_topics(limit=1)
    except TideMQError as error:  # the store stopped taking writes
        problem = str(error)
    return visit.page("health.html", problem=problem, store=visit.store, in_container=bool(_brokers))


@page("GET", "/container")
def container(visit: Visit) -> Answer:
    require_any(CLUSTER, Action.LIST, Action.GET)
    brokers = _brokers[0]() if _brokers else None
    return visit.page("container.html", brokers=brokers)
