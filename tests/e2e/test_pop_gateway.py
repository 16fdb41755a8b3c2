"""Pop consumption over HTTP through a live local gateway: receive (as JSON and in the binary encoding, acking the
last batch or not), ack, change of invisible time and release, what each answers for a handle that names no current
delivery, and the bounds a request is held to."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.e2e.test_cli import command, environment
from tests.gateways import (
    each_dispatch,  # noqa: F401 (a fixture: this suite runs under both dispatches)
    gateway_as_admin,
)
from tidemq import SimpleConsumer
from tidemq.httpx_auth import signed_client
from tidemq_protocol import codec
from tidemq_protocol.errors import InvalidReceiptHandle


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def gateway(request, tmp_path_factory, dispatch) -> Iterator[str]:
    """One gateway a backend (and dispatch) for the module: each test makes a topic and a group of its own (`pop`)."""
    home = tmp_path_factory.mktemp("data")
    with gateway_as_admin(home, TIDEMQ_BACKEND=request.param, TIDEMQ_GATEWAY_DISPATCH=dispatch) as url:
        yield url


@dataclass(frozen=True)
class Pop:
    """A test's client, and its own topic (40 messages, `order 0` to `order 39`, over 4 queues) and group."""

    http: httpx.Client
    topic: str
    group: str

    @property
    def path(self) -> str:
        return f"/v1/groups/{self.group}/topics/{self.topic}"


@pytest.fixture
def pop(gateway) -> Iterator[Pop]:
    topic, group = f"orders-{uuid.uuid4().hex[:8]}", f"billing-{uuid.uuid4().hex[:8]}"
    with signed_client(gateway, timeout=60) as client:
        assert client.post("/v1/topics", json={"name": topic, "queues": 4}).status_code == 201
        assert client.post("/v1/groups", json={"name": group}).status_code == 201
        messages = [{"body": f"order {i}", "queue": i % 4} for i in range(40)]
        assert client.post(f"/v1/topics/{topic}/messages", json={"messages": messages}).status_code == 200
        yield Pop(client, topic, group)


def test_receive_ack_change_and_release(pop):
    first = pop.http.post(f"{pop.path}/receive", json={"max_messages": 32, "invisible_ms": 10_000}).json()["messages"]
    assert len(first) == 32 and {m["attempt"] for m in first} == {1}
    handles = [m["receipt_handle"] for m in first]
    acked = pop.http.post(f"{pop.path}/ack", json={"receipt_handles": handles}).json()["results"]
    assert [r["status"] for r in acked] == ["acked"] * 32
    again = pop.http.post(f"{pop.path}/ack", json={"receipt_handles": handles[:2]}).json()["results"]
    assert [r["status"] for r in again] == ["already_acked"] * 2

    rest = pop.http.post(f"{pop.path}/receive", json={"max_messages": 32, "wait_ms": 1000}).json()["messages"]
    assert sorted(m["body"] for m in first + rest) == sorted(f"order {i}" for i in range(40))
    changed = pop.http.post(
        f"{pop.path}/change-invisible", json={"receipt_handle": rest[0]["receipt_handle"], "invisible_ms": 60_000}
    )
    assert changed.status_code == 200 and changed.json()["receipt_handle"] != rest[0]["receipt_handle"]
    stale = pop.http.post(
        f"{pop.path}/change-invisible", json={"receipt_handle": rest[0]["receipt_handle"], "invisible_ms": 60_000}
    )
    assert (stale.status_code, stale.json()["error"]) == (409, "InvalidReceiptHandle")
    spent = rest[0]["receipt_handle"]
    answer = pop.http.post(f"{pop.path}/ack", json={"receipt_handles": [spent]}).json()
    assert answer["results"] == [{"receipt_handle": spent, "status": "invalid_receipt_handle"}]

    released = {"receipt_handle": rest[1]["receipt_handle"], "delay_ms": 0}  # without a delay: the group's backoff
    assert pop.http.post(f"{pop.path}/release", json=released).status_code == 204
    (back,) = pop.http.post(f"{pop.path}/receive", json={"max_messages": 32}).json()["messages"]
    assert (back["msg_id"], back["attempt"]) == (rest[1]["msg_id"], 2)


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("receive", {"max_messages": 33}, 422),  # the schema holds TIDEMQ_POP_MAX_MESSAGES
        ("receive", {"max_messages": 0}, 422),
        ("receive", {"invisible_ms": 9_999}, 422),  # TIDEMQ_POP_MIN_INVISIBLE_MS
        ("receive", {"invisible_ms": 43_200_001}, 422),
        ("receive", {"wait_ms": 20_001}, 422),
        ("receive/batch", {"max_messages": 33}, 422),
        ("receive/batch", {"invisible_ms": 9_999}, 422),
        ("receive/batch", {"ack": ["not a handle"]}, 422),
        ("receive/batch", {"ack": ["A" * 28] * 1001}, 422),
        ("receive/batch", {"ack": ["A" * 28]}, 409),  # the pattern's, but no handle: nothing acked, none received
        ("receive", {"ack": ["A" * 28]}, 409),
        ("ack", {"receipt_handles": []}, 422),
        ("ack", {"receipt_handles": ["not a handle"]}, 422),
        ("change-invisible", {"receipt_handle": "A" * 28, "invisible_ms": 10_000}, 409),
        ("release", {"receipt_handle": "A" * 28, "delay_ms": -1}, 422),
        ("release", {"receipt_handle": "A" * 28}, 409),  # names no delivery
    ],
)
def test_requests_out_of_bounds_are_refused_and_change_nothing(pop, path, body, status):
    response = pop.http.post(f"{pop.path}/{path}", json=body)
    assert response.status_code == status, response.text
    assert len(pop.http.post(f"{pop.path}/receive", json={"max_messages": 32}).json()["messages"]) == 32


def test_a_group_or_topic_that_does_not_exist_is_a_404(pop):
    for route in ("receive", "receive/batch"):
        assert pop.http.post(f"/v1/groups/nobody/topics/{pop.topic}/{route}", json={}).status_code == 404
        assert pop.http.post(f"/v1/groups/{pop.group}/topics/nothing/{route}", json={}).status_code == 404


def received_as_json(pop: Pop, group: str) -> dict[str, dict]:
    """Every message of the test's topic received as JSON by `group` (made here), by id."""
    assert pop.http.post("/v1/groups", json={"name": group}).status_code == 201
    messages = []
    while batch := pop.http.post(f"/v1/groups/{group}/topics/{pop.topic}/receive", json={}).json()["messages"]:
        messages += batch
    return {m["msg_id"]: m for m in messages}


def received_binary(pop: Pop, group: str) -> dict[str, codec.Received]:
    assert pop.http.post("/v1/groups", json={"name": group}).status_code == 201
    received = []
    while True:
        response = pop.http.post(f"/v1/groups/{group}/topics/{pop.topic}/receive/batch", json={})
        assert response.headers["content-type"] == codec.RECEIVE_CONTENT_TYPE
        batch = codec.decode_receive(response.content).received
        if not batch:
            return {r.message.msg_id: r for r in received}
        received += batch


def test_the_binary_receive_delivers_what_the_json_receive_does(pop):
    rich = [
        {"body": "//79", "body_encoding": "base64", "keys": ["k1", "k2"], "tag": "TagA", "properties": {"a": "b"}},
        {"body": "plain", "tag": "TagB", "queue": 2},
    ]
    assert pop.http.post(f"/v1/topics/{pop.topic}/messages", json={"messages": rich}).status_code == 200
    as_json, binary = received_as_json(pop, "by-json"), received_binary(pop, "by-binary")
    assert as_json.keys() == binary.keys() and len(binary) == 42
    for msg_id, view in as_json.items():
        message, delivery = binary[msg_id].message, binary[msg_id]
        assert view == {
            "msg_id": message.msg_id,
            "topic": message.topic,
            "queue": message.queue,
            "offset": message.queue_offset,
            "body": view["body"],
            "body_encoding": view["body_encoding"],
            "keys": list(message.keys),
            "tag": message.tag,
            "properties": message.properties,
            "message_group": None,  # a NORMAL topic's messages have none
            "born_timestamp": message.born_timestamp,
            "store_timestamp": message.store_timestamp,
            "receipt_handle": view["receipt_handle"],
            "attempt": delivery.attempt,
            "invisible_until_ms": view["invisible_until_ms"],
        }
        body = view["body"].encode() if view["body_encoding"] == "utf-8" else base64.b64decode(view["body"])
        assert body == message.body
    # each route's handles are handles of the group's: acked by the other route
    handles = [r.receipt_handle for r in binary.values()]
    acked = pop.http.post(f"/v1/groups/by-binary/topics/{pop.topic}/ack", json={"receipt_handles": handles})
    assert {r["status"] for r in acked.json()["results"]} == {"acked"}
    handles = [m["receipt_handle"] for m in as_json.values()]
    response = pop.http.post(f"/v1/groups/by-json/topics/{pop.topic}/receive/batch", json={"ack": handles})
    assert codec.decode_receive(response.content) == (["acked"] * 42, [])


@pytest.mark.parametrize("route", ["receive", "receive/batch"])
def test_a_receive_acks_first_the_deliveries_it_names(pop, route):
    def receive(**request):
        response = pop.http.post(f"{pop.path}/{route}", json=request)
        assert response.status_code == 200, response.text
        if route == "receive":
            body = response.json()
            return body["acks"], [m["receipt_handle"] for m in body["messages"]]
        acks, received = codec.decode_receive(response.content)
        return acks, [r.receipt_handle for r in received]

    acks, first = receive(max_messages=30, invisible_ms=10_000)
    assert acks == [] and len(first) == 30
    acks, rest = receive(ack=first[:29] + first[:1], max_messages=32)
    assert acks == ["acked"] * 29 + ["already_acked"] and len(rest) == 10
    acks, nothing = receive(ack=[*rest, first[29]])
    assert acks == ["acked"] * 11 and nothing == []


def test_the_sdk_simple_consumer(pop):
    with SimpleConsumer(pop.topic, pop.group, url=str(pop.http.base_url), invisible_ms=10_000) as consumer:
        received = consumer.receive(max_messages=32, wait_ms=1000)
        assert len(received) == 32 and all(r.message.body.startswith(b"order ") for r in received)
        consumer.ack(received[0])
        consumer.ack(received[0].receipt_handle)  # acked before: succeeds again
        assert consumer.ack_all(received[1:3]) == ["acked", "acked"]
        handle = consumer.change_invisible(received[3], 60_000)
        with pytest.raises(InvalidReceiptHandle):
            consumer.ack(received[3])  # its handle was spent by the change
        consumer.ack(handle)
        consumer.release(received[4])
        rest = consumer.receive(max_messages=32)  # the 8 not received yet, and the one given back
        assert len(rest) == 9 and {r.attempt for r in rest if r.message.msg_id == received[4].message.msg_id} == {2}
        acks, more = consumer.ack_and_receive([*rest, received[0]], wait_ms=0)
        assert acks == ["acked"] * 9 + ["already_acked"] and more == []


def test_the_command_line_receives_and_acks(pop):
    def tidemq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command(str(pop.http.base_url), *args), capture_output=True, text=True, timeout=60, env=environment()
        )

    received = tidemq("receive", pop.topic, "-g", pop.group, "-n", "3", "--invisible-ms", "10000")
    assert received.returncode == 0, received.stderr
    handles = [json.loads(line)["receipt_handle"] for line in received.stdout.splitlines()]
    assert len(handles) == 3
    acked = tidemq("ack", pop.topic, "-g", pop.group, *handles)
    assert acked.returncode == 0 and acked.stdout.count(": acked") == 3, acked.stdout + acked.stderr
    again = tidemq("ack", pop.topic, "-g", pop.group, "A" * 28)
    assert (again.returncode, again.stderr) == (1, f"tidemq: {'A' * 28!r} is not a receipt handle\n")
    raw = tidemq("receive", pop.topic, "-g", pop.group, "--ack", "-o", "raw")  # 32 at most, the server's bound
    assert len(raw.stdout.splitlines()) == 32 and raw.returncode == 0
    assert len(tidemq("receive", pop.topic, "-g", pop.group, "--ack").stdout.splitlines()) == 5
    assert tidemq("receive", pop.topic, "-g", pop.group).stdout == ""  # every message acked
