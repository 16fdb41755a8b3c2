"""Each HTTP status of the API, through the real handlers invoked with API Gateway v2 events, and the routing of the
real gateway over HTTP.

Client errors are 4xx with a JSON body saying what was wrong; nothing here may be a 5xx. A request that breaks the
document (docs/openapi.json) is refused, a 422 naming the field for what the models check; one the document allows
is refused only for what the store holds now: 404 when what the URL names does not exist, 409 when the request
conflicts with the current state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from functions import store as store_module
from functions.api.routing import Route
from functions.routes import handler_for
from servers.adapter import LocalContext, match_route, to_event
from servers.process import running_gateway
from shared.settings import get_settings


@pytest.fixture
def api(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TIDEMQ_MAX_MESSAGE_BYTES", "2048")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("TIDEMQ_AUTH", "off")  # the handlers' own statuses; tests/e2e/test_auth.py has 401 and 403
    get_settings.cache_clear()

    def call(method: str, path: str, body: object = None, query: str = "", function: str = "") -> tuple[int, dict]:
        """`function`: invoke that function even if no route has this method (as API Gateway's ANY route would)."""
        route, parameters = match_route(method, path) or (Route(method, path, function), {})
        raw = json.dumps(body).encode() if body is not None else b""
        scope = {
            "method": method,
            "path": path,
            "query_string": query.encode(),
            "headers": [(b"content-type", b"application/json")],
        }
        event = to_event(scope, raw, route, parameters, "test-request")
        response = handler_for(route.function)(event, LocalContext(route.function, "test-request"))
        call.headers = response.get("headers") or {}
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
    assert api("POST", "/v1/groups", {"name": "g"})[0] == 201
    return api


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[str]:
    with running_gateway(tmp_path_factory.mktemp("routing")) as url:
        yield url


def send(base: str, method: str, path: str) -> httpx.Response:
    """A request as any HTTP client sends it, for what the SDK never sends (an unknown method or path)."""
    return httpx.request(method, f"{base}{path}", timeout=10)


def test_success_statuses(orders):
    assert orders("GET", "/v1/topics/orders")[0] == 200
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


@pytest.mark.parametrize(
    ("method", "path", "body", "query", "field", "says"),
    [
        ("GET", "/v1/topics/bad.name", None, "", ["path", "topic"], "characters outside [A-Za-z0-9_%|-]: '.'"),
        ("POST", "/v1/topics", {"name": "x" * 128}, "", ["body", "name"], "the limit is 127"),
        ("GET", "/v1/topics/orders/queues/1024/messages", None, "", ["path", "queue"], "less than or equal to 1023"),
        ("GET", "/v1/topics/orders/queues/0/messages", None, "tag=A%20||", ["query", "tag"], "tag filter"),
        ("GET", "/v1/messages/not-an-id", None, "", ["path", "msg_id"], "should match pattern"),
        ("POST", "/v1/topics", {"name": "t", "queues": True}, "", ["body", "queues"], "valid integer"),
        ("POST", "/v1/topics", {"name": "t", "queues": "2"}, "", ["body", "queues"], "valid integer"),
        ("POST", "/v1/topics", {"name": "t", "retention_ms": 2**53}, "", ["body", "retention_ms"], "less than"),
        ("POST", "/v1/groups/g/offsets", {"topic": "orders", "offsets": {"01": 0}}, "", None, "leading zero"),
        ("PUT", "/v1/groups/" + "g" * 123 + "/push", {"topic": "orders", "target": "lambda:f"}, "", None, "122"),
    ],
)
def test_what_the_document_declares_is_what_a_422_refuses(orders, method, path, body, query, field, says):
    status, answer = orders(method, path, body, query)
    assert status == 422 and says in answer["message"], answer
    if field is not None:
        assert answer["detail"][0]["loc"] == field


def test_a_number_without_a_fraction_is_an_integer_as_json_schema_says(orders):
    status, body = orders("POST", "/v1/topics", {"name": "floaty", "queues": 2.0})
    assert (status, body["queues"]) == (201, 2)


def test_bad_values_are_400_saying_what_is_wrong(orders):
    status, body = orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "x", "keys": ["a b"]}]})
    assert status == 400 and "message 0" in body["message"]


def test_what_the_url_names_and_does_not_exist_is_404(orders):
    assert orders("GET", "/v1/topics/nope")[1]["error"] == "TopicNotFound"
    assert orders("GET", "/v1/topics/nope")[0] == 404
    status, body = orders("GET", "/v1/groups/nobody")
    assert (status, body["error"], body["message"]) == (404, "GroupNotFound", "consumer group 'nobody' does not exist")
    assert orders("GET", "/v1/messages/" + "0" * 24)[0] == 404
    status, body = orders("GET", "/v1/topics/orders/queues/5/messages")
    assert status == 404 and body["error"] == "QueueOutOfRange" and "valid queues are 0..1" in body["message"]
    assert orders("GET", "/v1/groups/g", query="topic=nope")[0] == 404


def test_a_topic_or_queue_the_body_names_that_does_not_exist_is_409(orders):
    status, body = orders("POST", "/v1/groups/g/offsets", {"topic": "nope", "offsets": {"0": 0}})
    assert (status, body["error"]) == (409, "TopicNotFound")
    status, body = orders("POST", "/v1/groups/g/reset", {"topic": "nope", "to": "earliest"})
    assert (status, body["error"]) == (409, "TopicNotFound")
    status, body = orders("PUT", "/v1/groups/g/push", {"topic": "nope", "target": "lambda:f"})
    assert (status, body["error"]) == (409, "TopicNotFound")
    status, body = orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "x", "queue": 9}]})
    assert status == 409 and body["error"] == "QueueOutOfRange" and "valid queues are 0..1" in body["message"]
    status, body = orders("POST", "/v1/groups/g/offsets", {"topic": "orders", "offsets": {"7": 0}})
    assert (status, body["error"]) == (409, "QueueOutOfRange")


def test_an_existing_topic_or_group_is_409(orders):
    status, body = orders("POST", "/v1/topics", {"name": "orders"})
    assert status == 409 and body["error"] == "TopicExists"
    assert orders("POST", "/v1/groups", {"name": "g"})[1]["error"] == "GroupExists"


def test_fewer_queues_than_the_topic_has_is_409(orders):
    status, body = orders("PATCH", "/v1/topics/orders", {"queues": 1})
    assert status == 409 and body["error"] == "QueuesCannotShrink" and "grow, not shrink" in body["message"]
    assert orders("GET", "/v1/topics/orders")[1]["queues"] == 2


def test_offsets_out_of_range_are_409_with_the_valid_range(orders):
    status, body = orders("GET", "/v1/topics/orders/queues/0/messages", query="offset=7")
    assert status == 409 and (body["error"], body["min_offset"], body["max_offset"]) == ("OffsetOutOfRange", 0, 1)
    status, body = orders("POST", "/v1/groups/g/offsets", {"topic": "orders", "offsets": {"0": 9}})
    assert status == 409 and "valid offsets are 0..1" in body["message"]


def test_the_push_subscription_of_a_group_that_pulls_is_409(orders):
    status, body = orders("GET", "/v1/groups/g/push")
    assert (status, body["error"]) == (409, "NoPushSubscription")
    assert orders("PUT", "/v1/groups/g/push", {"topic": "orders", "target": "lambda:billing"})[0] == 200
    assert orders("GET", "/v1/groups/g/push")[1]["push"]["target"] == "lambda:billing"
    assert orders("DELETE", "/v1/groups/g/push")[0] == 204
    assert orders("GET", "/v1/groups/g/push")[0] == 409


def test_a_binary_batch_in_another_content_type_is_415(orders):
    status, body = orders("POST", "/v1/topics/orders/batch", {"messages": [{"body": "x"}]})
    assert status == 415 and "not accepted" in body["message"]


def test_message_or_batch_too_large_is_413(orders):
    status, body = orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "x" * 3000}]})
    assert status == 413 and "limit is 2048" in body["message"]


def test_a_refused_request_changes_nothing(orders):
    before = orders("GET", "/v1/topics/orders")[1]
    orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "ok"}, {"body": "x" * 3000}]})
    orders("POST", "/v1/topics/orders/messages", {"messages": [{"body": "ok", "queue": 9}]})
    orders("PATCH", "/v1/topics/orders", {"queues": 1})
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


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/topics", "GET, POST"),
        ("POST", "/v1/topics/orders", "DELETE, GET, PATCH"),
        ("PATCH", "/v1/topics/orders/messages", "GET, POST"),
        ("GET", "/v1/groups/g/offsets", "POST"),
        ("TRACE", "/health", "GET"),
        ("OPTIONS", "/v1/groups/g/push", "DELETE, GET, PUT"),
    ],
)
def test_an_unknown_method_on_a_known_path_is_405_naming_the_methods_there(gateway, method, path, allowed):
    response = send(gateway, method, path)
    assert (response.status_code, response.headers["allow"]) == (405, allowed)
    assert response.json()["error"] == "MethodNotAllowed" and method in response.json()["message"]


def test_an_unknown_path_is_404(gateway):
    response = send(gateway, "GET", "/v1/nothing/here")
    assert (response.status_code, response.json()["error"]) == (404, "RouteNotFound")
    assert "allow" not in response.headers


def test_a_function_sent_a_method_it_has_no_route_for_answers_405_too(api):
    """As Lambda behind an API Gateway route for any method would: the function's resolver knows its own routes."""
    status, body = api("DELETE", "/v1/topics", function="admin")
    assert (status, body["error"], api.headers["Allow"]) == (405, "MethodNotAllowed", "GET, POST")
    status, body = api("GET", "/v1/no/such/path", function="admin")
    assert (status, body["error"]) == (404, "RouteNotFound")
