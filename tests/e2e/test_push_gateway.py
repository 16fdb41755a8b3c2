"""Push delivery through the real gateway process (what `make run` starts, with its push worker), on both
backends: registered over HTTP, the SDK and the CLI; targets are real HTTP webhooks on loopback ports."""

from __future__ import annotations

import shlex
import subprocess
from collections import defaultdict

import httpx
import pytest

from tests.push_targets import Webhook, wait_for
from tidemq import Admin

from .test_cli import command, environment

FAST = {"backoff_base_ms": 5, "backoff_max_ms": 20}


def lag(url: str, group: str, topic: str) -> int:
    return httpx.get(f"{url}/v1/groups/{group}", params={"topic": topic}).raise_for_status().json()["lag"]


def produce(url: str, topic: str, messages: list[dict]) -> list[dict]:
    response = httpx.post(f"{url}/v1/topics/{topic}/messages", json={"messages": messages}).raise_for_status()
    return response.json()["messages"]


def test_a_webhook_receives_every_message_once_in_queue_order_and_the_lag_reaches_0(gateway):
    with Webhook() as webhook, Admin(gateway.url) as admin:
        admin.create_topic("push-ok", queues=4)
        admin.create_group("push-ok-group")
        admin.set_push("push-ok-group", "push-ok", webhook.url, batch_size=5)
        produced = []
        for batch in range(4):
            produced += produce(
                gateway.url, "push-ok", [{"body": f"m{batch}-{n}", "sharding_key": f"k{n % 7}"} for n in range(50)]
            )
        wait_for(lambda: lag(gateway.url, "push-ok-group", "push-ok") == 0, "lag 0")
        received = list(webhook.messages())
    assert sorted(m["msg_id"] for m in received) == sorted(m["msg_id"] for m in produced)  # each exactly once
    offsets = defaultdict(list)
    for message in received:
        offsets[message["queue"]].append(message["offset"])
    assert len(offsets) > 1 and all(o == sorted(o) for o in offsets.values())  # per queue, in offset order
    assert all(len(body["messages"]) <= 5 and body["group"] == "push-ok-group" for body in webhook.bodies)


def test_a_failing_webhook_is_retried_then_the_message_lands_in_the_dead_letter_topic(gateway):
    dead_letters = f"{gateway.url}/v1/topics/%25DLQ%25push-dlq-group/queues/0/messages"
    with Webhook(status=lambda body: 503) as webhook, Admin(gateway.url) as admin:
        admin.create_topic("push-dlq", queues=2)
        admin.create_group("push-dlq-group")
        admin.set_push("push-dlq-group", "push-dlq", webhook.url, max_attempts=3, **FAST)
        [sent] = produce(gateway.url, "push-dlq", [{"body": "doomed", "queue": 1, "keys": ["order-9"]}])
        letters = wait_for(lambda: httpx.get(dead_letters).json().get("messages"), "a dead letter")
    assert [body["attempt"] for body in webhook.bodies] == [1, 2, 3]
    [letter] = letters
    assert (letter["body"], letter["keys"]) == ("doomed", ["order-9"])
    assert letter["properties"]["ORIGIN_MESSAGE_ID"] == sent["msg_id"]
    assert (letter["properties"]["RETRY_TOPIC"], letter["properties"]["ORIGIN_QUEUE_ID"]) == ("push-dlq", "1")
    assert "HTTP 503" in letter["properties"]["DLQ_REASON"]
    assert lag(gateway.url, "push-dlq-group", "push-dlq") == 0


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"target": "ftp://billing.example.com"}, 422, "is not a push target: use lambda:"),
        ({"target": "lambda:"}, 422, "give a function name"),
        ({"target": "python:tests.no_such_module:call"}, 400, "does not import"),
        ({"tag": "paid ||"}, 422, "tag filter"),
        ({"max_attempts": 0}, 422, "max_attempts"),
        ({"topic": "no-such-topic"}, 409, "'no-such-topic' does not exist"),
        ({"group": "no-such-group"}, 404, "'no-such-group' does not exist"),
    ],
)
def test_a_bad_registration_gets_a_4xx_saying_why_and_changes_nothing(gateway, change, status, says):
    with Admin(gateway.url) as admin:
        if "push-bad" not in {t.name for t in admin.iter_topics()}:
            admin.create_topic("push-bad", queues=1)
            admin.create_group("push-bad-group")
    body = {"topic": "push-bad", "target": "http://127.0.0.1:9/hook", **change}
    group = body.pop("group", "push-bad-group")
    response = httpx.put(f"{gateway.url}/v1/groups/{group}/push", json=body)
    assert response.status_code == status and says in response.json()["message"], response.text
    assert httpx.get(f"{gateway.url}/v1/groups/push-bad-group/push").json()["error"] == "NoPushSubscription"


def test_the_cli_sets_shows_and_clears_a_push_subscription(gateway):
    def tidemq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command(gateway.url, *args), capture_output=True, text=True, timeout=60, env=environment()
        )

    with Admin(gateway.url) as admin:
        admin.create_topic("push-cli", queues=1)
        admin.create_group("push-cli-group")
    target = "http://127.0.0.1:9/hooks/orders"
    set_ = tidemq(
        *shlex.split("group push set push-cli-group --topic push-cli --max-attempts 4"),
        "--target",
        target,
        "--tag",
        "new || paid",
    )
    assert set_.returncode == 0 and "now pushes from topic 'push-cli'" in set_.stdout, set_.stderr
    shown = tidemq("group", "push", "show", "push-cli-group").stdout
    assert target in shown and "new || paid" in shown and "%DLQ%push-cli-group" in shown
    listed = tidemq("group", "list").stdout
    assert "push-cli ->" in listed and target in listed
    refused = tidemq("group", "push", "set", "push-cli-group", "--topic", "push-cli", "--target", "ftp://x")
    assert refused.returncode == 1 and refused.stderr.startswith("tidemq: ") and "not a push target" in refused.stderr
    assert tidemq("group", "push", "clear", "push-cli-group").returncode == 0
    assert "does not push" in tidemq("group", "push", "show", "push-cli-group").stdout
