"""The HTTP API's route table: which Lambda function serves which route.

Derived from the functions' own resolvers, so it cannot drift from them; used by both places that
route, the local gateway (`functions.local_gateway`) and the CDK app (`infra_cdk`). Paths use API
Gateway's syntax: `{name}` is one path segment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import import_module
from typing import Any

FUNCTIONS = ("admin", "produce", "consume", "kv")
EXTRA_ROUTES = (("GET", "/openapi.json", "admin"),)  # served, but not part of the document itself


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str  # package under functions/ whose handler.lambda_handler serves the route

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.path) + "$")


def handler_for(function: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda entry point of a function, imported as Lambda would import it."""
    return import_module(f"functions.{function}.handler").lambda_handler


@cache
def resolvers() -> dict[str, Any]:
    return {function: import_module(f"functions.{function}.handler").app for function in FUNCTIONS}


@cache
def routes() -> tuple[Route, ...]:
    table = [Route(*extra) for extra in EXTRA_ROUTES]
    for function, app in resolvers().items():
        table += routes_of(function, app)
    return tuple(table)


def routes_of(function: str, app: Any) -> list[Route]:
    """The routes a function's resolver serves, from its OpenAPI document."""
    table = []
    for path, item in app.get_openapi_schema().paths.items():
        for method in ("get", "put", "post", "delete", "patch"):
            if getattr(item, method, None) is not None:
                table.append(Route(method.upper(), path, function))
    return table


def allowed_methods(path: str) -> tuple[str, ...]:
    """The methods some route serves at `path`, sorted (empty: no route has this path): what a 405 names in
    its `Allow` header."""
    return tuple(sorted({route.method for route in routes() if route.pattern.match(path)}))
