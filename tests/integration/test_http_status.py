"""Each HTTP status of the API, through the real handlers invoked with API Gateway v2 events.

Client errors are 4xx with a JSON body saying what was wrong; nothing here may be a 5xx.
"""

from __future__ import annotations

import json

import pytest

from functions import store as store_module
from functions.local_gateway import LocalContext, match_route, to_event
from functions.routes import handler_for
from shared.settings import get_settings


@pytest.fixture
def api(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TIDEMQ_MAX_MESSAGE_BYTES", "2048")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("TIDEMQ_AUTH", "off")  # the handlers' own statuses; tests/e2e/test_auth.py has 401 and 403
    get_settings.cache_clear()

    def call(method: str, path: str, body: object = None, query: str = "") -> tuple[int, dict]:
        route, parameters = match_route(method, path)
        raw = json.dumps(body).encode() if body is not None else b""
        scope = {
            "method": method,
            "path": path,
            "query_string": query.encode(),
            "headers": [(b"content-type", b"application/json")],
        }
        event = to_event(scope, raw, route, parameters, "test-request")
        response = handler_for(route.function)(event, LocalContext(route.function, "test-request"))
        return response["statusCode"], json.loads(response["body"]) if response.get("body") else {}

    yield call
    store_module.close_store()
    get_settings.cache_clear()


@pytest.fixture
def orders(api):
    assert api("POST", "/v1/topics", {"name": "orders", "queues": 2})[0] == 201
    assert (
        api("POST", "/v1/topics/orders/messages", {"messages": [{"body": "a"}, {"body": "b"}], "queue": None})[0] == 422
    )
    assert api("POST", "/v1/topics/orders/messages", {"messages": [{"body": "a", "queue": 0}]})[0] == 200
    return api


def test_success_statuses(orders):
    assert orders("GET", "/v1/topics/orders")[0] == 200
    assert orders("POST", "/v1/groups", {"name": "g"})[0] == 201
    assert orders("DELETE", "/v1/groups/g")[0] == 204
    assert orders("DELETE", "/v1/topics/orders")[0] == 204


def test_schema_errors_are_422_and_name_the_field(orders):
    status, body = orders("POST", "/v1/topics", {"name": "t", "queues": 0})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "queues"]
    status, body = orders("GET", "/v1/topics/orders/queues/0/messages", query="offset=-1")
    assert status == 422 and body["detail"][0]["loc"] == ["query", "offset"]
    status, body = orders(
        "POST", "/v1/topics/orders/messages", {"messages": [{"body": "x", "body_encoding": "base64"}]}
    )
    assert status == 422 and "base64" in json.dumps(body)


def test_bad_values_are_400_saying_what_is_wrong(orders):
    status, body = orders("GET", "/v1/topics/bad.name")
    assert status == 400 and body["error"] == "InvalidName" and "'.'" in body["message"]
    status, body = orders("GET", "/v1/topics/orders/queues/5/messages")
    assert status == 400 and body["error"] == "QueueOutOfRange" and "valid queues are 0..1" in body["message"]
    status, body = orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "x", "keys": ["a b"]}]})
    assert status == 400 and "message 0" in body["message"]


def test_unknown_topic_group_or_message_is_404(orders):
    assert orders("GET", "/v1/topics/nope")[1]["error"] == "TopicNotFound"
    assert orders("GET", "/v1/topics/nope")[0] == 404
    status, body = orders("GET", "/v1/groups/nobody")
    assert (status, body["error"], body["message"]) == (404, "GroupNotFound", "consumer group 'nobody' does not exist")
    assert orders("GET", "/v1/messages/" + "0" * 24)[0] == 404


def test_existing_topic_is_409(orders):
    status, body = orders("POST", "/v1/topics", {"name": "orders"})
    assert status == 409 and body["error"] == "TopicExists"


def test_message_or_batch_too_large_is_413(orders):
    status, body = orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "x" * 3000}]})
    assert status == 413 and "limit is 2048" in body["message"]


def test_offsets_out_of_range_are_416_with_the_valid_range(orders):
    status, body = orders("GET", "/v1/topics/orders/queues/0/messages", query="offset=7")
    assert status == 416 and (body["min_offset"], body["max_offset"]) == (0, 1)
    assert orders("POST", "/v1/groups", {"name": "g"})[0] == 201
    status, body = orders("POST", "/v1/groups/g/offsets", {"topic": "orders", "offsets": {"0": 9}})
    assert status == 416 and "valid offsets are 0..1" in body["message"]


def test_a_refused_request_changes_nothing(orders):
    before = orders("GET", "/v1/topics/orders")[1]
    orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "ok"}, {"body": "x" * 3000}]})
    orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "ok", "queue": 9}]})
    assert orders("GET", "/v1/topics/orders")[1] == before


def test_the_handlers_refuse_a_body_over_the_limit_or_json_not_in_utf8_as_lambda_invokes_them(orders, monkeypatch):
    monkeypatch.setenv("TIDEMQ_MAX_REQUEST_BYTES", "1024")  # what API Gateway passed on is checked again
    get_settings.cache_clear()
    status, body = orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "x" * 1024}]})
    assert (status, body["error"]) == (413, "RequestTooLarge") and "the limit is 1024" in body["message"]

    route, parameters = match_route("POST", "/v1/topics/orders/messages")
    scope = {
        "method": "POST",
        "path": "/v1/topics/orders/messages",
        "headers": [(b"content-type", b"application/json")],
    }
    event = to_event(scope, b'{"messages": [{"body": "caf\xe9"}]}', route, parameters, "latin-1")
    assert event["isBase64Encoded"]  # not UTF-8: passed on as it came, never with its bad byte replaced
    response = handler_for(route.function)(event, LocalContext(route.function, "latin-1"))
    assert response["statusCode"] == 400 and "not valid UTF-8" in json.loads(response["body"])["message"]
    assert orders("GET", "/v1/topics/orders")[1]["name"] == "orders"
    assert [q["max_offset"] for q in orders("GET", "/v1/topics/orders")[1]["queue_offsets"]] == [1, 0]
