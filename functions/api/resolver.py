"""A function's HTTP resolver (API Gateway HTTP API, payload v2, with pydantic validation and our
error mapping) and its Lambda entry point (with context logging, metrics and tracing)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from .errors import install_error_handlers, unsupported_media_type
from .observability import Handler, instrumented

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
    return instrumented(lambda event, context: resolve(app, event, context), count="Requests")
