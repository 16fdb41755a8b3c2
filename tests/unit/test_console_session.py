"""The console's session key: set, it signs; unset, a process makes its own, except in Lambda, where the console
function refuses to start without one (its instances must accept each other's cookies). A request is secure (its
cookie `Secure`) behind API Gateway or a https proxy, and the console's links stay under the prefix it is served
at."""

from __future__ import annotations

import pytest

from functions.api.binary import LOCAL_API_ID
from functions.console import session
from functions.console.web import parse
from shared.settings import Settings


def test_a_lambda_function_without_a_session_key_refuses_to_start(monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "tidemq-console")
    with pytest.raises(RuntimeError, match="TIDEMQ_CONSOLE_SESSION_KEY must be set in Lambda"):
        session.session_key(Settings())


def test_a_set_key_is_used_and_a_short_one_refused(monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "tidemq-console")
    assert session.session_key(Settings(console_session_key="k" * 40)) == b"k" * 40
    with pytest.raises(ValueError, match="at least 32"):
        Settings(console_session_key="short")


def test_locally_one_key_is_made_per_process(monkeypatch):
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    made = session.session_key(Settings())
    assert len(made) == session.KEY_BYTES and session.session_key(Settings()) == made


def event(api_id: str, **headers: str) -> dict:
    return {
        "rawPath": "/console/topics",
        "headers": headers,
        "requestContext": {"apiId": api_id, "http": {"method": "GET", "path": "/console/topics"}},
    }


def test_behind_api_gateway_or_a_https_proxy_the_request_is_secure_and_locally_it_is_not():
    assert parse(event("a1b2c3"), "/console/topics").secure
    assert not parse(event(LOCAL_API_ID), "/console/topics").secure
    assert parse(event(LOCAL_API_ID, **{"x-forwarded-proto": "https"}), "/console/topics").secure


def test_under_a_broker_s_prefix_the_console_s_links_stay_under_it():
    sent = event(LOCAL_API_ID)
    sent["requestContext"]["http"]["path"] = "/brokers/a/console/topics"
    request = parse(sent, "/console/topics")
    assert (request.base, request.path, request.url("/topic", name="orders")) == (
        "/brokers/a/console",
        "/topics",
        "/brokers/a/console/topic?name=orders",
    )
