"""What a consumer is told, through a live gateway on both backends, when it settles a message that went to its
group's dead letters without an ack (issue 42): over HTTP an ack's status `dead_lettered` (in `.../ack` and in a
receive's `acks`, JSON and binary) and a 409 `MessageDeadLettered` for a change of invisible time or a release;
in the SDK, MessageDeadLettered (an InvalidReceiptHandle a caller can tell apart); over gRPC, the entry's
INVALID_RECEIPT_HANDLE (what a RocketMQ proxy answers a handle no longer ackable) with a message naming it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from servers.grpc_proxy.protocol import definition_pb2 as pb
from servers.grpc_proxy.protocol import service_pb2 as rpc
from servers.process import free_port
from tests.e2e.test_rocketmq_clients import Proxy, call
from tests.gateways import gateway_as_admin
from tidemq import SimpleConsumer
from tidemq.credentials import read_profile
from tidemq.httpx_auth import signed_client
from tidemq_protocol import codec
from tidemq_protocol.errors import InvalidReceiptHandle, MessageDeadLettered
from tidemq_store.pop.api import Receipt

HOLD_MS = 1_000


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def proxy(request, tmp_path_factory) -> Iterator[Proxy]:
    """A gateway a backend for the module, with its gRPC proxy on a free port, and holds from 1 s."""
    home = tmp_path_factory.mktemp(f"lettered-{request.param}") / "data"
    port = free_port()
    env = {"TIDEMQ_BACKEND": request.param, "TIDEMQ_GRPC_PORT": str(port), "TIDEMQ_POP_MIN_INVISIBLE_MS": "1000"}
    with gateway_as_admin(home, **env) as url, signed_client(url, timeout=60) as http:
        admin = read_profile(home / "credentials")
        yield Proxy(f"127.0.0.1:{port}", http, admin.access_key, admin.secret_key, home, url)


@dataclass(frozen=True)
class Lettered:
    """A test's topic and group (one delivery a message, then its dead letters), and the handles of a message
    received once and dead-lettered since, never acked."""

    http: httpx.Client
    topic: str
    group: str
    handles: list[str]

    @property
    def path(self) -> str:
        return f"/v1/groups/{self.group}/topics/{self.topic}"


@pytest.fixture
def lettered(proxy) -> Lettered:
    topic, group = f"orders-{uuid.uuid4().hex[:8]}", f"billing-{uuid.uuid4().hex[:8]}"
    http = proxy.http
    assert http.post("/v1/topics", json={"name": topic, "queues": 1}).status_code == 201
    assert http.post("/v1/groups", json={"name": group, "retry": {"max_delivery_attempts": 1}}).status_code == 201
    messages = [{"body": f"order {i}"} for i in range(2)]
    assert http.post(f"/v1/topics/{topic}/messages", json={"messages": messages}).status_code == 200
    path = f"/v1/groups/{group}/topics/{topic}"
    received = http.post(f"{path}/receive", json={"max_messages": 2, "invisible_ms": HOLD_MS}).json()["messages"]
    assert len(received) == 2
    time.sleep(HOLD_MS / 1000 + 0.2)
    assert http.post(f"{path}/receive", json={"max_messages": 2}).json()["messages"] == []  # lettered, not delivered
    letters = http.get(f"/v1/groups/{group}/dead-letters").json()["messages"]
    assert sorted(letter["body"] for letter in letters) == ["order 0", "order 1"]
    return Lettered(http, topic, group, [message["receipt_handle"] for message in received])


def test_http_answers_an_ack_dead_lettered_and_a_change_or_release_409_message_dead_lettered(lettered):
    first, second = lettered.handles
    results = lettered.http.post(f"{lettered.path}/ack", json={"receipt_handles": [first]}).json()["results"]
    assert results == [{"receipt_handle": first, "status": "dead_lettered"}]
    answer = lettered.http.post(f"{lettered.path}/receive", json={"ack": [first], "max_messages": 1}).json()
    assert answer == {"messages": [], "acks": ["dead_lettered"]}
    binary = lettered.http.post(f"{lettered.path}/receive/batch", json={"ack": [second], "max_messages": 1})
    assert codec.decode_receive(binary.content) == (["dead_lettered"], [])
    for route, body in [
        ("change-invisible", {"receipt_handle": first, "invisible_ms": 60_000}),
        ("release", {"receipt_handle": second, "delay_ms": 0}),
        ("release", {"receipt_handle": second}),  # a nack
    ]:
        refused = lettered.http.post(f"{lettered.path}/{route}", json=body)
        assert (refused.status_code, refused.json()["error"]) == (409, "MessageDeadLettered"), route
        assert "dead letters" in refused.json()["message"]


def test_the_sdk_raises_message_dead_lettered_a_caller_can_tell_from_a_stale_handle(lettered, proxy):
    first, second = lettered.handles
    with SimpleConsumer(lettered.topic, lettered.group, url=proxy.url) as consumer:
        with pytest.raises(MessageDeadLettered):
            consumer.ack(first)
        assert consumer.ack_all([first, second]) == ["dead_lettered"] * 2
        assert consumer.ack_and_receive([second]).acks == ["dead_lettered"]
        for settle in (lambda: consumer.change_invisible(first, 60_000), lambda: consumer.nack(second)):
            with pytest.raises(MessageDeadLettered):
                settle()
        with pytest.raises(InvalidReceiptHandle) as stale:  # a handle of an offset never delivered is not one
            consumer.ack(Receipt(0, 99, 12345).handle())
        assert not isinstance(stale.value, MessageDeadLettered)


def test_grpc_answers_invalid_receipt_handle_naming_the_dead_letters(lettered, proxy):
    group, topic = pb.Resource(name=lettered.group), pb.Resource(name=lettered.topic)
    entries = [rpc.AckMessageEntry(message_id="m", receipt_handle=handle) for handle in lettered.handles]
    acked = call(proxy, "AckMessage", rpc.AckMessageRequest(group=group, topic=topic, entries=entries))
    assert acked.status.code == pb.INVALID_RECEIPT_HANDLE
    assert [(entry.status.code, entry.status.message) for entry in acked.entries] == [
        (pb.INVALID_RECEIPT_HANDLE, "dead_lettered")
    ] * 2
    change = rpc.ChangeInvisibleDurationRequest(group=group, topic=topic, receipt_handle=lettered.handles[0])
    change.invisible_duration.seconds = 10
    changed = call(proxy, "ChangeInvisibleDuration", change)
    assert changed.status.code == pb.INVALID_RECEIPT_HANDLE and "dead letters" in changed.status.message
    forward = rpc.ForwardMessageToDeadLetterQueueRequest(group=group, topic=topic, receipt_handle=lettered.handles[1])
    forwarded = call(proxy, "ForwardMessageToDeadLetterQueue", forward)
    assert forwarded.status.code == pb.INVALID_RECEIPT_HANDLE and "dead letters" in forwarded.status.message
