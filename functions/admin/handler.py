"""Admin function: health now; topics, groups and queries join it with the HTTP API."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from functions.store import get_store

app = APIGatewayHttpResolver()


@app.get("/health")
def health() -> dict[str, str]:
    """200 once the store is open and answering."""
    get_store().list_topics(limit=1)
    return {"status": "ok"}


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
