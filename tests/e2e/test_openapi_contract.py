"""Schemathesis against /openapi.json on a live local server, each backend: no 5xx, no response that breaks the
schema."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.gateways import RequestsSigner, gateway_as_admin, signed_http

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def post(base: str, path: str, body: dict) -> None:
    signed_http().post(f"{base}{path}", json=body).raise_for_status()


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def live_api(request, tmp_path_factory):
    with gateway_as_admin(tmp_path_factory.mktemp("contract"), TIDEMQ_BACKEND=request.param) as base:
        post(base, "/v1/topics", {"name": "orders", "queues": 2})
        post(base, "/v1/groups", {"name": "g"})
        post(base, "/v1/topics/orders/messages", {"messages": [{"body": "hello", "keys": ["k"], "tag": "A"}]})
        yield base


@pytest.fixture(scope="module")
def api_schema(live_api):
    return schemathesis.openapi.from_url(f"{live_api}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_every_generated_request_within_its_schema(case, live_api):
    case.call_and_validate(base_url=live_api, checks=CHECKS, auth=RequestsSigner())
