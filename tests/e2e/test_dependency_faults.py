"""A gateway whose DynamoDB or S3 fails outright (every call, through the fault injector, devtools/aws_faults.py),
whose disk is full, or that has more callers than it can serve: every route answers a 503 with Retry-After that
names what fails (never a 500: that is for bugs), `/health` says which service fails, and everything is served
again once the fault ends. Requests here are raw and signed, so that each answer is seen as the server gave it (the
SDK would retry it away)."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from devtools.aws_faults import Fault
from tests.gateways import gateway_as_admin, signed_http
from tests.small_disk import SmallDisk
from tidemq.credentials import Credentials
from tidemq.httpx_auth import signed_client
from tidemq_store.config import MIB
from tidemq_store.health import FREE_FRESH_S

pytestmark = pytest.mark.local_aws
HEALTH_BOUND_S = 10  # a liveness bound: /health answers, whatever DynamoDB does (its probe gives up after 1 s)


@pytest.fixture(scope="module")
def gateway(local_aws, fault_proxy, tmp_path_factory):
    """A serverless gateway with an S3 tier whose AWS is the session's moto server through the fault injector, a topic
    `t` with a message, a group `g` and a KV namespace `n`."""
    env = {
        **local_aws.env,
        **fault_proxy.env,
        "TIDEMQ_BACKEND": "serverless",
        "TIDEMQ_TIER": "s3",
        "TIDEMQ_TIER_BUCKET": f"dep-{uuid.uuid4().hex[:12]}",
    }
    fault_proxy.reset()
    with gateway_as_admin(tmp_path_factory.mktemp("dependency-faults") / "data", **env) as url:
        http = signed_http()
        for path, body in (("/v1/topics", {"name": "t", "queues": 2}), ("/v1/groups", {"name": "g"})):
            assert http.post(url + path, json=body).status_code == 201
        assert http.post(url + "/v1/kv", json={"name": "n"}).status_code == 201
        assert http.post(url + "/v1/topics/t/messages", json={"messages": [{"body": "first"}]}).status_code == 200
        yield url
    fault_proxy.reset()


ROUTES = [
    ("POST", "/v1/topics/t/messages", {"messages": [{"body": "x"}]}),  # produce
    ("GET", "/v1/topics/t/queues/0/messages?offset=0", None),  # consume
    ("POST", "/v1/groups/g/topics/t/receive", {"max_messages": 1}),  # pop
    ("POST", "/v1/groups/g/offsets", {"topic": "t", "offsets": {"0": 1}}),  # commit
    ("PUT", "/v1/kv/n/entry?key=k", {"value": "dg=="}),  # KV
    ("POST", "/v1/topics", {"name": "another", "queues": 1}),  # admin
]


def answers(url: str) -> list[httpx.Response]:
    http = signed_http()
    return [http.request(method, url + path, json=body, timeout=60) for method, path, body in ROUTES]


@pytest.mark.parametrize(
    "fault",
    [
        Fault("throttle", service="dynamodb"),
        Fault("error", service="dynamodb", status=503),
        Fault("reset_before", service="dynamodb"),
        Fault("reset_after", service="dynamodb"),
        Fault("cut", service="dynamodb"),
        pytest.param(Fault("conflict", service="dynamodb"), marks=pytest.mark.long),  # KV tries for ~16 s first
    ],
    ids=lambda fault: fault.kind + ("-503" if fault.status == 503 else ""),
)
def test_every_route_answers_503_with_retry_after_while_dynamodb_fails_and_serves_again_after(
    gateway, fault_proxy, fault
):
    fault_proxy.set(fault)
    try:
        failing = answers(gateway)
    finally:
        fault_proxy.clear()
    for (method, path, _), answer in zip(ROUTES, failing, strict=True):
        if fault.kind == "conflict" and method == "GET":
            assert answer.status_code == 200  # DynamoDB answers a conflict with a transaction to writes only
            continue
        assert answer.status_code == 503, (method, path, answer.status_code, answer.text)
        assert answer.headers.get("retry-after") == "1", (method, path, answer.text)
        error = answer.json()
        if error["error"] == "StoreUnavailable":  # a KV write whose transactions all met conflicts: too busy
            assert fault.kind == "conflict" and path.startswith("/v1/kv/"), error
        else:
            assert error["error"] == "DependencyUnavailable" and "dynamodb" in error["message"], error
    after = answers(gateway)
    assert [answer.status_code < 500 for answer in after] == [True] * len(ROUTES), [a.text for a in after]


CONSUMER_TIMEOUT_S = 20  # what a consumer waits for an answer; a DynamoDB call gives up within ~10 s (faults.py)


@pytest.mark.parametrize("wait_ms", [0, 2000], ids=["receive", "long-poll"])
def test_a_pop_receive_while_dynamodb_stalls_is_answered_503_before_its_consumer_gives_up_then_served(
    gateway, fault_proxy, wait_ms
):
    """DynamoDB accepts connections and does not answer (each call held 60 s): a receive is answered a 503 with
    Retry-After within a consumer's timeout, not left to time out and sent again behind itself (the receives that
    hung for ~100 s after the faults ended), and once DynamoDB answers again the next receive is served."""
    http, path = signed_http(), f"{gateway}/v1/groups/g/topics/t/receive?wait_ms={wait_ms}"
    fault_proxy.set(Fault("stall", service="dynamodb", seconds=60))
    try:
        stalled = http.post(path, json={"max_messages": 1}, timeout=CONSUMER_TIMEOUT_S)
    finally:
        fault_proxy.clear()
    assert stalled.status_code == 503 and stalled.headers.get("retry-after") == "1", stalled.text
    assert http.post(path, json={"max_messages": 1}, timeout=CONSUMER_TIMEOUT_S).status_code == 200


@pytest.mark.parametrize("fault", [Fault("throttle", service="dynamodb"), Fault("reset_after", service="dynamodb")])
def test_a_caller_the_gateway_has_not_looked_up_yet_gets_the_503_with_retry_after_too(gateway, fault_proxy, fault):
    """The caller's own lookup (authentication, before any route) meeting the fault answers as a route does: 503,
    `Retry-After`, DynamoDB named (a caller already looked up is served from the gateway's cache: a new user here)."""
    user = signed_http().post(gateway + "/v1/users", json={"name": f"late-{uuid.uuid4().hex[:8]}"}).json()
    late = signed_client(gateway, Credentials(user["name"], user["secret_key"]), timeout=60)
    fault_proxy.set(fault)
    try:
        answer = late.get("/v1/topics")
    finally:
        fault_proxy.clear()
    assert answer.status_code == 503, answer.text
    assert answer.headers.get("retry-after") == "1" and "dynamodb" in answer.json()["message"], answer.headers
    assert late.get("/v1/whoami").status_code == 200


@pytest.mark.parametrize(
    ("fault", "status", "dependency"),
    [
        (Fault("stall", service="dynamodb", seconds=30), "failing", "dynamodb"),
        (Fault("throttle", service="dynamodb"), "failing", "dynamodb"),
        (Fault("error", service="s3"), "degraded", "s3"),
        (Fault("reset_before", service="s3"), "degraded", "s3"),
    ],
    ids=["dynamodb-stalled", "dynamodb-throttled", "s3-failing", "s3-unreachable"],
)
def test_health_names_the_failing_service_and_is_ok_again_once_it_recovers(
    gateway, fault_proxy, fault, status, dependency
):
    fault_proxy.set(fault)
    try:
        time.sleep(2.1)  # past what an earlier probe's answer stood for
        started = time.monotonic()
        health = httpx.get(gateway + "/health", timeout=60)
        took = time.monotonic() - started
    finally:
        fault_proxy.clear()
    assert health.status_code == (503 if status == "failing" else 200)
    report = health.json()
    assert report["status"] == status and report["message"].startswith(f"{dependency}: ")
    assert [d["name"] for d in report["dependencies"] if d["status"] == "failing"] == [dependency]
    assert took < HEALTH_BOUND_S, took
    time.sleep(2.1)
    assert httpx.get(gateway + "/health", timeout=60).json()["status"] == "ok"


def test_a_full_disk_refuses_produce_saying_so_while_consumers_go_on_and_takes_writes_again_once_room_is_made(
    tmp_path,
):
    reserve = 16 * MIB
    settings = {"TIDEMQ_DISK_RESERVE_BYTES": str(reserve), "TIDEMQ_COMMITLOG_PREALLOCATE_BYTES": "0"}
    with SmallDisk(tmp_path / "disk", 96 * MIB) as disk, gateway_as_admin(disk.directory / "data", **settings) as url:
        http = signed_http()
        assert http.post(url + "/v1/topics", json={"name": "t", "queues": 1}).status_code == 201
        assert http.post(url + "/v1/groups", json={"name": "g"}).status_code == 201
        produce = {"messages": [{"body": "m"}]}
        assert http.post(url + "/v1/topics/t/messages", json=produce).status_code == 200

        disk.fill(reserve // 2)
        time.sleep(FREE_FRESH_S + 0.1)  # a disk filled by another process is seen within this
        refused = http.post(url + "/v1/topics/t/messages", json=produce)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert refused.json()["error"] == "DependencyUnavailable" and "disk" in refused.json()["message"]
        read = http.get(url + "/v1/topics/t/queues/0/messages", params={"offset": 0})
        assert [m["body"] for m in read.json()["messages"]] == ["m"]  # reads go on
        commit = http.post(url + "/v1/groups/g/offsets", json={"topic": "t", "offsets": {"0": 1}})
        assert commit.status_code == 200  # so do commits: the reserve is theirs
        time.sleep(2.1)
        health = httpx.get(url + "/health", timeout=60)
        assert health.status_code == 503 and health.json()["message"].startswith("disk: ")

        disk.empty()
        assert http.post(url + "/v1/topics/t/messages", json=produce).status_code == 200  # no restart
        time.sleep(2.1)
        assert httpx.get(url + "/health", timeout=60).json()["status"] == "ok"


def test_more_callers_than_the_gateway_serves_get_503s_at_once_not_timeouts_and_all_are_served_after(
    local_aws, fault_proxy, tmp_path
):
    """Two handler threads and room for two more waiting, each request held by a slow DynamoDB: of 30 at once, those
    past the queue are refused at once with Retry-After; none waits until it times out."""
    env = {**local_aws.env, **fault_proxy.env, "TIDEMQ_BACKEND": "serverless"}
    env |= {"TIDEMQ_GATEWAY_THREADS": "2", "TIDEMQ_GATEWAY_QUEUE": "2"}
    fault_proxy.reset()
    with gateway_as_admin(tmp_path / "data", **env) as url:
        http = signed_http()
        assert http.post(url + "/v1/topics", json={"name": "t", "queues": 1}).status_code == 201
        fault_proxy.set(Fault("delay", service="dynamodb", seconds=0.4))
        try:
            with ThreadPoolExecutor(30) as callers:
                produce = {"messages": [{"body": "m"}]}
                calls = [
                    callers.submit(http.post, url + "/v1/topics/t/messages", json=produce, timeout=60)
                    for _ in range(30)
                ]
                statuses = [call.result().status_code for call in calls]
                refused = [call.result() for call in calls if call.result().status_code == 503]
        finally:
            fault_proxy.reset()
        assert set(statuses) == {200, 503} and statuses.count(200) >= 4, statuses
        assert all(r.json()["error"] == "Overloaded" and r.headers["retry-after"] == "1" for r in refused)
        with ThreadPoolExecutor(4) as callers:  # the load gone, every request is served
            again = list(
                callers.map(lambda _: http.post(url + "/v1/topics/t/messages", json=produce).status_code, range(8))
            )
        assert again == [200] * 8
