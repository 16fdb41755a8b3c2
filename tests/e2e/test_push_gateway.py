"""Push delivery through the real gateway process (what `make run` starts, with its push worker), on both
backends: registered over HTTP, the SDK and the CLI; targets are real HTTP webhooks on loopback ports (the
gateway allows 127.0.0.1, as `make run` does). Forbidden targets are refused before anything is stored; a
webhook's answer never reaches a dead letter or the log, nor do credentials in its URL; a receiver verifies each
delivery's signature; a reset made in the middle of a delivery is respected."""

from __future__ import annotations

import base64
import shlex
import subprocess
import threading
from collections import defaultdict
from typing import Any

import httpx
import pytest

from tests.gateways import signed_http
from tests.push_targets import Webhook, wait_for
from tidemq import SIGNATURE_HEADER, Admin, ExponentialBackoff, InvalidPushSignature, RetryPolicy, verify_push_signature

from .test_cli import command, environment


def fast(attempts: int) -> RetryPolicy:
    """A retry policy of `attempts` deliveries, retrying within milliseconds."""
    return RetryPolicy(
        max_delivery_attempts=attempts, backoff=ExponentialBackoff(initial_ms=5, multiplier=2, max_ms=20)
    )


def call(url: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request to the gateway at `url`, signed, whatever it answers (every raw request of these tests)."""
    return signed_http().request(method, f"{url}{path}", **kwargs)


def lag(url: str, group: str, topic: str) -> int:
    return call(url, "GET", f"/v1/groups/{group}", params={"topic": topic}).raise_for_status().json()["lag"]


def produce(url: str, topic: str, messages: list[dict]) -> list[dict]:
    response = call(url, "POST", f"/v1/topics/{topic}/messages", json={"messages": messages}).raise_for_status()
    return response.json()["messages"]


def dead_letters(url: str, group: str) -> list[dict]:
    return call(url, "GET", f"/v1/topics/%25DLQ%25{group}/queues/0/messages").json().get("messages", [])


def shown_push(url: str, group: str) -> dict[str, Any] | None:
    """The group's push subscription as the API shows it; None if it has none (a 409 saying so)."""
    response = call(url, "GET", f"/v1/groups/{group}/push")
    if response.status_code == 409 and response.json()["error"] == "NoPushSubscription":
        return None
    return response.raise_for_status().json()["push"]


def topic_and_group(url: str, topic: str, queues: int = 1) -> str:
    """Create `topic` and the group `<topic>-group`; the group's name."""
    with Admin(url) as admin:
        admin.create_topic(topic, queues=queues)
        return admin.create_group(f"{topic}-group").name


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
    with Webhook(status=lambda body: 503) as webhook, Admin(gateway.url) as admin:
        admin.create_topic("push-dlq", queues=2)
        admin.create_group("push-dlq-group", retry=fast(3))
        admin.set_push("push-dlq-group", "push-dlq", webhook.url)
        [sent] = produce(gateway.url, "push-dlq", [{"body": "doomed", "queue": 1, "keys": ["order-9"]}])
        letters = wait_for(lambda: dead_letters(gateway.url, "push-dlq-group"), "a dead letter")
    assert [body["attempt"] for body in webhook.bodies] == [1, 2, 3]
    [letter] = letters
    assert (letter["body"], letter["keys"]) == ("doomed", ["order-9"])
    assert letter["properties"]["ORIGIN_MESSAGE_ID"] == sent["msg_id"]
    assert (letter["properties"]["RETRY_TOPIC"], letter["properties"]["ORIGIN_QUEUE_ID"]) == ("push-dlq", "1")
    assert letter["properties"]["DLQ_REASON"] == "HTTP 503 Service Unavailable"
    # it commits past the message once its dead letter is stored: the letter can be read a moment before that
    wait_for(lambda: lag(gateway.url, "push-dlq-group", "push-dlq") == 0, "lag 0")


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"target": "ftp://billing.example.com"}, 422, "is not a push target: use lambda:"),
        ({"target": "lambda:"}, 422, "give a function name"),
        ({"target": "python:tests.no_such_module:call"}, 400, "is not an allowed Python target"),
        ({"tag": "paid ||"}, 422, "tag filter"),
        ({"max_attempts": 3}, 422, "max_attempts"),  # the group's retry policy says (PATCH /v1/groups/{group})
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
    response = call(gateway.url, "PUT", f"/v1/groups/{group}/push", json=body)
    assert response.status_code == status and says in response.json()["message"], response.text
    assert shown_push(gateway.url, "push-bad-group") is None


def test_the_cli_sets_shows_and_clears_a_push_subscription(gateway):
    def tidemq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command(gateway.url, *args), capture_output=True, text=True, timeout=60, env=wide)

    wide = {**environment(), "COLUMNS": "300"}  # tables wide enough for a whole URL on one line

    topic_and_group(gateway.url, "push-cli")
    with Webhook() as webhook:
        target = webhook.url.replace("http://", "http://billing:pa55@") + "?token=t0ken"
        set_ = tidemq(
            *shlex.split("group push set push-cli-group --topic push-cli --batch-size 4"),
            "--target",
            target,
            "--tag",
            "new || paid",
        )
    assert set_.returncode == 0 and "now pushes from topic 'push-cli'" in set_.stdout, set_.stderr
    [secret] = [line.rpartition(": ")[2] for line in set_.stdout.splitlines() if line.startswith("signing secret")]
    verify_push_signature(webhook.pings[0].raw, webhook.pings[0].headers["x-tidemq-signature"], secret)
    shown_target = webhook.url.replace("http://", "http://***@") + "?token=***"
    shown = tidemq("group", "push", "show", "push-cli-group").stdout
    assert shown_target in shown and "new || paid" in shown and "%DLQ%push-cli-group" in shown
    listed = tidemq("group", "list").stdout
    assert "push-cli ->" in listed and shown_target in listed
    for output in (set_.stdout, shown, listed):
        assert "pa55" not in output and "t0ken" not in output
    assert secret not in shown + listed
    refused = tidemq("group", "push", "set", "push-cli-group", "--topic", "push-cli", "--target", "ftp://x")
    assert refused.returncode == 1 and refused.stderr.startswith("tidemq: ") and "not a push target" in refused.stderr
    assert tidemq("group", "push", "clear", "push-cli-group").returncode == 0
    assert "does not push" in tidemq("group", "push", "show", "push-cli-group").stdout


# ---- targets that cannot be turned into weapons ------------------------------------------------------------

FORBIDDEN = [
    ("python:tests.push_targets:_record", 422, "names a private or dunder name"),
    ("python:tests.push_targets:accept.__globals__", 422, "names a private or dunder name"),
    ("python:builtins:print", 400, "is not an allowed Python target"),
    ("python:tests.push_side_effect:call", 400, "is not an allowed Python target"),  # importing it would raise
    ("http://127.0.0.2:9000/hook", 400, "resolves to a loopback address"),
    ("http://[::1]:9000/hook", 400, "resolves to a loopback address"),
    ("http://[::ffff:127.0.0.2]:9000/hook", 400, "resolves to a loopback address"),
    ("http://10.0.0.1/hook", 400, "resolves to a private address"),
    ("http://192.168.1.20:8080/hook", 400, "resolves to a private address"),
    ("http://169.254.169.254/latest/meta-data/", 400, "resolves to a link-local address"),
    ("http://[fe80::1]/hook", 400, "resolves to a link-local address"),
    ("http://224.0.0.1/hook", 400, "resolves to a multicast address"),
    ("http://0.0.0.0:9000/hook", 400, "resolves to the unspecified address"),
    ("{gateway}/v1/topics", 400, "are the platform's own endpoint"),  # 127.0.0.1 is allowed, the gateway is not
]


@pytest.fixture(scope="module")
def forbidden_group(gateway) -> str:
    return topic_and_group(gateway.url, "push-forbidden")


@pytest.mark.parametrize(("target", "status", "says"), FORBIDDEN)
def test_a_forbidden_push_target_gets_a_4xx_saying_why_and_nothing_is_stored(
    gateway, forbidden_group, target, status, says
):
    body = {"topic": "push-forbidden", "target": target.format(gateway=gateway.url)}
    response = call(gateway.url, "PUT", f"/v1/groups/{forbidden_group}/push", json=body)
    assert response.status_code == status and says in response.json()["message"], response.text
    assert shown_push(gateway.url, forbidden_group) is None
    assert call(gateway.url, "GET", "/health").status_code == 200


def test_a_webhook_that_redirects_is_refused_and_nothing_is_stored(gateway):
    group = topic_and_group(gateway.url, "push-redirect")
    metadata = {"location": "http://169.254.169.254/latest/meta-data/iam/security-credentials/"}
    with Webhook(status=lambda body: 302, headers=metadata) as webhook:
        body = {"topic": "push-redirect", "target": webhook.url}
        response = call(gateway.url, "PUT", f"/v1/groups/{group}/push", json=body)
    assert response.status_code == 400, response.text
    assert "HTTP 302 Found: a redirect, which webhooks do not follow" in response.json()["message"]
    assert shown_push(gateway.url, group) is None and len(webhook.pings) == 1  # one call, not followed


def test_a_failing_webhook_s_answer_never_reaches_the_dead_letter_or_the_log(gateway):
    group = topic_and_group(gateway.url, "push-secret-answer")
    answer = b"403: the key sk_live_SECRETVALUE is not allowed here"
    with Webhook(status=lambda body: 403, reply=answer) as webhook, Admin(gateway.url) as admin:
        admin.set_retry_policy(group, fast(2))
        admin.set_push(group, "push-secret-answer", webhook.url)
        produce(gateway.url, "push-secret-answer", [{"body": "refused"}])
        [letter] = wait_for(lambda: dead_letters(gateway.url, group), "a dead letter")
    assert letter["properties"]["DLQ_REASON"] == "HTTP 403 Forbidden"
    assert "SECRETVALUE" not in str(letter)
    assert "SECRETVALUE" not in (gateway.home / "gateway.log").read_text()


def test_a_receiver_verifies_each_delivery_with_the_secret_shown_once_and_refuses_a_changed_one(gateway):
    group = topic_and_group(gateway.url, "push-signed")
    with Webhook() as webhook, Admin(gateway.url) as admin:
        subscribed = admin.set_push(group, "push-signed", webhook.url)
        produce(gateway.url, "push-signed", [{"body": f"signed-{n}"} for n in range(3)])
        wait_for(lambda: len(webhook.bodies) == 3, "three deliveries")
        shown, listed = admin.push(group), admin.list_groups().model_dump_json()
        again = admin.set_push(group, "push-signed", webhook.url + "?v=2")
    secret = subscribed.signing_secret
    assert secret and webhook.pings[0].headers["x-tidemq-event"] == "ping"
    for delivery in webhook.deliveries:
        verify_push_signature(delivery.raw, delivery.headers[SIGNATURE_HEADER.lower()], secret)
        with pytest.raises(InvalidPushSignature, match="does not match the body"):
            forged = delivery.raw.replace(b"signed-", b"forged-")
            verify_push_signature(forged, delivery.headers[SIGNATURE_HEADER.lower()], secret)
    assert secret not in shown.model_dump_json() + listed and not hasattr(shown, "signing_secret")
    assert again.signing_secret not in (None, secret)  # setting it again makes a new one


def test_credentials_in_a_webhook_url_are_sent_but_never_shown_or_logged(gateway):
    group = topic_and_group(gateway.url, "push-credentials")
    statuses = iter([200, 500])  # the ping, then a first delivery that fails (and is logged), then success
    with Webhook(status=lambda body: next(statuses, 200)) as webhook, Admin(gateway.url) as admin:
        target = webhook.url.replace("http://", "http://billing:pa55@") + "?token=t0ken"
        admin.set_retry_policy(group, fast(16))
        admin.set_push(group, "push-credentials", target)
        produce(gateway.url, "push-credentials", [{"body": "with-credentials"}])
        wait_for(lambda: lag(gateway.url, group, "push-credentials") == 0, "lag 0")
        listed = admin.list_groups().model_dump_json()
    authorization = "Basic " + base64.b64encode(b"billing:pa55").decode()
    assert {r.headers["authorization"] for r in webhook.received} == {authorization}
    shown = webhook.url.replace("http://", "http://***@") + "?token=***"
    assert shown_push(gateway.url, group)["target"] == shown and shown in listed
    log = (gateway.home / "gateway.log").read_text()
    assert f"push to {shown} failed" in log
    assert "pa55" not in log + listed and "t0ken" not in log + listed


# ---- resets during delivery ---------------------------------------------------------------------------------


def blocking_at(body: str) -> tuple[Webhook, threading.Event]:
    """A webhook whose first call delivering `body` waits until the event is set (a delivery in flight)."""
    release = threading.Event()

    def status(delivery: dict[str, Any]) -> int:
        if [m["body"] for m in delivery.get("messages", [])] == [body] and not release.is_set():
            release.wait(timeout=60)
        return 200

    return Webhook(status=status), release


@pytest.mark.parametrize(
    ("to", "received"),
    [
        ("earliest", ["r0", "r1", "r2", "r0", "r1", "r2", "r3", "r4", "after"]),  # replayed from the start
        ("latest", ["r0", "r1", "r2", "after"]),  # the rest skipped
    ],
)
def test_a_reset_of_a_pushing_group_in_the_middle_of_a_delivery_is_respected(gateway, to, received):
    topic = f"push-reset-{to}"
    group = topic_and_group(gateway.url, topic)
    webhook, release = blocking_at("r2")
    with webhook, Admin(gateway.url) as admin:
        admin.set_push(group, topic, webhook.url)
        produce(gateway.url, topic, [{"body": f"r{n}"} for n in range(5)])
        wait_for(lambda: "r2" in webhook.bodies_received(), "the delivery of r2 to be in flight")
        admin.reset_offsets(group, topic, to)  # while the webhook holds r2
        release.set()
        wait_for(lambda: lag(gateway.url, group, topic) == 0, "lag 0")
        produce(gateway.url, topic, [{"body": "after"}])
        wait_for(lambda: "after" in webhook.bodies_received(), "what came after the reset")
    assert webhook.bodies_received() == received  # in queue order: anything else would have come before "after"
