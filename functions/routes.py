"""The HTTP API's route table: which Lambda function serves which route (each function's handler imported).

Derived from the functions' own resolvers, so it cannot drift from them; used by both places that
route, the local gateway (`servers.gateway`) and the CDK app (`infra_cdk`). Paths use API
Gateway's syntax: `{name}` is one path segment, `{name+}` the rest of the path (the console's pages).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import import_module
from typing import Any

from functions.api.routing import Route, methods_at, routes_of

FUNCTIONS = ("admin", "produce", "consume", "kv")
CONSOLE_ROUTES = (
    ("GET", "/console", "console"),
    ("GET", "/console/{proxy+}", "console"),
    ("POST", "/console/{proxy+}", "console"),
)
"""The web console's pages (functions/console): HTML, not part of the API's document."""
EXTRA_ROUTES = (("GET", "/openapi.json", "admin"), *CONSOLE_ROUTES)  # served, but not part of the document itself


def handler_for(function: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda entry point of a function, imported as Lambda would import it."""
    return Route("", "", function).handler


@cache
def resolvers() -> dict[str, Any]:
    return {function: import_module(f"functions.{function}.handler").app for function in FUNCTIONS}


@cache
def routes() -> tuple[Route, ...]:
    table = [Route(*extra) for extra in EXTRA_ROUTES]
    for function, app in resolvers().items():
        table += routes_of(function, app)
    return tuple(table)


def allowed_methods(path: str) -> tuple[str, ...]:
    """The methods some route of the API serves at `path`, sorted (empty: no route has this path): what the local
    gateway's 405 names in its `Allow` header."""
    return methods_at(path, routes())
