"""The HTTP API's Lambda authorizer (functions/authorizer): a gate before any function runs. It lets through a
request signed by a known user with a fresh date and a nonce (its body is the function's to check: API Gateway
gives an authorizer none), and the public paths; it refuses an unsigned request, an unknown user, a wrong key, a
stale date, and a bodiless request whose signature is for another path."""

from __future__ import annotations

import time

import pytest

from functions import store as store_module
from functions.api.auth import secret_box
from functions.authorizer.handler import lambda_handler
from functions.logic.users import create_user
from functions.store import get_store
from servers.adapter import LocalContext
from shared.settings import get_settings
from tidemq_protocol import signing
from tidemq_protocol.acl import UserType
from tidemq_protocol.api.users import UserSpec


@pytest.fixture
def secret(tmp_path, monkeypatch) -> str:
    """The secret key of `alice`, a super user of a store under tmp_path that the authorizer reads."""
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TIDEMQ_AUTH", "on")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    get_settings.cache_clear()
    yield create_user(get_store(), secret_box(), UserSpec(name="alice", user_type=UserType.SUPER)).secret_key
    store_module.close_store()
    get_settings.cache_clear()


def event(secret: str, method: str, path: str, *, body=b"", signed_body=None, user="alice", date_ms=None) -> dict:
    """An API Gateway v2 authorizer event of a request signed as `user` (over `signed_body`, if given)."""
    date_ms = date_ms or int(time.time() * 1000)
    signed = signing.body_sha256(body if signed_body is None else signed_body)
    request = signing.SignedRequest(method, path, "", signed, date_ms, signing.new_nonce())
    headers = signing.headers(user, secret, request)
    if body:
        headers["content-length"] = str(len(body))
    return {
        "version": "2.0",
        "type": "REQUEST",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {"http": {"method": method, "path": path, "sourceIp": "192.0.2.1"}},
    }


def authorized(event: dict) -> bool:
    return lambda_handler(event, LocalContext("authorizer", "test-request"))["isAuthorized"]


def test_a_signed_request_of_a_known_user_passes_and_its_body_is_left_to_the_function(secret):
    assert authorized(event(secret, "GET", "/v1/topics"))
    assert authorized(event(secret, "POST", "/v1/topics/a/messages", body=b'{"messages": []}'))
    assert authorized(event(secret, "POST", "/v1/topics/a/messages", body=b"{}", signed_body=b"other"))


def test_the_public_paths_pass_unsigned():
    assert authorized({"rawPath": "/health", "headers": {}})
    assert authorized({"rawPath": "/openapi.json", "headers": {}})


def test_what_is_not_signed_by_a_known_user_now_is_refused(secret):
    assert not authorized({"rawPath": "/v1/topics", "headers": {}, "requestContext": {"http": {"method": "GET"}}})
    assert not authorized(event("A" * 43 + "=", "GET", "/v1/topics"))  # a wrong key
    assert not authorized(event(secret, "GET", "/v1/topics", user="mallory"))
    assert not authorized(event(secret, "GET", "/v1/topics", date_ms=int(time.time() * 1000) - 3_600_000))
    moved = event(secret, "GET", "/v1/topics")
    moved["rawPath"] = "/v1/users"  # a bodiless request signed for another path
    assert not authorized(moved)
