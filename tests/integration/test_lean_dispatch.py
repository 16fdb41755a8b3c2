"""The lean dispatch of the hot routes (servers/lean.py) answers as the full path (an API Gateway event through the
function's resolver) does: bad input alike to the byte (status, content type, body) and changing nothing, good
requests alike but for the store times they carry, without an event built for them.

In process, through the servers' own `dispatch` and `send_result` (what goes on the wire), on the real store;
signing is tested over HTTP under both dispatches (tests/e2e/test_auth.py runs under each)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import NamedTuple

import pytest

from functions import store as store_module
from servers import adapter
from servers.adapter import dispatch, match_route, send_result
from servers.lean import HOT_ROUTES
from shared.settings import get_settings
from tidemq_protocol import codec
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, TopicConfig

JSON = "application/json"


class Answer(NamedTuple):
    status: int
    content_type: str
    body: bytes


@pytest.fixture
def server(tmp_path, monkeypatch):
    """`answer(dispatch, method, path, ...)`: what a server under that dispatch sends back, on a store in `tmp_path`
    with topic `orders` (2 queues) and group `billing`; events built are counted in `answer.events`."""
    monkeypatch.setenv("TIDEMQ_AUTH", "off")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    built = []

    def counted(*args, **kwargs):
        built.append(args[2].route_key)
        return to_event(*args, **kwargs)

    to_event = adapter.to_event
    monkeypatch.setattr(adapter, "to_event", counted)

    def open_at(name: str) -> None:
        store_module.close_store()
        monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / name))
        get_settings.cache_clear()
        store_module.process_store().create_topic(TopicConfig(name="orders", queues=2))
        store_module.process_store().create_group(GroupConfig(name="billing"))

    def answer(mode: str, method: str, path: str, body: bytes = b"", query: str = "", **headers: str) -> Answer:
        monkeypatch.setenv("TIDEMQ_GATEWAY_DISPATCH", mode)
        get_settings.cache_clear()
        raw_headers = [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items() if value]
        scope = {"method": method, "path": path, "query_string": query.encode(), "headers": raw_headers}
        matched = match_route(method, path)
        messages = []

        async def send(message) -> None:
            messages.append(message)

        async def serve() -> None:
            await send_result(send, await dispatch(scope, body, matched))

        asyncio.run(serve())
        content_type = dict(messages[0]["headers"]).get(b"content-type", b"").decode()
        return Answer(messages[0]["status"], content_type, messages[1]["body"])

    answer.open_at = open_at
    answer.events = built
    open_at("data")
    yield answer
    store_module.close_store()
    get_settings.cache_clear()


def records(topic: str = "orders", body: bytes = b"x") -> bytes:
    return codec.encode_records(topic, [Message(body, 0, born_timestamp=1_700_000_000_000)])


BAD_INPUT = [
    ("POST", "/v1/topics/orders/messages", {"messages": []}, "", {}),
    ("POST", "/v1/topics/orders/messages", b"{not json", "", {}),
    ("POST", "/v1/topics/orders/messages", b"{not json", "", {"content_type": ""}),
    ("POST", "/v1/topics/orders/messages", b"\xff\xfe", "", {"content_type": ""}),
    ("POST", "/v1/topics/orders/messages", b"\xff\xfe", "", {}),
    ("POST", "/v1/topics/orders/messages", {"messages": [{"body": "a"}], "extra": 1}, "", {}),
    ("POST", "/v1/topics/orders/messages", {"messages": [{"body": "a", "queue": 7}]}, "", {}),
    ("POST", "/v1/topics/orders/messages", b"[" * 40 + b"]" * 40, "", {}),
    ("POST", "/v1/topics/orders/messages", b"messages=a", "", {"content_type": "application/x-www-form-urlencoded"}),
    ("POST", "/v1/topics/orders/messages", b'{"messages":[{"body":"a"}]}', "", {"content_type": "text/plain"}),
    ("POST", "/v1/topics/missing/messages", {"messages": [{"body": "a"}]}, "", {}),
    ("POST", "/v1/topics/" + "t" * 300 + "/messages", {"messages": [{"body": "a"}]}, "", {}),
    ("POST", "/v1/topics/orders/messages", {"messages": [{"body": "a"}]}, "", {"idempotency_key": "\x01"}),
    ("POST", "/v1/topics/orders/batch", records(), "", {"content_type": "text/plain"}),
    ("POST", "/v1/topics/orders/batch", b"\x05\x00\x00\x00", "", {"content_type": codec.CONTENT_TYPE}),
    ("POST", "/v1/topics/orders/batch", b"", "", {"content_type": codec.CONTENT_TYPE}),
    ("POST", "/v1/topics/orders/batch", records()[:-1] + b"?", "", {"content_type": codec.RECORDS_CONTENT_TYPE}),
    ("POST", "/v1/topics/orders/batch", records("other"), "", {"content_type": codec.RECORDS_CONTENT_TYPE}),
    ("POST", "/v1/topics/missing/batch", records("missing"), "", {"content_type": codec.RECORDS_CONTENT_TYPE}),
    ("GET", "/v1/topics/orders/queues/0/batch", b"", "offset=-1", {}),
    ("GET", "/v1/topics/orders/queues/0/batch", b"", "offset=abc", {}),
    ("GET", "/v1/topics/orders/queues/0/batch", b"", "offset=1&offset=2", {}),
    ("GET", "/v1/topics/orders/queues/0/batch", b"", "max_messages=0", {}),
    ("GET", "/v1/topics/orders/queues/0/batch", b"", "offset=5", {}),
    ("GET", "/v1/topics/orders/queues/0/batch", b"", "tag=a&sql=b%3D1", {}),
    ("GET", "/v1/topics/orders/queues/0/batch", b"", "sql=a%20%3D", {}),
    ("GET", "/v1/topics/orders/queues/9/batch", b"", "", {}),
    ("GET", "/v1/topics/missing/queues/0/batch", b"", "", {}),
    ("POST", "/v1/groups/billing/topics/orders/receive/batch", {"invisible_ms": 1}, "", {}),
    ("POST", "/v1/groups/billing/topics/orders/receive/batch", {"tag": "a", "sql": "b = 1"}, "", {}),
    ("POST", "/v1/groups/billing/topics/orders/receive/batch", {"unknown": 1}, "", {}),
    ("POST", "/v1/groups/missing/topics/orders/receive/batch", {}, "", {}),
    ("POST", "/v1/groups/billing/topics/missing/receive/batch", {}, "", {}),
    ("POST", "/v1/groups/billing/topics/orders/ack", {"receipt_handles": ["short"]}, "", {}),
    ("POST", "/v1/groups/billing/topics/orders/ack", {"receipt_handles": ["A" * 28]}, "", {}),
    ("POST", "/v1/groups/billing/topics/orders/ack", {}, "", {}),
    ("POST", "/v1/groups/missing/topics/orders/ack", {"receipt_handles": ["A" * 28]}, "", {}),
]


@pytest.mark.parametrize(("method", "path", "body", "query", "headers"), BAD_INPUT)
def test_bad_input_is_answered_alike_to_the_byte_and_changes_nothing(server, method, path, body, query, headers):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    headers = {"content_type": JSON, **headers}
    events = server("events", method, path, body, query, **headers)
    lean = server("lean", method, path, body, query, **headers)
    assert lean == events
    assert 400 <= lean.status < 500
    assert [q.max_offset for q in store_module.process_store().queue_offsets("orders")] == [0, 0]


STORE_TIMES = re.compile(rb'"store_timestamp":\d+')


def good_requests(answer, mode: str) -> list:
    """A producer's and a consumer's requests, in order; what each answered, its store times left out."""
    sent = answer(mode, "POST", "/v1/topics/orders/messages", b'{"messages":[{"body":"a","queue":0}]}')
    sent = sent._replace(body=STORE_TIMES.sub(b"", sent.body))
    text = answer(mode, "POST", "/v1/topics/orders/batch", records(), content_type=codec.RECORDS_CONTENT_TYPE)
    binary = answer(
        mode, "POST", "/v1/topics/orders/batch", records(), content_type=codec.RECORDS_CONTENT_TYPE,
        accept=codec.SENT_CONTENT_TYPE,
    )  # fmt: skip
    replied = [r._replace(store_timestamp=0) for r in codec.decode_sent(binary.body)]
    read = answer(mode, "GET", "/v1/topics/orders/queues/0/batch", query="offset=0")
    messages, *offsets = codec.decode_consume(read.body)
    consumed = [(m.msg_id, m.queue_offset, m.body) for m in messages]  # a JSON message is born when it is sent
    deliveries, deadline = [], time.monotonic() + 60
    while len(deliveries) < 3 and time.monotonic() < deadline:  # a receive may not see the newest messages at once
        # JSON without a content type: the resolvers take it for JSON
        received = answer(mode, "POST", "/v1/groups/billing/topics/orders/receive/batch", b'{"max_messages":8}')
        assert (received.status, received.content_type) == (200, codec.RECEIVE_CONTENT_TYPE)
        deliveries += codec.decode_receive(received.body).received
    handles = json.dumps({"receipt_handles": [d.receipt_handle for d in deliveries]}).encode()
    acked = answer(mode, "POST", "/v1/groups/billing/topics/orders/ack", handles, content_type=JSON)
    return [
        sent,
        text,
        (binary.status, binary.content_type, replied),
        (read.status, read.content_type, consumed, offsets),
        sorted((d.message.msg_id, d.attempt) for d in deliveries),
        (acked.status, [r["status"] for r in json.loads(acked.body)["results"]]),
    ]


def test_good_requests_are_answered_alike_and_the_lean_path_builds_no_event(server):
    events = good_requests(server, "events")
    assert set(server.events) == set(HOT_ROUTES)  # each hot route, through an event
    server.open_at("again")  # a fresh store: the same requests store at the same places
    server.events.clear()
    lean = good_requests(server, "lean")
    assert server.events == []
    assert lean == events
    assert lean[2][2][0].queue == 0 and len(lean[3][2]) == 3 and lean[5][1] == ["acked"] * 3
