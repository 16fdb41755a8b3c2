"""The OpenAPI document in docs/ is the one the handlers serve, and every route is in it."""

from __future__ import annotations

import json
from pathlib import Path

from functions.openapi import openapi_json
from functions.routes import EXTRA_ROUTES, routes

DOCUMENT = Path(__file__).parents[2] / "docs" / "openapi.json"


def test_docs_openapi_json_is_up_to_date():
    assert json.loads(DOCUMENT.read_text()) == json.loads(openapi_json()), "run `make openapi`"


def test_every_route_is_documented_with_its_error_statuses():
    document = json.loads(openapi_json())
    for route in routes():
        if (route.method, route.path, route.function) in EXTRA_ROUTES:
            continue
        operation = document["paths"][route.path][route.method.lower()]
        statuses = set(operation["responses"])
        assert statuses & {"200", "201", "204"}, route
        if route.path.startswith("/v1/"):
            assert {"401", "403"} <= statuses and operation["security"] == [{"tidemq": []}], route
        if route.path.startswith("/v1/") and route.route_key != "GET /v1/whoami":  # takes nothing to be wrong
            assert "422" in statuses, route  # a request that breaks the schema
