"""Delay and timer messages through a live gateway, each backend: the HTTP API (JSON, binary, recall), the SDK, the
CLI and the ACL, and what each answers to bad input."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from tests.gateways import signed_http
from tests.push_targets import Webhook, wait_for
from tidemq import Admin, Consumer, Producer
from tidemq.client import HttpClient
from tidemq.credentials import Credentials
from tidemq_protocol.acl import AclEntry
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    AccessDenied,
    InvalidArgument,
    MessageTypeMismatch,
    TimerDelivered,
    TimerNotFound,
    TopicNotFound,
)
from tidemq_protocol.timer import recall_handle

TIDEMQ = Path(sys.executable).parent / "tidemq"
DEADLINE_S = 60.0
HOUR_MS = 3_600_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def admin(gateway):
    with Admin(gateway.url) as admin:
        yield admin


@pytest.fixture
def delay_topic(admin) -> str:
    name = unique("later")
    admin.create_topic(name, queues=1, message_type="DELAY")
    return name


def consume_until(url: str, topic: str, want: int) -> list:
    """Long-poll the topic's queue 0 over HTTP until `want` messages came (or the deadline passed)."""
    found, deadline = [], time.monotonic() + DEADLINE_S
    with Consumer(topic, url=url, queues=[0]) as consumer:
        while len(found) < want and time.monotonic() < deadline:
            found += consumer.poll(wait_ms=1000)
    return found


def test_a_json_delay_message_is_delivered_when_due_with_its_id_and_a_recalled_one_never(gateway, delay_topic):
    http, base = signed_http(), f"{gateway.url}/v1/topics/{delay_topic}"
    due = now_ms() + 1500
    sent = {"messages": [{"body": "due", "delivery_time_ms": due}, {"body": "recalled", "delay_ms": 1500}]}
    answer = http.post(f"{base}/messages", json=sent)
    assert answer.status_code == 200, answer.text
    kept, recalled = answer.json()["messages"]
    assert kept["offset"] == recalled["offset"] == -1 and kept["recall_handle"] and recalled["recall_handle"]
    undone = http.post(f"{base}/recall", json={"recall_handle": recalled["recall_handle"]})
    assert undone.json() == {"msg_id": recalled["msg_id"], "due_ms": undone.json()["due_ms"], "status": "recalled"}
    (message,) = consume_until(gateway.url, delay_topic, 1)
    assert (message.msg_id, message.body, message.queue_offset) == (kept["msg_id"], b"due", 0)
    assert message.store_timestamp >= due
    fetched = http.get(f"{gateway.url}/v1/messages/{kept['msg_id']}").json()
    assert (fetched["msg_id"], fetched["offset"], fetched["properties"]["TIMER_DELIVER_MS"]) == (
        kept["msg_id"],
        0,
        str(due),
    )
    late = http.post(f"{base}/recall", json={"recall_handle": kept["recall_handle"]})
    assert (late.status_code, late.json()["error"]) == (409, "TimerDelivered")


def test_each_bad_request_gets_its_own_status_and_stores_nothing(gateway, admin, delay_topic):
    http, base = signed_http(), f"{gateway.url}/v1/topics/{delay_topic}"
    plain = unique("plain")
    admin.create_topic(plain, queues=1)
    cases = [
        (f"{base}/messages", {"messages": [{"body": "x", "delay_ms": 4 * 24 * HOUR_MS}]}, 400, "delay_ms"),
        (f"{base}/messages", {"messages": [{"body": "x", "delivery_time_ms": now_ms() + 5 * 24 * HOUR_MS}]}, 400, ""),
        (f"{base}/messages", {"messages": [{"body": "x", "delay_ms": 1, "delivery_time_ms": 1}]}, 422, ""),
        (f"{base}/messages", {"messages": [{"body": "x", "delay_ms": 41 * 24 * HOUR_MS}]}, 422, "delay_ms"),
        (f"{base}/messages", {"messages": [{"body": "x", "properties": {"UNIQ_KEY": "x"}}]}, 400, "UNIQ_KEY"),
        (f"{base}/messages", {"messages": [{"body": "no delivery time"}]}, 409, "DELAY"),
        (f"{gateway.url}/v1/topics/{plain}/messages", {"messages": [{"body": "x", "delay_ms": 5}]}, 409, "NORMAL"),
        (f"{base}/recall", {"recall_handle": recall_handle(delay_topic, "0" * 12 + "1234" + "8" + "0" * 7)}, 404, ""),
        (f"{base}/recall", {"recall_handle": "not a handle!"}, 422, "recall_handle"),
        (f"{base}/recall", {"recall_handle": "bm90IG9uZQ"}, 404, "no timer"),
    ]
    for url, body, status, said in cases:
        answer = http.post(url, json=body)
        assert answer.status_code == status, (body, answer.text)
        assert said in answer.text
    assert admin.describe_topic(delay_topic).queue_offsets[0].max_offset == 0
    assert admin.describe_topic(plain).queue_offsets[0].max_offset == 0


def test_the_sdk_sends_with_a_delay_or_a_time_and_recalls(gateway, delay_topic):
    with Producer(delay_topic, url=gateway.url) as producer:
        soon = producer.send(b"soon", delay=300)
        later = producer.send(b"later", delay=timedelta(hours=1))
        at_time = producer.send(b"at", delivery_time=now_ms() + 200)
        assert soon.offset == later.offset == -1 and soon.recall_handle and later.recall_handle
        recalled = producer.recall(later.recall_handle)
        assert (recalled.msg_id, recalled.again) == (later.msg_id, False)
        assert producer.recall(later.recall_handle).again is True
        with pytest.raises(TimerNotFound):
            other = "e" if later.msg_id.endswith("f") else "f"  # another id, never this one
            producer.recall(recall_handle(delay_topic, later.msg_id[:-1] + other))
        received = consume_until(gateway.url, delay_topic, 2)
        assert sorted(m.msg_id for m in received) == sorted([soon.msg_id, at_time.msg_id])
        with pytest.raises(TimerDelivered):
            producer.recall(soon.recall_handle)
        with pytest.raises(InvalidArgument, match="not both"):
            producer.send(b"x", delay=1, delivery_time=1)
    with Producer(unique("nope"), url=gateway.url) as stranger, pytest.raises(TopicNotFound):
        stranger.send(b"x", delay=1)


def test_the_cli_produces_with_a_delay_recalls_and_describes_the_topic(gateway, delay_topic):
    def tidemq(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TIDEMQ), "--url", gateway.url, *args], input=stdin, capture_output=True, text=True, timeout=60
        )

    produced = tidemq("produce", delay_topic, "--delay", "1h", "--quiet", stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    lines = [line.split() for line in produced.stdout.splitlines()]
    assert len(lines) == 2 and all(len(line) == 2 for line in lines)  # msg_id recall_handle
    recalled = tidemq("message", "recall", delay_topic, lines[0][1])
    assert (recalled.returncode, recalled.stdout) == (0, f"recalled {lines[0][0]}\n")
    forged = tidemq("message", "recall", delay_topic, lines[0][1][:-3])
    assert forged.returncode != 0 and "names no timer" in forged.stderr
    at = tidemq("produce", delay_topic, "--deliver-at", "2000-01-01T00:00:00Z", "--quiet", stdin="past\n")
    assert (at.returncode, at.stdout) == (0, "")  # a time past: delivered at once, nothing to recall
    described = tidemq("topic", "describe", delay_topic)
    assert f"DELAY timer_max_delay_ms: {3 * 24 * 3_600_000}" in described.stdout


def test_a_recall_is_a_publish_to_the_topic(gateway, admin, delay_topic):
    with Producer(delay_topic, url=gateway.url) as producer:
        sent = producer.send(b"guarded", delay=timedelta(hours=1))

    def client(*actions: str) -> HttpClient:
        entry = AclEntry(resource=f"Topic:{delay_topic}", actions=list(actions))
        created = admin.create_user(unique("user"), policies=[entry])
        return HttpClient(gateway.url, credentials=Credentials(created.name, created.secret_key), retries=0)

    with pytest.raises(AccessDenied):
        Producer(delay_topic, client=client("Sub")).recall(sent.recall_handle)
    assert Producer(delay_topic, client=client("Pub")).recall(sent.recall_handle).msg_id == sent.msg_id


def test_a_delay_on_a_normal_topic_is_refused_by_the_sdk_too(gateway, admin):
    plain = unique("plain")
    admin.create_topic(plain, queues=1)
    with Producer(plain, url=gateway.url) as producer, pytest.raises(MessageTypeMismatch, match="NORMAL"):
        producer.send(b"x", delay=5)


def test_a_push_group_of_a_delay_topic_is_pushed_each_message_once_it_is_due(gateway, admin, delay_topic):
    """Nothing produces to the topic after the send: the move itself sets push delivery going (the embedded mover;
    on the serverless backend, the maintenance function's timers job)."""
    with Webhook() as webhook:
        group = unique("pushed")
        admin.create_group(group)
        admin.set_push(group, delay_topic, webhook.url)
        with Producer(delay_topic, url=gateway.url) as producer:
            sent = producer.send(b"pushed when due", delay=500)
        wait_for(lambda: list(webhook.messages()), "the push of the delay message")
        assert [m["msg_id"] for m in webhook.messages()] == [sent.msg_id]
