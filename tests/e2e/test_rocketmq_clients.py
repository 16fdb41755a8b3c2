"""Apache RocketMQ 5's Python client, unmodified (tests/rocketmq_client.py drives it in processes of its own), against a
real gateway's gRPC proxy on both backends: what it sends is what the HTTP API shows, byte for byte; what it receives
is what was stored; and what it may not do it is refused with RocketMQ's codes. Raw calls (the proxy's own protobuf
modules, which coexist with the client's) check the codes of requests a client would not make."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import grpc
import httpx
import pytest

from servers.grpc_proxy.protocol import SERVICE
from servers.grpc_proxy.protocol import definition_pb2 as pb
from servers.grpc_proxy.protocol import service_pb2 as rpc
from servers.process import free_port
from tests.gateways import gateway_as_admin
from tidemq import HttpClient, SimpleConsumer
from tidemq.credentials import read_profile
from tidemq.httpx_auth import signed_client

CLIENT = Path(__file__).resolve().parent.parent / "rocketmq_client.py"
DEADLINE_S = 180


class Proxy(NamedTuple):
    endpoint: str
    http: httpx.Client
    access_key: str
    secret_key: str
    home: Path
    url: str | None = None  # the gateway's HTTP API (None: a container's, not used)


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def proxy(request, tmp_path_factory) -> Iterator[Proxy]:
    """A gateway per module and backend with its gRPC proxy on a free port; invisible times and polls from 1 s, so
    that redeliveries and empty polls do not take the defaults' 10 s and 5 s."""
    home = tmp_path_factory.mktemp(f"grpc-{request.param}") / "data"
    port = free_port()
    env = {
        "TIDEMQ_BACKEND": request.param,
        "TIDEMQ_GRPC_PORT": str(port),
        "TIDEMQ_POP_MIN_INVISIBLE_MS": "1000",
        "TIDEMQ_GRPC_MIN_LONG_POLLING_MS": "1000",
    }
    with gateway_as_admin(home, **env) as url, signed_client(url, timeout=60) as http:
        admin = read_profile(home / "credentials")
        yield Proxy(f"127.0.0.1:{port}", http, admin.access_key, admin.secret_key, home, url)


def run_client(proxy: Proxy, spec: dict, tmp_path: Path, **credentials: str) -> list[dict]:
    """Run the client with `spec` to its end; its events."""
    process = start_client(proxy, spec, tmp_path, **credentials)
    out, _ = process.communicate(timeout=DEADLINE_S)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def start_client(proxy: Proxy, spec: dict, tmp_path: Path, **credentials: str) -> subprocess.Popen:
    home = tmp_path / f"client-{time.monotonic_ns()}"
    home.mkdir()
    full = {
        "endpoint": proxy.endpoint,
        "access_key": credentials.get("access_key", proxy.access_key),
        "secret_key": credentials.get("secret_key", proxy.secret_key),
        **spec,
    }
    return subprocess.Popen(
        [sys.executable, str(CLIENT), json.dumps(full)],
        env={**os.environ, "HOME": str(home)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def client_log(tmp_path: Path) -> str:
    return "".join(path.read_text() for path in tmp_path.glob("client-*/logs/rocketmq_python/*.log"))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def stored(proxy: Proxy, topic: str) -> dict[str, dict]:
    """Every message of `topic` as the HTTP API shows it, by its id (the producer's: a RocketMQ client's id is the
    message's id, as RocketMQ has it)."""
    found = {}
    queues = proxy.http.get(f"/v1/topics/{topic}").json()["queues"]
    for queue in range(queues):
        page = proxy.http.get(f"/v1/topics/{topic}/queues/{queue}/messages", params={"max_messages": 1000}).json()
        for message in page["messages"]:
            assert "UNIQ_KEY" not in message["properties"]  # the record's, shown as the id
            found[message["msg_id"]] = message
    return found


def body_of(view: dict) -> bytes:
    return view["body"].encode() if view["body_encoding"] == "utf-8" else base64.b64decode(view["body"])


def create(proxy: Proxy, topic: str, group: str | None = None, **topic_fields) -> None:
    assert proxy.http.post("/v1/topics", json={"name": topic, "queues": 4, **topic_fields}).status_code == 201
    if group is not None:
        assert proxy.http.post("/v1/groups", json={"name": group}).status_code == 201


def send(proxy: Proxy, topic: str, messages: list[dict], tmp_path: Path) -> list[dict]:
    events = run_client(proxy, {"role": "producer", "topic": topic, "messages": messages}, tmp_path)
    assert all("sent" in event for event in events), events
    assert len(events) == len(messages)
    return events


BODIES = [b"plain text", bytes(range(256)), "ünïcødé".encode(), b"\x00\xff" * 1000]


def test_producer_sends_are_stored_byte_for_byte(proxy, tmp_path):
    create(proxy, "g-orders")
    messages = [
        {"body": b64(body), "tag": f"Tag{i}", "keys": [f"key-{i}", "k"], "properties": {"region": "eu", "n": str(i)}}
        for i, body in enumerate(BODIES)
    ]
    sent = send(proxy, "g-orders", messages, tmp_path)
    views = stored(proxy, "g-orders")
    assert sorted(views) == sorted(event["sent"] for event in sent)
    for message, event in zip(messages, sent, strict=True):
        view = views[event["sent"]]
        assert body_of(view) == base64.b64decode(message["body"])
        assert (view["tag"], sorted(view["keys"]), view["offset"]) == (
            message["tag"],
            sorted(message["keys"]),
            event["offset"],
        )
        assert view["properties"] | message["properties"] == view["properties"]


def test_what_a_rocketmq_client_sent_is_received_by_the_sdks_pop_consumer_with_its_id(proxy, tmp_path):
    create(proxy, "g-mixed", "g-mixed-pop")
    sent = send(proxy, "g-mixed", [{"body": b64(b"from rocketmq %d" % i)} for i in range(3)], tmp_path)
    with SimpleConsumer("g-mixed", "g-mixed-pop", client=HttpClient(proxy.url)) as consumer:
        received = consumer.receive(10)
        assert consumer.ack_all(received) == ["acked"] * 3
    assert sorted((r.message.msg_id, r.message.body) for r in received) == sorted(
        (event["sent"], b"from rocketmq %d" % i) for i, event in enumerate(sent)
    )


def test_fifo_messages_go_to_their_group_queue_in_send_order(proxy, tmp_path):
    create(proxy, "g-fifo", message_type="FIFO")
    messages = [{"body": b64(f"{group}-{i}".encode()), "group": group} for i in range(4) for group in "abc"]
    sent = send(proxy, "g-fifo", messages, tmp_path)
    views = stored(proxy, "g-fifo")
    for group in "abc":
        mine = [views[event["sent"]] for event, m in zip(sent, messages, strict=True) if m["group"] == group]
        assert len({view["queue"] for view in mine}) == 1, mine  # the proxy chose the queue by the group
        assert [view["message_group"] for view in mine] == [group] * 4
        assert [body_of(view) for view in sorted(mine, key=lambda v: v["offset"])] == [
            f"{group}-{i}".encode() for i in range(4)
        ]


def test_the_route_keeps_a_fifo_message_from_a_normal_topic(proxy, tmp_path):
    """The route says which message types a topic takes, and the client holds its sends to it (the proxy's own
    refusal, MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, is checked with raw calls below)."""
    create(proxy, "g-normal-only")
    spec = {"role": "producer", "topic": "g-normal-only", "messages": [{"body": b64(b"x"), "group": "a"}]}
    events = run_client(proxy, spec, tmp_path)
    assert [event.get("error") for event in events] == ["IllegalArgumentException"]
    assert "FIFO" in events[0]["message"] and stored(proxy, "g-normal-only") == {}


def test_simple_consumer_receives_acks_and_changes_invisible_time(proxy, tmp_path):
    create(proxy, "g-simple", "g-simple-group")
    bodies = [b64(b"ack me"), b64(b"change me"), b64(b"\x00 hold me")]
    sent = send(proxy, "g-simple", [{"body": body, "tag": "T"} for body in bodies], tmp_path)
    steps = [
        {"do": "receive", "want": 3, "invisible_s": 60},
        {"do": "ack", "body": bodies[0]},
        {"do": "change", "body": bodies[1], "invisible_s": 1},
        {"do": "await", "body": bodies[1], "invisible_s": 60},
        {"do": "ack", "body": bodies[1]},
    ]
    spec = {"role": "simple", "topic": "g-simple", "group": "g-simple-group", "steps": steps}
    events = run_client(proxy, spec, tmp_path)
    assert not [event for event in events if "error" in event], events
    received = [event["received"] for event in events if "received" in event]
    views = stored(proxy, "g-simple")
    for delivery in received:  # what the client got is what the HTTP API shows
        view = views[delivery["message_id"]]
        assert (base64.b64decode(delivery["body"]), delivery["tag"]) == (body_of(view), view["tag"])
    first, again = received[:3], received[3:]
    assert sorted(d["body"] for d in first) == sorted(bodies) and {d["attempt"] for d in first} == {1}
    assert {d["message_id"] for d in first} == {event["sent"] for event in sent}
    assert [(d["body"], d["attempt"]) for d in again] == [(bodies[1], 2)]  # back after its changed invisible time
    assert [event.get("acked") for event in events if "acked" in event] == [bodies[0], bodies[1]]


def test_tag_filter_delivers_only_the_tags_asked_for(proxy, tmp_path):
    create(proxy, "g-tags", "g-tags-group")
    messages = [{"body": b64(f"{tag}{i}".encode()), "tag": tag} for i in range(3) for tag in ("A", "B", "C")]
    send(proxy, "g-tags", messages, tmp_path)
    wanted = sorted(m["body"] for m in messages if m["tag"] in ("A", "C"))
    steps = [{"do": "receive", "want": len(wanted), "invisible_s": 60}]
    spec = {"role": "simple", "topic": "g-tags", "group": "g-tags-group", "tag": "A||C", "steps": steps}
    received = [event["received"] for event in run_client(proxy, spec, tmp_path) if "received" in event]
    assert sorted(d["body"] for d in received) == wanted
    assert {d["tag"] for d in received} == {"A", "C"}


def test_sql92_filter_delivers_only_the_messages_it_selects(proxy, tmp_path):
    create(proxy, "g-sql", "g-sql-group")
    messages = [
        {"body": b64(f"m{i}".encode()), "properties": {"amount": str(i), "region": f"r{i % 3}"}} for i in range(9)
    ]
    send(proxy, "g-sql", messages, tmp_path)
    wanted = [f"m{i}" for i in range(9) if i > 2 and i % 3 == 1]  # amount > 2 AND region = 'r1': m4 m7
    steps = [{"do": "receive", "want": len(wanted), "invisible_s": 60}]
    spec = {"role": "simple", "topic": "g-sql", "group": "g-sql-group", "sql": "amount > 2 AND region = 'r1'"}
    received = [
        event["received"] for event in run_client(proxy, spec | {"steps": steps}, tmp_path) if "received" in event
    ]
    assert sorted(d["body"] for d in received) == sorted(b64(body.encode()) for body in wanted)


def test_push_consumer_retries_a_failing_message_then_it_goes_to_the_dead_letters(proxy, tmp_path):
    create(proxy, "g-push")
    policy = {"max_delivery_attempts": 3, "backoff": {"kind": "customized", "delays_ms": [1000]}}
    assert proxy.http.post("/v1/groups", json={"name": "g-push-group", "retry": policy}).status_code == 201
    poison, fine = b"\x01 poison", [f"fine {i}".encode() for i in range(5)]
    sent = send(proxy, "g-push", [{"body": b64(body)} for body in [poison, *fine]], tmp_path)
    client = start_client(
        proxy, {"role": "push", "topic": "g-push", "group": "g-push-group", "fail": [b64(poison)]}, tmp_path
    )
    try:
        letters = wait_for_dead_letters(proxy, "g-push-group")
    finally:
        out, _ = client.communicate(timeout=DEADLINE_S)  # closes its stdin: the consumer shuts down
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    calls = [event for event in events if "consumed" in event]
    poisoned = [event["consumed"]["attempt"] for event in calls if event["consumed"]["body"] == b64(poison)]
    assert poisoned == [1, 2, 3]  # every delivery the group's policy allows, then the dead letters
    assert {event["consumed"]["body"] for event in calls if event["result"] == "SUCCESS"} == {b64(b) for b in fine}
    (letter,) = letters
    assert body_of(letter) == poison
    assert letter["properties"]["RETRY_TOPIC"] == "g-push"
    assert letter["properties"]["ORIGIN_MESSAGE_ID"] == sent[0]["sent"]


def test_a_message_consumed_by_a_rocketmq_push_consumer_until_dead_lettered_shows_it_all_in_its_trace(proxy, tmp_path):
    """The broker traces what the proxy does for a client that knows nothing of it (functions/logic/trace.py). Sent
    over HTTP: a message a RocketMQ client sent has the id the client gave it, which lookups by id (and so traces)
    do not resolve (docs/trace.md)."""
    create(proxy, "g-traced")
    policy = {"max_delivery_attempts": 2, "backoff": {"kind": "customized", "delays_ms": [1000]}}
    assert proxy.http.post("/v1/groups", json={"name": "g-traced-group", "retry": policy}).status_code == 201
    bodies = [b64(b"\x01 poison"), b64(b"fine")]
    sent = {"messages": [{"body": body, "body_encoding": "base64", "queue": 0} for body in bodies]}
    poison, fine = proxy.http.post("/v1/topics/g-traced/messages", json=sent).json()["messages"]
    client = start_client(
        proxy, {"role": "push", "topic": "g-traced", "group": "g-traced-group", "fail": bodies[:1]}, tmp_path
    )
    try:
        (letter,) = wait_for_dead_letters(proxy, "g-traced-group")
        events = trace_of(proxy, poison["msg_id"], last="dead_lettered")
        fine_events = [event["event"] for event in trace_of(proxy, fine["msg_id"], last="acked")]
    finally:
        client.communicate(timeout=DEADLINE_S)  # closes its stdin: the consumer shuts down
    kinds = [event["event"] for event in events]
    recorded = [kind for kind in kinds if kind != "invisible_changed"]
    assert recorded == ["stored", "delivered", "retried", "dead_lettered"]
    assert kinds.count("invisible_changed") <= 2  # each failure handed back with its backoff, while its hold lasted
    handled = [event["attributes"] for event in events[1:]]
    assert {attributes["messaging.consumer.group.name"] for attributes in handled} == {"g-traced-group"}
    attempts = [a["tidemq.delivery.attempt"] for a in handled if a["messaging.operation.type"] == "receive"]
    assert attempts == [1, 2] and handled[-1]["tidemq.dead_letter.message.id"] == letter["msg_id"]
    assert fine_events[:2] == ["stored", "delivered"] and fine_events[-1] == "acked"


def trace_of(proxy: Proxy, msg_id: str, last: str) -> list[dict]:
    """The message's trace through the HTTP API, once its `last` event is recorded."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = proxy.http.get(f"/v1/messages/{msg_id}/trace")
        assert answer.status_code == 200, answer.text
        events = answer.json()["events"]
        if (events and events[-1]["event"] == last) or time.monotonic() > deadline:
            return events
        time.sleep(0.2)


def wait_for_dead_letters(proxy: Proxy, group: str) -> list[dict]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        letters = proxy.http.get(f"/v1/groups/{group}/dead-letters").json()["messages"]
        if letters:
            return letters
        time.sleep(0.5)
    raise AssertionError(f"no dead letter of {group} in {DEADLINE_S} s")


def test_delay_messages_come_when_due_and_a_recalled_one_never(proxy, tmp_path):
    create(proxy, "g-delay", "g-delay-group", message_type="DELAY")
    later, never = b"due in 2 s", b"recalled before it is due"
    messages = [{"body": b64(later), "delay_s": 2}, {"body": b64(never), "delay_s": 600, "recall": True}]
    events = run_client(proxy, {"role": "producer", "topic": "g-delay", "messages": messages}, tmp_path)
    sent = [event for event in events if "sent" in event]
    assert len(sent) == 2 and all(event["recall_handle"] for event in sent), events
    assert [event["recalled"] for event in events if "recalled" in event] == [sent[1]["sent"]]
    steps = [{"do": "receive", "want": 1, "invisible_s": 60}]
    spec = {"role": "simple", "topic": "g-delay", "group": "g-delay-group", "steps": steps}
    (delivery,) = [event["received"] for event in run_client(proxy, spec, tmp_path) if "received" in event]
    assert (delivery["body"], delivery["message_id"]) == (b64(later), sent[0]["sent"])  # the id its send answered
    (view,) = stored(proxy, "g-delay").values()  # the recalled one is nowhere
    assert body_of(view) == later and view["msg_id"] == sent[0]["sent"]
    assert delivery["delivery_timestamp"] <= view["store_timestamp"]  # put on its queue when due, not before
    again = proxy.http.post("/v1/topics/g-delay/recall", json={"recall_handle": sent[1]["recall_handle"]})
    assert again.json()["status"] == "already_recalled"


def test_transactions_commit_roll_back_and_the_servers_check_is_answered_by_the_clients_checker(proxy, tmp_path):
    create(proxy, "g-tx", message_type="TRANSACTION")
    commit, rollback, unknown = b"commit me", b"roll me back", b"left to the check"
    messages = [
        {"body": b64(commit), "transaction": "commit"},
        {"body": b64(rollback), "transaction": "rollback"},
        {"body": b64(unknown), "transaction": "none"},
    ]
    answers = {b64(commit): "COMMIT", b64(rollback): "ROLLBACK", b64(unknown): "COMMIT"}
    spec = {"role": "producer", "topic": "g-tx", "messages": messages, "checker": answers, "await_checks": 1}
    events = run_client(proxy, spec, tmp_path)
    assert not [event for event in events if "error" in event], events
    sent = [event for event in events if "sent" in event]
    assert all(event["transaction_id"] == event["sent"] for event in sent)
    assert b64(unknown) in [event["checked"] for event in events if "checked" in event]
    outcomes = {}
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:  # the checker's answer is on its way when the client ends
        outcomes = {
            event["sent"]: proxy.http.get(f"/v1/topics/g-tx/transactions/{event['sent']}").json()["state"]
            for event in sent
        }
        if "prepared" not in outcomes.values():
            break
        time.sleep(0.2)
    assert list(outcomes.values()) == ["committed", "rolled_back", "committed"]
    views = stored(proxy, "g-tx")
    assert {body_of(view) for view in views.values()} == {commit, unknown}
    assert set(views) == {sent[0]["sent"], sent[2]["sent"]}  # committed with the id the send answered


def test_fifo_order_per_message_group_holds_with_four_push_consumers(proxy, tmp_path):
    create(proxy, "g-fifo-push", message_type="FIFO")
    assert proxy.http.post("/v1/groups", json={"name": "g-fifo-push-group", "fifo": True}).status_code == 201
    groups, per_group = [f"order-{i}" for i in range(8)], 6
    messages = [{"body": b64(f"{group}/{n}".encode()), "group": group} for n in range(per_group) for group in groups]
    spec = {"role": "push", "topic": "g-fifo-push", "group": "g-fifo-push-group"}
    consumers = [EventReader(start_client(proxy, spec, tmp_path)) for _ in range(4)]
    try:
        wait_until(lambda: all(c.started() for c in consumers), "the four consumers started")
        send(proxy, "g-fifo-push", messages, tmp_path)
        wait_until(lambda: sum(len(c.consumed()) for c in consumers) >= len(messages), "every message consumed")
    finally:
        for consumer in consumers:
            consumer.close()
    calls = sorted((event for c in consumers for event in c.consumed()), key=lambda event: event["consumed"]["at"])
    assert len(calls) == len(messages), "each message consumed once"
    for group in groups:
        bodies = [base64.b64decode(e["consumed"]["body"]).decode() for e in calls if e["consumed"]["group"] == group]
        assert bodies == [f"{group}/{n}" for n in range(per_group)]  # in send order, whichever consumer took each


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not in {DEADLINE_S} s: {what}"
        time.sleep(0.2)


class EventReader:
    """A client process whose events are read as they come (on a thread), until `close` ends it."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self.events = process, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def started(self) -> bool:
        return any("started" in event for event in list(self.events))

    def consumed(self) -> list[dict]:
        return [event for event in list(self.events) if "consumed" in event]

    def close(self) -> None:
        self.process.stdin.close()  # the consumer shuts down
        self.process.wait(timeout=DEADLINE_S)
        self.reader.join(timeout=DEADLINE_S)


# ---- refusals -------------------------------------------------------------------------------------------------


def test_a_user_without_pub_is_refused_forbidden(proxy, tmp_path):
    create(proxy, "g-guarded")
    user = proxy.http.post("/v1/users", json={"name": "g-reader"}).json()
    grant = {"resource": "Topic:g-guarded", "actions": ["Sub", "Get"], "decision": "Allow"}
    assert proxy.http.post("/v1/users/g-reader/acl", json=grant).status_code == 200
    spec = {"role": "producer", "topic": "g-guarded", "messages": [{"body": b64(b"x")}]}
    events = run_client(proxy, spec, tmp_path, access_key="g-reader", secret_key=user["secret_key"])
    assert [(event.get("error"), event.get("code")) for event in events] == [("ForbiddenException", pb.FORBIDDEN)]


@pytest.mark.parametrize("who", ["wrong secret", "unknown key"])
def test_bad_credentials_are_refused_unauthorized(proxy, tmp_path, who):
    create(proxy, f"g-locked-{who[0]}")
    credentials = {"secret_key": "not-the-secret"} if who == "wrong secret" else {"access_key": "nobody-here"}
    spec = {"role": "producer", "topic": f"g-locked-{who[0]}", "messages": [{"body": b64(b"x")}]}
    events = run_client(proxy, spec, tmp_path, **credentials)
    assert [event.get("sent") for event in events] == [None]  # the send fails: no route for an unauthorized client
    assert f"{pb.UNAUTHORIZED}" in client_log(tmp_path)  # the client's own log names RocketMQ's code
    assert call(proxy, "QueryRoute", route_request(f"g-locked-{who[0]}"), **credentials).status.code == pb.UNAUTHORIZED


# ---- raw calls: the codes of requests the client would not make ---------------------------------------------------


def signed(proxy: Proxy, access_key: str | None = None, secret_key: str | None = None) -> list[tuple[str, str]]:
    """Headers as a RocketMQ 5 client signs them (here in UTC, as the Node.js client does)."""
    date = datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    key, secret = access_key or proxy.access_key, secret_key or proxy.secret_key
    signature = hmac.new(secret.encode(), date.encode(), hashlib.sha1).hexdigest().upper()
    authorization = f"MQv2-HMAC-SHA1 Credential={key}, SignedHeaders=x-mq-date-time, Signature={signature}"
    return [("x-mq-date-time", date), ("x-mq-client-id", "raw-test"), ("authorization", authorization)]


def call(proxy: Proxy, method: str, request, timeout: float = 30, **credentials: str):
    """One raw call of a unary method (a streaming one: its responses as a list)."""
    response = getattr(rpc, f"{method}Response")
    path = f"/{SERVICE}/{method}"
    with grpc.insecure_channel(proxy.endpoint) as channel:
        streaming = method in ("ReceiveMessage", "PullMessage")
        make = channel.unary_stream if streaming else channel.unary_unary
        stub = make(path, request_serializer=type(request).SerializeToString, response_deserializer=response.FromString)
        answer = stub(request, metadata=signed(proxy, **credentials), timeout=timeout)
        return list(answer) if streaming else answer


def route_request(topic: str) -> rpc.QueryRouteRequest:
    return rpc.QueryRouteRequest(topic=pb.Resource(name=topic))


def message(topic: str, **system) -> pb.Message:
    properties = pb.SystemProperties(**{"message_id": "raw-1", "message_type": pb.NORMAL, **system})
    return pb.Message(topic=pb.Resource(name=topic), system_properties=properties, body=b"raw")


def test_bad_requests_answer_rocketmq_codes_and_change_nothing(proxy):
    create(proxy, "g-raw", "g-raw-group")
    group, topic = pb.Resource(name="g-raw-group"), pb.Resource(name="g-raw")
    queue = pb.MessageQueue(topic=topic, id=-1)

    def send_code(m: pb.Message) -> int:
        return call(proxy, "SendMessage", rpc.SendMessageRequest(messages=[m])).status.code

    def receive_code(**fields) -> int:
        request = rpc.ReceiveMessageRequest(group=group, message_queue=queue, batch_size=1, **fields)
        return call(proxy, "ReceiveMessage", request)[0].status.code

    assert call(proxy, "QueryRoute", route_request("bad name!")).status.code == pb.ILLEGAL_TOPIC
    assert call(proxy, "QueryRoute", route_request("g-no-such-topic")).status.code == pb.TOPIC_NOT_FOUND
    assert send_code(message("g-raw", message_group="a")) == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    unique = message("g-raw")
    unique.user_properties["UNIQ_KEY"] = "mine"
    assert send_code(unique) == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    due = message("g-raw")
    due.user_properties["TIMER_DELAY_MS"] = "1000"  # a delay is delivery_timestamp's, not a user property's
    assert send_code(due) == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
    empty = message("g-raw")
    empty.body = b""
    assert send_code(empty) == pb.MESSAGE_BODY_EMPTY
    assert send_code(message("g-raw", message_id="")) == pb.ILLEGAL_MESSAGE_ID
    assert send_code(message("g-raw", tag="a||b")) == pb.ILLEGAL_MESSAGE_TAG
    assert send_code(message("g-no-such-topic")) == pb.TOPIC_NOT_FOUND
    assert receive_code(filter_expression=pb.FilterExpression(type=pb.TAG, expression="a||")) == (
        pb.ILLEGAL_FILTER_EXPRESSION
    )
    assert receive_code(filter_expression=pb.FilterExpression(type=pb.SQL, expression="amount >")) == (
        pb.ILLEGAL_FILTER_EXPRESSION
    )
    assert receive_code(invisible_duration={"seconds": 0, "nanos": 1_000_000}) == pb.ILLEGAL_INVISIBLE_TIME
    nobody = rpc.ReceiveMessageRequest(group=pb.Resource(name="g-no-such-group"), message_queue=queue, batch_size=1)
    assert call(proxy, "ReceiveMessage", nobody)[0].status.code == pb.CONSUMER_GROUP_NOT_FOUND
    short = rpc.ReceiveMessageRequest(group=group, message_queue=queue, batch_size=1)
    assert call(proxy, "ReceiveMessage", short, timeout=1.2)[0].status.code == pb.ILLEGAL_POLLING_TIME
    ack = rpc.AckMessageRequest(group=group, topic=topic, entries=[rpc.AckMessageEntry(receipt_handle="forged")])
    assert call(proxy, "AckMessage", ack).status.code == pb.INVALID_RECEIPT_HANDLE
    change = rpc.ChangeInvisibleDurationRequest(group=group, topic=topic, receipt_handle="forged")
    change.invisible_duration.seconds = 10
    assert call(proxy, "ChangeInvisibleDuration", change).status.code == pb.INVALID_RECEIPT_HANDLE
    for transaction_id in ("t", "0" * 24):  # not an id; no transaction's
        ended = rpc.EndTransactionRequest(topic=topic, message_id="raw-1", transaction_id=transaction_id)
        assert call(proxy, "EndTransaction", ended).status.code == pb.INVALID_TRANSACTION_ID
    recall = rpc.RecallMessageRequest(topic=topic, recall_handle="forged")
    assert call(proxy, "RecallMessage", recall).status.code == pb.NOT_FOUND
    assert stored(proxy, "g-raw") == {}  # nothing of it was stored


def test_a_send_again_with_its_message_id_answers_as_the_first_and_is_stored_once(proxy):
    """A client's resend (the same message id: the Python client resends at once, up to three times) is answered with
    the first send's offset and stored once; the id with another body is refused ILLEGAL_MESSAGE_ID."""
    create(proxy, "g-resend")
    first, again = (call(proxy, "SendMessage", rpc.SendMessageRequest(messages=[message("g-resend")])) for _ in "12")
    assert (first.status.code, again.status.code) == (pb.OK, pb.OK)
    assert [(e.message_id, e.offset) for e in again.entries] == [(e.message_id, e.offset) for e in first.entries]
    other = message("g-resend")
    other.body = b"another"
    assert call(proxy, "SendMessage", rpc.SendMessageRequest(messages=[other])).status.code == pb.ILLEGAL_MESSAGE_ID
    assert [body_of(view) for view in stored(proxy, "g-resend").values()] == [b"raw"]


def test_a_delay_message_sent_again_with_its_message_id_is_kept_once_and_delivered_once(proxy):
    """A message due later resent with its id answers the first send's timer (its id, recall handle, offset -1), and
    is delivered once when due; the id with another body is refused ILLEGAL_MESSAGE_ID."""
    create(proxy, "g-resend-later", message_type="DELAY")
    later = message("g-resend-later", message_type=pb.DELAY)
    later.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 2000)
    first, again = (call(proxy, "SendMessage", rpc.SendMessageRequest(messages=[later])) for _ in "12")
    assert (first.status.code, again.status.code) == (pb.OK, pb.OK)
    assert list(again.entries) == list(first.entries) and first.entries[0].recall_handle
    other = rpc.SendMessageRequest(messages=[later])
    other.messages[0].body = b"another"
    assert call(proxy, "SendMessage", other).status.code == pb.ILLEGAL_MESSAGE_ID
    wait_until(lambda: stored(proxy, "g-resend-later") != {}, "the delay message delivered")
    assert [body_of(view) for view in stored(proxy, "g-resend-later").values()] == [b"raw"]


def test_a_half_message_sent_again_with_its_message_id_answers_its_transaction(proxy):
    """A half message resent with its id answers the first's transaction and prepares nothing more; the id with
    another body is refused ILLEGAL_MESSAGE_ID."""
    create(proxy, "g-resend-tx", message_type="TRANSACTION")
    half = message("g-resend-tx", message_type=pb.TRANSACTION)
    first, again = (call(proxy, "SendMessage", rpc.SendMessageRequest(messages=[half])) for _ in "12")
    assert (first.status.code, again.status.code) == (pb.OK, pb.OK)
    assert list(again.entries) == list(first.entries) and first.entries[0].transaction_id
    other = rpc.SendMessageRequest(messages=[half])
    other.messages[0].body = b"another"
    assert call(proxy, "SendMessage", other).status.code == pb.ILLEGAL_MESSAGE_ID
    listed = proxy.http.get("/v1/topics/g-resend-tx/transactions").json()["transactions"]
    assert [t["msg_id"] for t in listed] == [first.entries[0].transaction_id]


def test_a_received_message_is_acked_once_and_its_old_handle_is_refused(proxy):
    """Raw, so that the handles can be kept: a change of invisible time spends the handle it was given."""
    create(proxy, "g-handles", "g-handles-group")
    group, topic = pb.Resource(name="g-handles-group"), pb.Resource(name="g-handles")
    assert call(proxy, "SendMessage", rpc.SendMessageRequest(messages=[message("g-handles")])).status.code == pb.OK
    request = rpc.ReceiveMessageRequest(
        group=group,
        message_queue=pb.MessageQueue(topic=topic, id=-1),
        batch_size=1,
        long_polling_timeout={"seconds": 5},
    )
    request.invisible_duration.seconds = 60
    answers = call(proxy, "ReceiveMessage", request)
    assert [answer.WhichOneof("content") for answer in answers] == ["status", "message", "delivery_timestamp"]
    received = answers[1].message
    assert received.body == b"raw" and received.system_properties.message_id == "raw-1"
    assert received.system_properties.body_digest.checksum == hashlib.md5(b"raw").hexdigest().upper()
    old = received.system_properties.receipt_handle
    change = rpc.ChangeInvisibleDurationRequest(group=group, topic=topic, receipt_handle=old)
    change.invisible_duration.seconds = 60
    new = call(proxy, "ChangeInvisibleDuration", change).receipt_handle
    assert new and new != old

    def ack(handle: str) -> int:
        entry = rpc.AckMessageEntry(message_id="raw-1", receipt_handle=handle)
        return call(proxy, "AckMessage", rpc.AckMessageRequest(group=group, topic=topic, entries=[entry])).status.code

    assert ack(old) == pb.INVALID_RECEIPT_HANDLE
    assert ack(new) == pb.OK


def test_the_cli_snippet_runs_as_pasted(proxy, tmp_path):
    """`tidemq grpc endpoint` prints a client program that works against the proxy as it is."""
    create(proxy, "orders", "billing")
    port = proxy.endpoint.rpartition(":")[2]
    environment = {
        **os.environ,
        "TIDEMQ_URL": str(proxy.http.base_url).rstrip("/"),
        "TIDEMQ_CREDENTIALS_FILE": str(proxy.home / "credentials"),
        "HOME": str(tmp_path),
    }
    tidemq = Path(sys.executable).with_name("tidemq")
    printed = subprocess.run(
        [str(tidemq), "grpc", "endpoint", "--port", port, "--show-secret"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed.startswith(f"# RocketMQ 5 gRPC endpoint: {proxy.endpoint}")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(printed)
    ran = subprocess.run(
        [sys.executable, str(snippet)], env=environment, capture_output=True, text=True, timeout=DEADLINE_S
    )
    assert ran.returncode == 0, ran.stderr
    message_id, body = ran.stdout.split()
    assert body == "b'hello'" and stored(proxy, "orders")[message_id]["body"] == "hello"


def test_a_setting_turns_the_proxy_off(tmp_path):
    port = free_port()
    with gateway_as_admin(tmp_path / "data", TIDEMQ_GRPC_PORT=str(port), TIDEMQ_GRPC_ENABLED="false"):
        log = (tmp_path / "data" / "gateway.log").read_text()
        assert "gRPC proxy" not in log
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(channel).result(timeout=2)
