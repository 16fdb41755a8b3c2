"""Message trace through a real gateway, on both backends: the API and `tidemq message trace` show a message's whole
life, recorded by the broker with no help from the client (functions/logic/trace.py)."""

from __future__ import annotations

import json
import subprocess
import uuid

from tidemq import Admin, Producer, RetryPolicy, SimpleConsumer

from ..gateways import signed_http
from .test_cli import command, environment


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


LIFE = ["stored", "delivered", "nacked", "retried", "nacked", "dead_lettered", "resent"]
"""A poison message's life: produced, delivered by pop, nacked, retried, nacked, dead-lettered, resent."""


def test_a_message_produced_popped_nacked_retried_dead_lettered_and_resent_shows_it_all_in_order(gateway):
    topic, group = unique("traced"), unique("traced")
    with Admin(gateway.url) as admin:
        admin.create_topic(topic, queues=2)
        admin.create_group(group, retry=RetryPolicy(max_delivery_attempts=2))
        with Producer(topic, url=gateway.url) as producer:
            msg_id = producer.send("poison").msg_id
        with SimpleConsumer(topic, group, url=gateway.url) as consumer:
            for _ in range(2):
                (delivery,) = consumer.receive(wait_ms=10_000)
                consumer.release(delivery)  # a nack, visible again at once
            assert consumer.receive() == []  # the second delivery was its last: a dead letter now
        (resent,) = admin.resend_dead_letters(group, from_offset=0).results

        shown = admin.message_trace(msg_id)
        assert [e.event for e in shown.events] == LIFE

    # the HTTP API's own answer, as a browser or curl gets it: the same events, in that order, oldest first
    answer = signed_http().get(f"{gateway.url}/v1/messages/{msg_id}/trace")
    assert answer.status_code == 200, answer.text
    events = answer.json()["events"]
    assert [event["event"] for event in events] == LIFE
    times = [event["time_unix_nano"] for event in events]
    assert times == sorted(times) and answer.json() == shown.model_dump(mode="json")
    stored = shown.events[0].attributes
    assert (stored["messaging.destination.name"], stored["enduser.id"]) == (topic, "admin")
    assert {e.attributes.get("messaging.consumer.group.name") for e in shown.events[1:]} == {group}
    assert shown.events[-1].attributes["tidemq.resent.message.id"] == resent.resent_msg_id

    shown_by_cli = subprocess.run(
        command(gateway.url, "message", "trace", msg_id, "--json"), capture_output=True, text=True, env=environment()
    )
    assert json.loads(shown_by_cli.stdout) == shown.model_dump(mode="json")
    lines_run = subprocess.run(
        command(gateway.url, "message", "trace", msg_id), capture_output=True, text=True, timeout=60, env=environment()
    )
    header, *lines = lines_run.stdout.splitlines()
    assert lines_run.returncode == 0 and header == f"message {msg_id} of topic {topic}"
    assert [line.split()[1] for line in lines] == [event.event for event in shown.events]
    assert f"group={group}" in lines[1] and "attempt=2" in lines[3]


def test_a_topic_that_opts_out_has_an_empty_trace_that_says_why(gateway):
    topic = unique("quiet")
    with Admin(gateway.url) as admin:
        admin.create_topic(topic, queues=1, attributes={"trace.enabled": "false"})
        with Producer(topic, url=gateway.url) as producer:
            msg_id = producer.send("hush").msg_id
        shown = admin.message_trace(msg_id)
    assert shown.events == [] and "trace.enabled=false" in (shown.note or "")
    unknown = command(gateway.url, "message", "trace", "0" * 24)
    run = subprocess.run(unknown, capture_output=True, text=True, timeout=60, env=environment())
    assert run.returncode == 1 and "no message" in run.stderr
