"""A route as API Gateway names it (`GET /v1/topics/{topic}`), and the routes a resolver serves, read from its own
OpenAPI document. Imports no handler: the route table of the whole API (functions/routes.py) is built from these."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import import_module
from typing import Any

METHODS = ("get", "put", "post", "delete", "patch")


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str  # the function serving it: a package under functions/, or a server's own ("container")
    module: str = ""  # the module whose `lambda_handler` serves it; empty: functions.<function>.handler

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        greedy = re.sub(r"\{(\w+)\+\}", r"(?P<\1>.+)", self.path)  # API Gateway's {proxy+}: the rest of the path
        return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", greedy) + "$")

    @property
    def handler(self) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        """The Lambda entry point serving this route, imported as Lambda would import it."""
        return import_module(self.module or f"functions.{self.function}.handler").lambda_handler


def routes_of(function: str, app: Any, module: str = "") -> list[Route]:
    """The routes a function's resolver serves, from its OpenAPI document."""
    table = []
    for path, item in app.get_openapi_schema().paths.items():
        for method in METHODS:
            if getattr(item, method, None) is not None:
                table.append(Route(method.upper(), path, function, module))
    return table


@cache
def own_routes(app: Any) -> tuple[Route, ...]:
    """The routes `app` itself serves (a function answering a request no route of its own matches)."""
    return tuple(routes_of("", app))


def methods_at(path: str, table: Iterable[Route]) -> tuple[str, ...]:
    """The methods some route of `table` serves at `path`, sorted (empty: no route has this path): what a 405 names
    in its `Allow` header."""
    return tuple(sorted({route.method for route in table if route.pattern.match(path)}))
