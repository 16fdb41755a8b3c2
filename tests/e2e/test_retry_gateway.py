"""Retry policies and dead letters over HTTP through a live local gateway, on both backends: a group's policy set at
create and changed after, a nack waiting the group's backoff, a popped message's attempts counted on across a
gateway restart, dead letters listed and resent (by the SDK and the CLI, a bounded range at a time) and received
with attempt 1, a second resend answered `already_resent`, and bad requests refused with a 4xx that changes
nothing."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from tests.gateways import gateway_as_admin
from tidemq import Admin, CustomizedBackoff, Producer, RetryPolicy, SimpleConsumer
from tidemq.httpx_auth import signed_client

from .test_cli import command, environment

NO_WAIT = CustomizedBackoff(delays_ms=(0,))


@pytest.fixture(params=["embedded", "serverless"])
def backend(request) -> dict[str, str]:
    """The gateway's environment for the backend; the serverless one on the session's moto server, so that its
    tables outlive a gateway (a prefix of the test's own)."""
    if request.param == "embedded":
        return {"TIDEMQ_BACKEND": "embedded"}
    request.getfixturevalue("aws_env")
    return {"TIDEMQ_BACKEND": "serverless", "TIDEMQ_DYNAMODB_PREFIX": f"rt{uuid.uuid4().hex[:8]}"}


@pytest.fixture
def url(backend, tmp_path):
    with gateway_as_admin(tmp_path / "data", **backend) as url:
        yield url


def lettered(url: str, group: str, count: int, topic: str = "orders") -> None:
    """`count` messages of a new `topic`, each given up by a consumer of `group` (one delivery allowed): its
    dead letters."""
    with Admin(url) as admin:
        admin.create_topic(topic, queues=2)
        admin.create_group(group, retry=RetryPolicy(max_delivery_attempts=1, backoff=NO_WAIT))
    with Producer(topic, url=url) as producer:
        for n in range(count):
            producer.send(f"order {n}", keys=[f"k{n}"])
    with SimpleConsumer(topic, group, url=url) as consumer:
        while received := consumer.receive(32):
            for message in received:
                consumer.nack(message)


def test_a_group_s_policy_is_set_at_create_changed_after_and_a_nack_waits_its_backoff(url):
    hour = CustomizedBackoff(delays_ms=(0, 3_600_000))
    with Admin(url) as admin:
        admin.create_topic("orders", queues=1)
        created = admin.create_group("billing", retry=RetryPolicy(max_delivery_attempts=5, backoff=hour))
        assert created.retry == RetryPolicy(max_delivery_attempts=5, backoff=hour)
        assert admin.describe_group("billing").retry == created.retry
    with Producer("orders", url=url) as producer:
        producer.send("m")
    with SimpleConsumer("orders", "billing", url=url) as consumer:
        (first,) = consumer.receive()
        consumer.nack(first)  # after the first delivery: no wait
        (second,) = consumer.receive()
        consumer.nack(second)  # after the second: an hour
        assert (first.attempt, second.attempt, consumer.receive()) == (1, 2, [])
    with Admin(url) as admin:
        changed = admin.set_retry_policy("billing", RetryPolicy(max_delivery_attempts=2))
        assert changed.retry == RetryPolicy(max_delivery_attempts=2)  # the backoff: the server's default again
        assert admin.set_retry_policy("billing", None).retry is None


def test_a_popped_message_s_attempts_are_counted_on_across_a_gateway_restart(backend, tmp_path):
    home = tmp_path / "data"
    with gateway_as_admin(home, **backend) as url:
        with Admin(url) as admin:
            admin.create_topic("orders", queues=1)
            admin.create_group("billing", retry=RetryPolicy(max_delivery_attempts=3, backoff=NO_WAIT))
        with Producer("orders", url=url) as producer:
            producer.send("poison")
        with SimpleConsumer("orders", "billing", url=url) as consumer:
            (first,) = consumer.receive()
            consumer.nack(first)
    with gateway_as_admin(home, **backend) as url, SimpleConsumer("orders", "billing", url=url) as consumer:
        (second,) = consumer.receive()
        consumer.nack(second)
        (third,) = consumer.receive()
        consumer.nack(third)
        assert [m.attempt for m in (first, second, third)] == [1, 2, 3]
        assert consumer.receive() == []  # its third delivery was its last
        with Admin(url) as admin:
            (letter,) = admin.dead_letters("billing").messages
    assert (letter.body, letter.properties["RECONSUME_TIME"]) == ("poison", "3")


def test_a_resent_dead_letter_is_received_with_attempt_1_and_a_second_resend_sends_nothing(url):
    lettered(url, "billing", 3)
    with Admin(url) as admin:
        letters = admin.dead_letters("billing").messages
        assert sorted(m.body for m in letters) == ["order 0", "order 1", "order 2"]
        (result,) = admin.resend_dead_letters("billing", message_ids=[letters[0].msg_id]).results
        (again,) = admin.resend_dead_letters("billing", message_ids=[letters[0].msg_id]).results
        assert (result.status, again.status, again.resent_at_ms) == ("resent", "already_resent", result.resent_at_ms)
        assert admin.dead_letters("billing").messages[0].resent_at_ms == result.resent_at_ms
    with SimpleConsumer("orders", "billing", url=url) as consumer:
        (back,) = consumer.receive()
        consumer.ack(back)
    message = back.message
    assert (message.msg_id, message.body.decode(), back.attempt) == (result.resent_msg_id, letters[0].body, 1)
    assert message.properties["DLQ_MESSAGE_ID"] == letters[0].msg_id and list(message.keys) == letters[0].keys


def test_the_cli_sets_a_policy_lists_dead_letters_and_resends_a_range_a_request_at_a_time(url):
    def tidemq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command(url, *args), capture_output=True, text=True, timeout=60, env=environment())

    made = tidemq("group", "create", "audit", "--max-delivery-attempts", "4", "--backoff", "exponential:1s,2,1m")
    assert made.returncode == 0 and "4 delivery attempts, backoff exponential:1000ms,2,60000ms" in made.stdout
    updated = tidemq("group", "update", "audit", "--backoff", "customized:5s,1m")
    assert updated.returncode == 0 and "4 delivery attempts, backoff customized:5000ms,60000ms" in updated.stdout
    bad = tidemq("group", "update", "audit", "--backoff", "linear:1s")
    assert bad.returncode == 2 and "must be exponential:" in bad.stderr

    lettered(url, "billing", 70)
    listed = tidemq("dlq", "list", "billing", "--limit", "5")
    assert listed.returncode == 0 and "next page: --offset 5" in listed.stdout and "orders" in listed.stdout
    one = tidemq("dlq", "resend", "billing", "--from", "3", "--to", "4")
    assert one.returncode == 0 and "resent 1 dead letter(s)" in one.stdout, one.stderr
    every = tidemq("dlq", "resend", "billing", "--from", "0")
    assert every.returncode == 0 and "resent 69 dead letter(s) of 'billing'; 1 had been resent before" in every.stdout
    assert "going on from offset 64" in every.stderr  # progress, a request of 64 at a time
    assert tidemq("dlq", "resend", "billing").returncode == 2  # neither --id nor --from
    with SimpleConsumer("orders", "billing", url=url) as consumer:
        received = []
        while batch := consumer.receive(32):
            received += batch
            consumer.ack_all(batch)
    assert len(received) == 70 and {m.attempt for m in received} == {1}


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/groups", {"name": "g2", "retry": {"max_delivery_attempts": 0}}, 422),
        ("POST", "/v1/groups", {"name": "g2", "retry": {"max_delivery_attempts": "3"}}, 422),
        ("POST", "/v1/groups", {"name": "g2", "retry": {"backoff": {"kind": "linear"}}}, 422),
        ("POST", "/v1/groups", {"name": "g2", "retry": {"backoff": {"kind": "customized", "delays_ms": []}}}, 422),
        ("POST", "/v1/groups", {"name": "g2", "retry": {"backoff": {"kind": "exponential", "multiplier": 0.5}}}, 422),
        ("PATCH", "/v1/groups/bad-billing", {"retry": {"tries": 3}}, 422),
        ("PATCH", "/v1/groups/nobody", {"retry": None}, 404),
        ("POST", "/v1/groups/bad-billing/dead-letters/resend", {}, 422),
        ("POST", "/v1/groups/bad-billing/dead-letters/resend", {"message_ids": ["0" * 24], "from_offset": 0}, 422),
        ("POST", "/v1/groups/bad-billing/dead-letters/resend", {"message_ids": ["0" * 24] * 65}, 422),
        ("POST", "/v1/groups/bad-billing/dead-letters/resend", {"message_ids": ["not an id"]}, 422),
        ("POST", "/v1/groups/bad-billing/dead-letters/resend", {"message_ids": ["0" * 24], "to_offset": 4}, 422),
        ("POST", "/v1/groups/bad-billing/dead-letters/resend", {"message_ids": ["f" * 24]}, 409),
        ("POST", "/v1/groups/nobody/dead-letters/resend", {"from_offset": 0}, 404),
        ("GET", "/v1/groups/bad-billing/dead-letters?offset=100", None, 409),
        ("GET", "/v1/groups/bad-billing/dead-letters?limit=0", None, 422),
        ("POST", "/v1/groups/bad-billing/topics/%25DLQ%25bad-billing/receive", {}, 400),  # its own dead letters
    ],
)
def test_bad_requests_are_refused_with_a_4xx_and_change_nothing(gateway, method, path, body, status):
    """On the module's gateway (each backend's), its group and dead letters made by the first of these tests."""
    with signed_client(gateway.url, timeout=60) as http:
        if http.get("/v1/groups/bad-billing").status_code == 404:
            lettered(gateway.url, "bad-billing", 2, topic="bad-orders")
        response = http.request(method, path, json=body)
        assert response.status_code == status, response.text
        letters = http.get("/v1/groups/bad-billing/dead-letters").json()["messages"]
        assert [m["resent_at_ms"] for m in letters] == [None, None]
        assert http.get("/v1/groups/bad-billing").json()["retry"]["max_delivery_attempts"] == 1
        assert http.get("/v1/groups/g2").status_code == 404
