"""The gRPC proxy restarted and killed under the unmodified RocketMQ 5 Python client (tests/rocketmq_client.py), on
both backends: a client keeps working across a restart, and with the proxy killed (SIGKILL) again and again while
clients produce and consume, no acknowledged send is lost, no acked message comes again, and no message is stored
twice although the client retried its sends across the kills (each retry carries the message's id: produce is
idempotent, docs/producing.md)."""

from __future__ import annotations

import base64
import collections
import json
import random
import time
from collections.abc import Iterator

import pytest

from servers.grpc_proxy.protocol import definition_pb2 as pb
from servers.grpc_proxy.protocol import service_pb2 as rpc
from servers.process import free_port
from tests.e2e.test_rocketmq_clients import (
    DEADLINE_S,
    EventReader,
    Proxy,
    b64,
    body_of,
    call,
    message,
    start_client,
    stored,
    wait_until,
)
from tests.gateways import RestartedGateway, restarted_gateway
from tidemq.credentials import read_profile
from tidemq.httpx_auth import signed_client


@pytest.fixture(params=["embedded", "serverless"])
def gateway(request, tmp_path) -> Iterator[tuple[RestartedGateway, Proxy]]:
    """A gateway that the test kills and starts again, with its gRPC proxy on a port of its own."""
    port = free_port()
    settings = {"TIDEMQ_GRPC_PORT": str(port), "TIDEMQ_GRPC_MIN_LONG_POLLING_MS": "1000"}
    with restarted_gateway(request, tmp_path, request.param, **settings) as running:
        admin = read_profile(running.home / "credentials")
        with signed_client(running.url, timeout=60) as http:
            yield running, Proxy(f"127.0.0.1:{port}", http, admin.access_key, admin.secret_key, running.home)


def create(proxy: Proxy, topic: str, group: str) -> None:
    assert proxy.http.post("/v1/topics", json={"name": topic, "queues": 4}).status_code == 201
    assert proxy.http.post("/v1/groups", json={"name": group}).status_code == 201


def acked_by(consumer: EventReader) -> set[str]:
    return {event["acked"] for event in list(consumer.events) if "acked" in event}


def test_a_client_keeps_working_across_a_proxy_restart(gateway, tmp_path):
    running, proxy = gateway
    create(proxy, "r-topic", "r-group")
    before, after = b"sent before the restart", b"sent after it"
    # a client's channel backs off its reconnects while the proxy is down (gRPC's backoff, up to seconds), and
    # RocketMQ's client spends its four attempts in that time: the application sends again, with the same producer
    messages = [{"body": b64(before)}, {"body": b64(after), "after_line": True, "until_sent": True}]
    spec = {"role": "producer", "topic": "r-topic", "messages": messages}
    producer = EventReader(start_client(proxy, spec, tmp_path))
    consumer = EventReader(start_client(proxy, {"role": "push", "topic": "r-topic", "group": "r-group"}, tmp_path))
    try:
        wait_until(lambda: len(consumer.consumed()) == 1, "the first message consumed")
        running.kill()
        running.start()
        producer.process.stdin.write("\n")  # the same producer sends again, to the restarted proxy
        producer.process.stdin.flush()
        wait_until(lambda: len(consumer.consumed()) == 2, "the second message consumed by the same consumer")
    finally:
        consumer.close()
        producer.close()
    sent = [event for event in producer.events if "sent" in event]
    assert len(sent) == 2, producer.events
    consumed = [event["consumed"] for event in consumer.consumed()]
    assert [base64.b64decode(c["body"]) for c in consumed] == [before, after]
    views = stored(proxy, "r-topic")
    assert sorted(views) == sorted(event["sent"] for event in sent)
    assert [body_of(views[c["message_id"]]) for c in consumed] == [before, after]


@pytest.mark.long
def test_proxy_killed_ten_times_loses_no_acked_send_redelivers_no_acked_message_stores_none_twice(gateway, tmp_path):
    running, proxy = gateway
    create(proxy, "k-topic", "k-group")
    producers = [
        EventReader(
            start_client(
                proxy,
                {
                    "role": "producer",
                    "topic": "k-topic",
                    "messages": [{"body": b64(f"p{p}-{n}".encode()), "pause_s": 0.05} for n in range(300)],
                },
                tmp_path,
            )
        )
        for p in range(2)
    ]
    consumer = EventReader(start_client(proxy, {"role": "drain", "topic": "k-topic", "group": "k-group"}, tmp_path))
    rng = random.Random(29)
    try:
        for _ in range(10):
            time.sleep(rng.uniform(0.5, 2.0))
            running.kill()
            running.start()
        for producer in producers:
            producer.process.wait(timeout=DEADLINE_S)
        acked_sends = {event["sent"] for p in producers for event in p.events if "sent" in event}
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not acked_sends <= acked_by(consumer):
            time.sleep(0.2)
    finally:
        consumer.close()
        for producer in producers:
            producer.close()
    views = stored(proxy, "k-topic")
    assert views, [event for p in producers for event in p.events][:20]
    bodies = collections.Counter(body_of(view) for view in views.values())
    assert max(bodies.values()) == 1, [body for body, n in bodies.items() if n > 1]  # none stored twice
    assert acked_sends <= set(views), "every acknowledged send is stored"
    missing = acked_sends - acked_by(consumer)
    if missing:  # what the store would deliver now, over HTTP: a stuck client, or messages pop no longer hands out
        again = proxy.http.post("/v1/groups/k-group/topics/k-topic/receive", json={"max_messages": 32, "wait_ms": 0})
        seen = {m: [e for e in consumer.events if m in json.dumps(e)] for m in missing}
        pytest.fail(f"{len(missing)} of {len(acked_sends)} never acked by the consumer: {seen}; HTTP: {again.text}")
    acked: set[str] = set()
    for event in consumer.events:  # in the order the consumer saw them
        if "acked" in event:
            acked.add(event["acked"])
        elif "received" in event:
            assert event["received"]["message_id"] not in acked, f"an acked message came again: {event}"
    failures = sum(1 for p in producers for event in p.events if "error" in event)
    acks_again = {event["ack_failed"] for event in consumer.events if "ack_failed" in event} & acked
    print(
        json.dumps(
            {
                "acked_sends": len(acked_sends),
                "failed_sends": failures,
                "stored": len(views),
                "acked_after_a_failed_ack": len(acks_again),
            }
        )
    )


def test_two_proxies_over_one_serverless_store_serve_one_client_and_end_each_others_transactions(request, tmp_path):
    """RIP-20's stateless proxy, and RocketMQ #9431: a half message sent through one proxy is committed through
    another, and a message received through one is acked through the other (raw calls: one client's requests, sent
    to whichever proxy)."""
    ports = {"a": free_port(), "b": free_port()}
    with restarted_gateway(request, tmp_path, "serverless", TIDEMQ_GRPC_PORT=str(ports["a"])) as first:
        shared = {k: v for k, v in first.env.items() if k.startswith(("TIDEMQ_", "AWS_")) and k != "TIDEMQ_PORT"}
        second = RestartedGateway(first.home, **{**shared, "TIDEMQ_GRPC_PORT": str(ports["b"])})
        second.start()
        try:
            admin = read_profile(first.home / "credentials")
            with signed_client(first.url, timeout=60) as http:
                a, b = (
                    Proxy(f"127.0.0.1:{ports[n]}", http, admin.access_key, admin.secret_key, first.home) for n in "ab"
                )
                topic = {"name": "s-tx", "queues": 2, "message_type": "TRANSACTION"}
                assert http.post("/v1/topics", json=topic).status_code == 201
                create(a, "s-plain", "s-group")
                half = message("s-tx", message_type=pb.TRANSACTION)
                (entry,) = call(a, "SendMessage", rpc.SendMessageRequest(messages=[half])).entries
                assert entry.status.code == pb.OK and entry.transaction_id == entry.message_id
                end = rpc.EndTransactionRequest(
                    topic=pb.Resource(name="s-tx"), transaction_id=entry.transaction_id, resolution=pb.COMMIT
                )
                assert call(b, "EndTransaction", end).status.code == pb.OK  # through the other proxy
                (committed,) = stored(a, "s-tx").values()
                assert (committed["msg_id"], body_of(committed)) == (entry.message_id, b"raw")

                assert (
                    call(a, "SendMessage", rpc.SendMessageRequest(messages=[message("s-plain")])).status.code == pb.OK
                )
                receive = rpc.ReceiveMessageRequest(
                    group=pb.Resource(name="s-group"),
                    message_queue=pb.MessageQueue(topic=pb.Resource(name="s-plain"), id=-1),
                    batch_size=1,
                    invisible_duration={"seconds": 60},
                    long_polling_timeout={"seconds": 5},
                )
                (got,) = [answer.message for answer in call(b, "ReceiveMessage", receive) if answer.HasField("message")]
                handle = got.system_properties.receipt_handle
                ack = rpc.AckMessageRequest(
                    group=pb.Resource(name="s-group"),
                    topic=pb.Resource(name="s-plain"),
                    entries=[rpc.AckMessageEntry(message_id=got.system_properties.message_id, receipt_handle=handle)],
                )
                assert call(a, "AckMessage", ack).entries[0].status.code == pb.OK
                assert call(b, "AckMessage", ack).entries[0].status.code == pb.OK  # once: acked already
        finally:
            second.stop()
