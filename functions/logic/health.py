"""The health every door reports (`GET /health`, the console's health page, a BrokerContainer's brokers): the store's
dependencies as probed (tidemq_store/health.py), summed up."""

from __future__ import annotations

from tidemq_protocol.api.common import DependencyHealthView, Health
from tidemq_store import MessageStore


def health_of(store: MessageStore) -> Health:
    """failing if a dependency writes need fails, degraded if another does, else ok; `message` names what fails."""
    dependencies = store.health()
    failing = [dependency for dependency in dependencies if not dependency.ok]
    status = "ok" if not failing else "failing" if any(d.required for d in failing) else "degraded"
    message = "; ".join(f"{d.name}: {d.detail}" for d in failing) or None
    views = [
        DependencyHealthView(name=d.name, status="ok" if d.ok else "failing", required=d.required, detail=d.detail)
        for d in dependencies
    ]
    return Health(status=status, message=message, dependencies=views)
