"""A function's HTTP resolver (API Gateway HTTP API, payload v2, with pydantic validation and our
error mapping) and its Lambda entry point (with context logging, metrics and tracing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from .errors import install_error_handlers, unsupported_media_type
from .observability import logger, metrics, tracer

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

FORMS = ("multipart/", "application/x-www-form-urlencoded")


def new_resolver() -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver(enable_validation=True)
    install_error_handlers(app)
    return app


def resolve(app: APIGatewayHttpResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve an event, refusing form bodies first: the API takes none, and Powertools' form
    parsing fails on malformed ones before any route could answer 415."""
    content_type = (event.get("headers") or {}).get("content-type", "")
    if event.get("body") and content_type.strip().lower().startswith(FORMS):
        response = unsupported_media_type(content_type)
        return {"statusCode": response.status_code, "headers": {"Content-Type": response.content_type},
                "body": response.body, "isBase64Encoded": False}  # fmt: skip
    return app.resolve(event, context)


def lambda_entry(app: APIGatewayHttpResolver) -> Handler:
    """The Lambda entry point of a function whose routes are on `app`."""

    def counted(event: dict[str, Any], context: Any) -> dict[str, Any]:
        metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
        return resolve(app, event, context)

    def uncounted(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            return resolve(app, event, context)
        finally:
            metrics.clear_metrics()  # Powertools never flushes disabled metrics: they would pile up

    handler = uncounted if is_metrics_disabled() else metrics.log_metrics(counted)
    return logger.inject_lambda_context(
        tracer.capture_lambda_handler(handler, capture_response=False), clear_state=True
    )
