"""A function's HTTP resolver: API Gateway HTTP API (payload v2), pydantic validation, our errors."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from .errors import install_error_handlers


def new_resolver() -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver(enable_validation=True)
    install_error_handlers(app)
    return app
