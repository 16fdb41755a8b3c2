"""A BrokerContainer serves RocketMQ 5's gRPC for all its brokers on one port, the client's namespace naming the
broker (servers/container/grpc_routing.py): the unmodified Python client sends and receives through it, each
broker's messages are byte for byte where that broker's HTTP API shows them (and in no other broker), and a
namespace naming no broker, or a write to a slave, is refused with RocketMQ's code."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from servers.grpc_proxy.protocol import definition_pb2 as pb
from servers.grpc_proxy.protocol import service_pb2 as rpc
from servers.process import free_port
from tests.containers import RunningContainer, container_running, grpc_call
from tests.e2e.test_rocketmq_clients import Proxy, b64, body_of, create, run_client, stored
from tidemq.httpx_auth import signed_client


def slave_of(name: str, master: RunningContainer) -> str:
    return (
        f"brokerName={name}\nbrokerId=1\nbrokerRole=SLAVE\nhaMasterAddress={master.url}\n"
        f"haMasterAccessKey={master.credentials.access_key}\nhaMasterSecretKey={master.credentials.secret_key}\n"
    )


@pytest.fixture(scope="module")
def containers(tmp_path_factory) -> Iterator[tuple[RunningContainer, str]]:
    """A container holding masters a and b and a slave c (of another container's c), with gRPC on a port of its
    own config file; and that port's address."""
    base = tmp_path_factory.mktemp("container-grpc")
    with container_running(base / "other", {"broker-c.conf": "brokerName=c\n"}) as other:
        port = free_port()
        brokers = {"broker-a.conf": "brokerName=a\n", "broker-b.conf": "brokerName=b\n"}
        with container_running(base / "root", brokers, grpcServerPort=str(port)) as running:
            running.add(slave_of("c", other))
            yield running, f"127.0.0.1:{port}"


def broker_proxy(containers: tuple[RunningContainer, str], name: str) -> Proxy:
    """What test_rocketmq_clients' helpers take: the gRPC endpoint, and broker `name`'s HTTP API."""
    running, endpoint = containers
    credentials = running.credentials
    http = signed_client(f"{running.url}/brokers/{name}", credentials, timeout=60)
    return Proxy(endpoint, http, credentials.access_key, credentials.secret_key, running.root)


def test_the_start_line_names_the_grpc_port(containers):
    running, endpoint = containers
    assert f"RocketMQ 5 gRPC proxy on {endpoint}" in running.log()


def test_each_broker_s_clients_reach_its_store_by_their_namespace(containers, tmp_path):
    a, b = broker_proxy(containers, "a"), broker_proxy(containers, "b")
    for proxy in (a, b):  # the same names in both brokers
        create(proxy, "orders", "billing")
    bodies = {"a": [f"a-{i}".encode() for i in range(3)], "b": [bytes(range(256)), b"b \x00 1"]}
    sent = {}
    for name, proxy in (("a", a), ("b", b)):
        spec = {
            "role": "producer",
            "topic": "orders",
            "namespace": name,
            "messages": [{"body": b64(m)} for m in bodies[name]],
        }
        events = run_client(proxy, spec, tmp_path)
        assert all("sent" in event for event in events) and len(events) == len(bodies[name]), events
        sent[name] = [event["sent"] for event in events]
    for name, proxy in (("a", a), ("b", b)):  # each broker holds its own clients' messages, and only those
        views = stored(proxy, "orders")
        assert sorted(views) == sorted(sent[name])
        assert sorted(body_of(views[message_id]) for message_id in sent[name]) == sorted(bodies[name])

    want = [b64(body) for body in bodies["b"]]
    steps = [{"do": "receive", "want": 2, "invisible_s": 60}] + [{"do": "ack", "body": body} for body in want]
    spec = {"role": "simple", "topic": "orders", "group": "billing", "namespace": "b", "steps": steps}
    events = run_client(b, spec, tmp_path)
    assert not [event for event in events if "error" in event], events
    received = [event["received"] for event in events if "received" in event]
    assert sorted(d["body"] for d in received) == sorted(want)
    assert sorted(d["message_id"] for d in received) == sorted(sent["b"])
    assert [event["acked"] for event in events if "acked" in event] == want


def test_a_namespace_naming_no_broker_and_a_send_to_a_slave_are_refused(containers):
    running, a = containers[0], broker_proxy(containers, "a")
    create(a, "refusals")
    route = rpc.QueryRouteRequest(topic=pb.Resource(name="refusals"))
    assert grpc_call(running, "QueryRoute", route, "a").status.code == pb.OK
    missing = grpc_call(running, "QueryRoute", route, None).status
    assert missing.code == pb.BAD_REQUEST and "a, b, c" in missing.message  # it says which brokers there are
    assert grpc_call(running, "QueryRoute", route, "nope").status.code == pb.NOT_FOUND
    message = pb.Message(
        topic=pb.Resource(name="refusals"),
        system_properties=pb.SystemProperties(message_id="raw-1", message_type=pb.NORMAL),
        body=b"raw",
    )
    send = rpc.SendMessageRequest(messages=[message])
    assert grpc_call(running, "SendMessage", send, "c").status.code == pb.FORBIDDEN  # c is a slave
    assert grpc_call(running, "SendMessage", send, "a").status.code == pb.OK
    assert [body_of(view) for view in stored(a, "refusals").values()] == [b"raw"]


def test_a_setting_turns_the_containers_proxy_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMQ_GRPC_ENABLED", "false")  # the container's process inherits it
    port = free_port()
    brokers = {"broker-a.conf": "brokerName=a\n"}
    with container_running(tmp_path / "root", brokers, grpcServerPort=str(port)) as running:
        assert "gRPC proxy" not in running.log()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(channel).result(timeout=2)
