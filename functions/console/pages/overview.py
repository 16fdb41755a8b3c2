"""The overview: how many topics and groups, and the produce / consume rates and lag over the last hour, as charts
drawn in the browser (static/console.js, uPlot) from the kept series (functions/logic/console_series.py), which it
fetches again every few seconds. Cluster-wide numbers need List or Get on `Cluster:*` (super users have it); other
users see the topics and groups they may see."""

from __future__ import annotations

import json

from functions.api.auth import allowed
from functions.logic.console_series import RatePoint, rates, read_samples
from tidemq_protocol.acl import CLUSTER, Action
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import AccessDenied

from ..visit import Visit, page
from ..web import Answer

HOUR_MS = 3_600_000


def sees_cluster() -> bool:
    return allowed(CLUSTER, Action.GET) or allowed(CLUSTER, Action.LIST)


@page("GET", "/")
def overview(visit: Visit) -> Answer:
    samples = read_samples(visit.store) if sees_cluster() else []
    latest = samples[-1] if samples else None
    interval = f"{visit.settings.console_sample_interval_s:g}"
    return visit.page("overview.html", latest=latest, cluster=sees_cluster(), samples=len(samples), interval=interval)


@page("GET", "/overview/series.json")
def series(visit: Visit) -> Answer:
    """The charts' data: columns of times (s), produce and consume rates (per s) and lag, as uPlot takes them."""
    if not sees_cluster():
        raise AccessDenied(f"user {visit.user.name!r} may not Get on {CLUSTER}: the cluster's rates are not shown")
    samples = read_samples(visit.store)
    latest = samples[-1] if samples else None
    counts = {"topics": latest.topics if latest else None, "groups": latest.groups if latest else None}
    return Answer(200, json.dumps({**columns(rates(samples, now_ms() - HOUR_MS)), **counts}), "application/json")


def columns(points: list[RatePoint]) -> dict[str, list[float]]:
    return {
        "time": [p.at_ms / 1000 for p in points],
        "produced": [round(p.produced_per_s, 3) for p in points],
        "consumed": [round(p.consumed_per_s, 3) for p in points],
        "lag": [p.lag for p in points],
    }
