"""The HTTP API's route table: which Lambda function serves which route.

One table for both places that route: the local gateway (`functions.local_gateway`) and the CDK app
(`infra_cdk`), so local runs and AWS expose the same API. Paths use API Gateway's syntax: `{name}`
is one path segment, `{name+}` the rest of the path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str  # package under functions/ whose handler.lambda_handler serves the route

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\{(\w+)\+\}", r"(?P<\1>.+)", self.path)
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", regex)
        return re.compile(f"^{regex}$")


ROUTES: tuple[Route, ...] = (Route("GET", "/health", "admin"),)


def handler_for(function: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda entry point of a function, imported as Lambda would import it."""
    return import_module(f"functions.{function}.handler").lambda_handler
