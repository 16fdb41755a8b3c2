"""Every route at once, from many threads, through a real gateway process: the gateway runs the handlers in
worker threads, so whatever state a request leaves on a function's resolver must be that request's alone.

Each thread works on its own topics and groups, so each response can be checked against its own request: a
produce's offsets start at 0 on a fresh topic, a describe names its own topic, a consume returns its own bodies,
a message fetched by id is the one produced, a 404 names what was asked for. Every route of the route table is
hit, and none answers 5xx.

Listings are raced against deletes on their own (tests/listing_race.py), on a gateway whose threads switch often
(racing_gateway.py): a page of topics, groups, users or KV namespaces never fails because entries vanish under it.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from functions.api.resolver import new_resolver
from functions.routes import routes
from servers.stream import stream_routes
from tidemq.auth import find_credentials
from tidemq.httpx_auth import signed_client
from tidemq_protocol import codec, stream
from tidemq_protocol.message import Message

from ..gateways import gateway_as_admin
from ..listing_race import Entries, race_listings

THREADS = 10
DURATION_S = 10.0  # per backend; the gateway fixture runs the embedded and the serverless one
ACCEPT = "python:tests.push_targets:accept"
RACING_GATEWAY = Path(__file__).with_name("racing_gateway.py")


class Caller:
    """One thread's HTTP client: records which route each request went to, and fails on an unexpected status
    (with the response in the message)."""

    def __init__(self, url: str, hit: set[str]) -> None:
        self.client = signed_client(url, timeout=30)
        self.hit = hit

    def __call__(
        self, method: str, route: str, status: int = 200, path: dict | None = None, **kwargs
    ) -> httpx.Response:
        self.hit.add(f"{method} {route}")
        response = self.client.request(method, route.format(**(path or {})), **kwargs)
        assert response.status_code == status, f"{method} {response.url}: {response.status_code} {response.text}"
        return response


def first_frame(call: Caller, route: str, path: dict) -> bytes:
    """The first frame's batch of a stream opened at offset 0 (the stream closed after it)."""
    call.hit.add(f"GET {route}")
    with call.client.stream("GET", route.format(**path), params={"offset": 0}) as response:
        assert response.status_code == 200, f"{response.url}: {response.status_code} {response.read()}"
        data = b""
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "little"):
                break
    return stream.read_frame(io.BytesIO(data).read)


def one_round(call: Caller, name: str) -> None:
    """Create a topic and a group named `name`, use every route on them, check each answer, delete them."""
    topic, group, key = name, f"{name}-group", f"{name}-key"
    at_topic, at_group = {"topic": topic}, {"group": group}

    assert call("POST", "/v1/topics", 201, json={"name": topic, "queues": 2}).json()["name"] == topic
    described = call("GET", "/v1/topics/{topic}", path=at_topic).json()
    assert described["name"] == topic and len(described["queue_offsets"]) == 2
    changed = call("PATCH", "/v1/topics/{topic}", path=at_topic, json={"attributes": {"owner": name}}).json()
    assert (changed["name"], changed["attributes"]) == (topic, {"owner": name})
    assert topic in {t["name"] for t in call("GET", "/v1/topics", params={"limit": 1000}).json()["topics"]}

    # produce: JSON to queue 0, binary to queue 1; a fresh topic's offsets start at 0
    bodies = [f"{name}-json-{n}" for n in range(3)]
    sent = {"messages": [{"body": body, "keys": [key], "queue": 0} for body in bodies]}
    produced = call("POST", "/v1/topics/{topic}/messages", path=at_topic, json=sent).json()["messages"]
    assert [(m["queue"], m["offset"]) for m in produced] == [(0, 0), (0, 1), (0, 2)]
    binary_bodies = [f"{name}-binary-{n}".encode() for n in range(2)]
    batch = codec.encode_produce((Message(body, queue=1), None) for body in binary_bodies)
    lines = call(
        "POST", "/v1/topics/{topic}/batch", path=at_topic, content=batch, headers={"content-type": codec.CONTENT_TYPE}
    ).text.splitlines()
    assert [line.split()[1:] for line in lines] == [["1", "0"], ["1", "1"]]  # msg_id queue offset

    # a delay message sent for later, on a DELAY topic of the round's own: recalled by its handle, once and again
    at_later = {"topic": f"{name}-later"}
    call("POST", "/v1/topics", 201, json={"name": at_later["topic"], "queues": 1, "message_type": "DELAY"})
    later = {"messages": [{"body": f"{name}-later", "delay_ms": 3_600_000}]}
    (timer,) = call("POST", "/v1/topics/{topic}/messages", path=at_later, json=later).json()["messages"]
    assert timer["offset"] == -1
    recall = {"recall_handle": timer["recall_handle"]}
    recalled = call("POST", "/v1/topics/{topic}/recall", path=at_later, json=recall).json()
    assert (recalled["msg_id"], recalled["status"]) == (timer["msg_id"], "recalled")
    again = call("POST", "/v1/topics/{topic}/recall", path=at_later, json=recall).json()
    assert (again["msg_id"], again["status"]) == (timer["msg_id"], "already_recalled")
    call("DELETE", "/v1/topics/{topic}", 204, path=at_later)

    # consume both ways, and the queries
    read = call("GET", "/v1/topics/{topic}/queues/{queue}/messages", path={**at_topic, "queue": 0}).json()
    assert [(m["topic"], m["body"]) for m in read["messages"]] == [(topic, body) for body in bodies]
    assert read["next_offset"] == 3
    response = call("GET", "/v1/topics/{topic}/queues/{queue}/batch", path={**at_topic, "queue": 1})
    messages, next_offset, _, _ = codec.decode_consume(response.content)
    assert [(m.topic, m.body) for m in messages] == [(topic, body) for body in binary_bodies] and next_offset == 2
    streamed = first_frame(call, "/v1/topics/{topic}/queues/{queue}/stream", path={**at_topic, "queue": 1})
    assert streamed == response.content  # the stream's first frame: the same batch, read now
    fetched = call("GET", "/v1/messages/{msg_id}", path={"msg_id": produced[1]["msg_id"]}).json()
    assert (fetched["msg_id"], fetched["topic"], fetched["body"]) == (produced[1]["msg_id"], topic, bodies[1])
    traced = call("GET", "/v1/messages/{msg_id}/trace", path={"msg_id": produced[1]["msg_id"]}).json()
    assert (traced["topic"], traced["events"][0]["event"]) == (topic, "stored")
    by_key = call("GET", "/v1/topics/{topic}/messages", path=at_topic, params={"key": key}).json()["messages"]
    assert sorted(m["body"] for m in by_key) == bodies and {m["topic"] for m in by_key} == {topic}
    offset = call(
        "GET", "/v1/topics/{topic}/queues/{queue}/offset", path={**at_topic, "queue": 1}, params={"timestamp": 0}
    ).json()
    assert (offset["topic"], offset["queue"], offset["offset"]) == (topic, 1, 0)
    assert call("GET", "/v1/topics/{topic}/tier", path=at_topic).json()["topic"] == topic
    assert call("POST", "/v1/topics/{topic}/tier/upload", path=at_topic).json()["topic"] == topic

    # the group: commit, lag, reset, push
    assert call("POST", "/v1/groups", 201, json={"name": group}).json()["name"] == group
    assert group in {g["name"] for g in call("GET", "/v1/groups", params={"limit": 1000}).json()["groups"]}
    committed = call("POST", "/v1/groups/{group}/offsets", path=at_group, json={"topic": topic, "offsets": {0: 2}})
    assert committed.json() == {"group": group, "topic": topic, "offsets": {"0": 2}}
    lagging = call("GET", "/v1/groups/{group}", path=at_group, params={"topic": topic}).json()
    assert (lagging["name"], [t["topic"] for t in lagging["topics"]], lagging["lag"]) == (group, [topic], 1 + 2)
    reset = call("POST", "/v1/groups/{group}/reset", path=at_group, json={"topic": topic, "to": "latest"}).json()
    assert reset == {"group": group, "topic": topic, "offsets": {"0": 3, "1": 2}}
    # pop: the group receives this round's own messages, each once; ack, change and release answer for their own
    at_pop, pop = {**at_topic, **at_group}, "/v1/groups/{group}/topics/{topic}"
    popped = call("POST", f"{pop}/receive", path=at_pop, json={"max_messages": 32}).json()["messages"]
    assert sorted(m["body"] for m in popped) == sorted([*bodies, *(b.decode() for b in binary_bodies)])
    handles = [m["receipt_handle"] for m in popped]
    acked = call("POST", f"{pop}/ack", path=at_pop, json={"receipt_handles": handles[:3]}).json()["results"]
    assert [(r["receipt_handle"], r["status"]) for r in acked] == [(h, "acked") for h in handles[:3]]
    held = {"receipt_handle": handles[3], "invisible_ms": 60_000}
    changed = call("POST", f"{pop}/change-invisible", path=at_pop, json=held).json()["receipt_handle"]
    assert changed != handles[3]
    call("POST", f"{pop}/ack", path=at_pop, json={"receipt_handles": [changed]})  # only the released one is left
    # a retry policy of one delivery: the message given back (a nack: no delay of its own, the group's backoff of 0)
    # goes to the group's dead letters at the next receive, and is resent once
    once = {"retry": {"max_delivery_attempts": 1, "backoff": {"kind": "customized", "delays_ms": [0]}}}
    assert call("PATCH", "/v1/groups/{group}", path=at_group, json=once).json()["retry"] == once["retry"]
    call("POST", f"{pop}/release", 204, path=at_pop, json={"receipt_handle": handles[4]})
    # the binary receive, acking an acked message again on the way: the one given back goes to the dead letters
    binary = call("POST", f"{pop}/receive/batch", path=at_pop, json={"ack": handles[:1]}).content
    assert codec.decode_receive(binary) == (["already_acked"], [])
    (letter,) = call("GET", "/v1/groups/{group}/dead-letters", path=at_group).json()["messages"]
    assert (letter["body"], letter["properties"]["RETRY_TOPIC"]) == (popped[4]["body"], topic)
    resend = {"message_ids": [letter["msg_id"]]}
    (resent,) = call("POST", "/v1/groups/{group}/dead-letters/resend", path=at_group, json=resend).json()["results"]
    assert resent["status"] == "resent"
    (back,) = call("POST", f"{pop}/receive", path=at_pop, json={"max_messages": 32}).json()["messages"]
    assert (back["msg_id"], back["body"], back["attempt"]) == (resent["resent_msg_id"], letter["body"], 1)
    (again,) = call("POST", "/v1/groups/{group}/dead-letters/resend", path=at_group, json=resend).json()["results"]
    assert again["status"] == "already_resent"
    pushed = call("PUT", "/v1/groups/{group}/push", path=at_group, json={"topic": topic, "target": ACCEPT}).json()
    assert (pushed["group"], pushed["push"]["topic"]) == (group, topic)
    shown = call("GET", "/v1/groups/{group}/push", path=at_group).json()
    assert (shown["group"], shown["push"]["topic"], shown["dead_letter_topic"]) == (group, topic, f"%DLQ%{group}")
    call("DELETE", "/v1/groups/{group}/push", 204, path=at_group)
    call("DELETE", "/v1/groups/{group}", 204, path=at_group)

    # a user of this round's own: made, granted, shown, rotated, revoked, deleted; whoami is who signed
    at_user = {"user": f"{name}-user"}
    made = call("POST", "/v1/users", 201, json={"name": at_user["user"]}).json()
    assert made["name"] == at_user["user"] and made["secret_key"]
    assert at_user["user"] in {u["name"] for u in call("GET", "/v1/users", params={"limit": 1000}).json()["users"]}
    entry = {"resource": f"Topic:{topic}", "actions": ["Pub"]}
    granted = call("POST", "/v1/users/{user}/acl", path=at_user, json=entry).json()
    assert (granted["name"], [p["resource"] for p in granted["policies"]]) == (at_user["user"], [f"Topic:{topic}"])
    assert call("GET", "/v1/users/{user}", path=at_user).json()["name"] == at_user["user"]
    rotated = call("POST", "/v1/users/{user}/rotate", path=at_user).json()
    assert rotated["name"] == at_user["user"] and rotated["secret_key"] != made["secret_key"]
    revoked = call("POST", "/v1/users/{user}/acl/revoke", path=at_user, json={"resource": f"Topic:{topic}"}).json()
    assert (revoked["name"], revoked["policies"]) == (at_user["user"], [])
    call("DELETE", "/v1/users/{user}", 204, path=at_user)
    assert call("GET", "/v1/whoami").json()["name"] == "admin"

    # a KV namespace of this round's own: its key written, read, scanned, watched, deleted; a snapshot imported
    at_namespace = {"namespace": name}
    assert call("POST", "/v1/kv", 201, json={"name": name}).json()["name"] == name
    assert name in {n["name"] for n in call("GET", "/v1/kv", params={"limit": 1000}).json()["namespaces"]}
    at_key = {"params": {"key": key}, "path": at_namespace}
    written = call("PUT", "/v1/kv/{namespace}/entry", json={"value": "djE="}, **at_key).json()
    assert (written["key"], written["version"]) == (key, 1)
    assert call("GET", "/v1/kv/{namespace}/entry", **at_key).json()["value"] == "djE="
    assert call("GET", "/v1/kv/{namespace}", path=at_namespace).json()["revision"] == 1
    got = call("POST", "/v1/kv/{namespace}/batch-get", path=at_namespace, json={"keys": [key]}).json()
    assert [e["key"] for e in got["entries"]] == [key]
    assert [e["key"] for e in call("GET", "/v1/kv/{namespace}/keys", path=at_namespace).json()["entries"]] == [key]
    changes = call("GET", "/v1/kv/{namespace}/changes", path=at_namespace, params={"from_revision": 1}).json()
    assert [(c["key"], c["revision"]) for c in changes["changes"]] == [(key, 1)]
    assert call("DELETE", "/v1/kv/{namespace}/entry", **at_key).json()["version"] == 2
    imported = {"entries": [{"key": key, "value": "", "version": 7}], "append": True}
    assert call("POST", "/v1/kv/{namespace}/import", path=at_namespace, json=imported).json()["revision"] == 7
    call("DELETE", "/v1/kv/{namespace}", 204, path=at_namespace)

    # a TRANSACTION topic of this round's own: a half message committed once (sent again: the same), one rolled
    # back, one checked back and answered; the topic's outcomes listed
    at_tx, tx = {"topic": f"{name}-tx"}, "/v1/topics/{topic}/transactions"
    call("POST", "/v1/topics", 201, json={"name": at_tx["topic"], "queues": 1, "message_type": "TRANSACTION"})
    halves = [
        call("POST", tx, path=at_tx, json={"producer_group": group, "body": body}).json()["msg_id"]
        for body in ("commit", "rollback")
    ]
    for msg_id, resolution in zip(halves, ("commit", "rollback"), strict=True):
        ended = call("POST", tx + "/{msg_id}", path={**at_tx, "msg_id": msg_id}, json={"resolution": resolution})
        assert ended.json()["state"] == ("committed" if resolution == "commit" else "rolled_back")
    again = call("POST", tx + "/{msg_id}", path={**at_tx, "msg_id": halves[0]}, json={"resolution": "commit"})
    assert again.json()["offset"] == 0
    shown = call("GET", tx + "/{msg_id}", path={**at_tx, "msg_id": halves[1]}).json()
    assert shown["state"] == "rolled_back" and shown["ended_by"] == "producer"
    at_checks = {"group": group, **at_tx}
    checks = call("POST", "/v1/producer-groups/{group}/topics/{topic}/checks", path=at_checks, params={"wait_ms": 0})
    assert checks.json() == {"checks": []}  # nothing due: both ended, none waited the timeout
    listed = call("GET", tx, path=at_tx, params={"state": "committed"}).json()["transactions"]
    assert [t["msg_id"] for t in listed] == halves[:1]
    call("DELETE", "/v1/topics/{topic}", 204, path=at_tx)

    # the web console, logged in as the super user (this client keeps its cookie): the overview, a topic's page,
    # a change carrying the session's CSRF token (the topic's retention)
    console = {"path": {"proxy+": "login"}}
    credentials = find_credentials()
    logged_in = {"access_key": credentials.access_key, "secret_key": credentials.secret_key}
    call("POST", "/console/{proxy+}", 303, data=logged_in, **console)
    assert "Overview" in call("GET", "/console").text
    page = call("GET", "/console/{proxy+}", path={"proxy+": "topic"}, params={"name": topic}).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    change = {"csrf": csrf, "name": topic, "retention_hours": "2"}
    call("POST", "/console/{proxy+}", 303, path={"proxy+": "topic/change"}, data=change)
    assert call("GET", "/v1/topics/{topic}", path=at_topic).json()["retention_ms"] == 7_200_000

    # errors name what this request asked for, and a bad parameter is this request's
    call("DELETE", "/v1/topics/{topic}", 204, path=at_topic)
    gone = call("GET", "/v1/topics/{topic}", 404, path=at_topic).json()
    assert gone["error"] == "TopicNotFound" and repr(topic) in gone["message"]
    bad = call(
        "GET",
        "/v1/topics/{topic}/queues/{queue}/messages",
        422,
        path={**at_topic, "queue": 0},
        params={"max_messages": 0},
    ).json()
    assert [d["loc"] for d in bad["detail"]] == [["query", "max_messages"]]
    assert call("GET", "/health").json()["status"] == "ok"
    assert call("GET", "/openapi.json").json()["info"]["title"]


@pytest.mark.serverless_long
def test_every_route_from_many_threads_at_once_answers_each_request_its_own_response(gateway):
    hit: set[str] = set()
    start = threading.Barrier(THREADS)
    deadline = time.monotonic() + DURATION_S

    def worker(thread: int) -> int:
        call = Caller(gateway.url, hit)
        start.wait()
        rounds = 0
        with call.client:
            while rounds == 0 or time.monotonic() < deadline:
                one_round(call, f"conc-{thread}-{rounds}")
                rounds += 1
        return rounds

    with ThreadPoolExecutor(THREADS) as pool:
        threads = [pool.submit(worker, thread) for thread in range(THREADS)]
    failures = [str(t.exception()) for t in threads if t.exception() is not None]
    assert not failures, f"{len(failures)} of {THREADS} threads failed:\n" + "\n".join(failures)
    never_hit = {route.route_key for route in (*routes(), *stream_routes())} - hit
    assert not never_hit, f"routes never hit: {sorted(never_hit)}"


LISTINGS = {  # a kind of entry: its collection's route, the field its listing holds them in, what a create adds
    "topics": ("/v1/topics", "topics", {"queues": 1}),
    "groups": ("/v1/groups", "groups", {}),
    "users": ("/v1/users", "users", {}),
    "namespaces": ("/v1/kv", "namespaces", {}),
}


@contextlib.contextmanager
def entries_over_http(url: str, kind: str) -> Iterator[Entries]:
    """One kind of entry made, deleted and listed through the gateway, each thread with a client of its own."""
    route, field, spec = LISTINGS[kind]
    mine, callers = threading.local(), []

    def call(method: str, path: str, status: int = 200, **kwargs) -> httpx.Response:
        if not hasattr(mine, "call"):
            mine.call = Caller(url, set())
            callers.append(mine.call)
        return mine.call(method, path, status, **kwargs)

    def page(after: str | None, limit: int) -> tuple[list[str], str | None]:
        params = {"limit": limit} if after is None else {"limit": limit, "after": after}
        listed = call("GET", route, params=params).json()
        return [entry["name"] for entry in listed[field]], listed["next_after"]

    try:
        yield Entries(
            create=lambda name: call("POST", route, 201, json={"name": name, **spec}),
            delete=lambda name: call("DELETE", f"{route}/{name}", 204),
            page=page,
        )
    finally:
        for caller in callers:
            caller.client.close()


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def racing_gateway(request, tmp_path_factory) -> Iterator[str]:
    """A gateway of each backend whose threads switch often (racing_gateway.py); yields its URL."""
    home = tmp_path_factory.mktemp(f"racing-{request.param}") / "data"
    with gateway_as_admin(home, (str(RACING_GATEWAY),), TIDEMQ_BACKEND=request.param) as url:
        yield url


@pytest.mark.parametrize("kind", list(LISTINGS))
def test_a_listing_over_http_skips_entries_deleted_under_it_and_pages_through_the_rest_once(racing_gateway, kind):
    with entries_over_http(racing_gateway, kind) as entries:
        report = race_listings(entries, f"listed-{kind}-")
    assert report.deletes > 0 and report.passes > 0
    assert report.pages_racing_deletes > 0, f"no delete completed while a page was read: no race ({report})"


def http_event(method: str, path: str) -> dict:
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {},
        "requestContext": {"http": {"method": method, "path": path}, "stage": "$default"},
        "isBase64Encoded": False,
    }


def test_a_request_keeps_its_own_route_and_event_while_another_starts_and_ends_on_the_same_resolver():
    app = new_resolver()
    inside, other_done = threading.Event(), threading.Event()

    @app.post("/slow", status_code=201)
    def slow() -> dict:
        inside.set()
        assert other_done.wait(30)  # a bound on a hang, not a timing
        return {"path": app.current_event.path}

    @app.get("/fast")
    def fast() -> dict:
        return {"path": app.current_event.path}

    with ThreadPoolExecutor(1) as pool:
        slow_reply = pool.submit(app.resolve, http_event("POST", "/slow"), None)
        assert inside.wait(30)
        fast_reply = app.resolve(http_event("GET", "/fast"), None)
        other_done.set()
        slow_reply = slow_reply.result()
    assert (fast_reply["statusCode"], json.loads(fast_reply["body"])) == (200, {"path": "/fast"})
    assert (slow_reply["statusCode"], json.loads(slow_reply["body"])) == (201, {"path": "/slow"})
