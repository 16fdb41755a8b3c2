"""Every route has a sample event in events/, and each is served by its handler as Lambda invokes it; so are
the push function's and the maintenance function's (not HTTP events: no routeKey)."""

from __future__ import annotations

import json
from pathlib import Path

import pybase64
import pytest

from functions import store as store_module
from functions.api.auth import secret_box
from functions.api.binary import LOCAL_API_ID
from functions.logic import console_series, pop, subscriptions, users
from functions.logic.push import dead_letter
from functions.logic.targets import TargetRules
from functions.maintenance import handler as maintenance_function
from functions.push import handler as push_function
from functions.push import trigger
from functions.routes import handler_for, routes
from servers.adapter import LocalContext
from servers.stream import stream_routes
from shared.settings import get_settings
from tests import push_targets
from tidemq_protocol import codec
from tidemq_protocol.acl import AclEntry, UserType
from tidemq_protocol.api.users import UserSpec
from tidemq_protocol.kv import NamespaceConfig
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.push import PushSpec
from tidemq_protocol.record import TIMER_DELAY_MS
from tidemq_store import GroupConfig, TopicConfig
from tidemq_store.model import PushSubscription

EVENTS = Path(__file__).parents[2] / "events"
SAMPLES = {path: json.loads(path.read_text()) for path in sorted(EVENTS.glob("*.json"))}
HTTP_SAMPLES = [path for path, event in SAMPLES.items() if "routeKey" in event]
PUSH_SAMPLE = EVENTS / "push_topic.json"
MAINTENANCE_SAMPLES = [
    EVENTS / "maintenance_retention.json",
    EVENTS / "maintenance_scheduled.json",
    EVENTS / "maintenance_transactions.json",
]
TIMERS_SAMPLE = EVENTS / "maintenance_timers.json"
CONSOLE_JOB_SAMPLE = EVENTS / "maintenance_console.json"
CONSOLE_ANSWERS = {"GET /console": 303, "POST /console/{proxy+}": 401}
"""What the console answers a sample without a session: the overview sends the browser to log in; a change (here a
topic's creation) is refused, changing nothing. Its other sample is the login page (a 200)."""


@pytest.fixture
def seeded_store(tmp_path, monkeypatch):
    """The state the sample events refer to: topic `orders`, group `billing` (pushed to a Python target) and group
    `workers` (which pops: a group does not pop the topic it pushes), message `order-1001` (and a dead letter of it,
    as if billing had failed it), KV namespace `settings` holding `feature/dark-mode` at version 1, super user
    `operator` (whom the samples' Lambda authorizer vouches for, as API Gateway passes it on) and user
    `retired-service`; DELAY topic `reminders`; TRANSACTION topic `transfers` with a half message of producer group
    `checkout`."""
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("TIDEMQ_PUSH_TARGET_TIMEOUT_S", "5")  # the push function's 30 s must fit a call
    monkeypatch.setenv("TIDEMQ_PUSH_PYTHON_TARGETS", push_targets.ALLOWED["TIDEMQ_PUSH_PYTHON_TARGETS"])
    get_settings.cache_clear()
    store = store_module.get_store()
    store.create_topic(TopicConfig(name="orders", queues=4))
    store.create_group(
        GroupConfig(name="billing", push=PushSubscription(topic="orders", target="python:tests.push_targets:accept"))
    )
    store.create_group(GroupConfig(name="workers"))
    store.create_topic(TopicConfig(name="reminders", queues=1, message_type=MessageType.DELAY))
    first = store.put("orders", [Message(b"order 1001 created", keys=("order-1001",), tag="created")])[0]
    dead_letter(store, "billing", store.get("orders", first.queue, first.queue_offset, 1).messages, 16, "failed")
    store.kv.create_namespace(NamespaceConfig("settings"))
    store.kv.put("settings", "feature/dark-mode", b"on")  # version 1
    users.create_user(store, secret_box(), UserSpec(name="operator", user_type=UserType.SUPER))
    orders = AclEntry(resource="Topic:orders", actions=["Pub"])
    users.create_user(store, secret_box(), UserSpec(name="retired-service", policies=[orders]))
    store.create_topic(TopicConfig(name="transfers", queues=2, message_type=MessageType.TRANSACTION))
    store.transactions.prepare("transfers", Message(b"transfer 76 sent"), "checkout", 0)
    yield first.msg_id
    store_module.close_store()
    trigger.subscribers.cache_clear()
    get_settings.cache_clear()


SERVED = (*routes(), *stream_routes())
"""The API's routes and the long-running servers' own (a stream's opening: servers/stream.py)."""


def test_every_route_has_a_sample_event():
    sampled = {SAMPLES[path]["routeKey"] for path in HTTP_SAMPLES}
    assert sorted(r.route_key for r in SERVED if r.route_key not in sampled) == []


def test_every_sample_event_is_an_http_event_or_the_push_or_maintenance_functions():
    expected = [PUSH_SAMPLE, *MAINTENANCE_SAMPLES, TIMERS_SAMPLE, CONSOLE_JOB_SAMPLE]
    assert sorted(set(SAMPLES) - set(HTTP_SAMPLES)) == sorted(expected)


@pytest.mark.parametrize("path", HTTP_SAMPLES, ids=lambda p: p.stem)
def test_sample_event_is_served_by_its_handler(seeded_store, path):
    event = SAMPLES[path]
    if "{msg_id}" in event["routeKey"]:
        half = store_module.get_store().transactions.list("transfers", None, None, 1)[0].msg_id
        seeded = half if "/transactions/" in event["routeKey"] else seeded_store
        assert event["pathParameters"]["msg_id"] == seeded, "the seed no longer yields the sample's id"
    if "{receipt_handle}" in (event.get("body") or ""):  # a pop sample names a delivery: one made for it
        (held,) = pop.receive(store_module.get_store(), get_settings(), "workers", "orders", 1, None, 0, None)
        event = {**event, "body": event["body"].replace("{receipt_handle}", held.receipt_handle)}
    if "{recall_handle}" in (event.get("body") or ""):  # a recall sample names a delay message: one sent for it
        (sent,) = store_module.get_store().put("reminders", [Message(b"later", properties={TIMER_DELAY_MS: "60000"})])
        event = {**event, "body": event["body"].replace("{recall_handle}", sent.recall_handle)}
    route = next(r for r in SERVED if r.route_key == event["routeKey"])
    response = route.handler(event, LocalContext(f"tidemq-{route.function}"))
    if route.route_key in CONSOLE_ANSWERS:
        assert response["statusCode"] == CONSOLE_ANSWERS[route.route_key], response
        assert "orders-archive" not in [t.name for t in store_module.get_store().list_topics()]
        return
    assert 200 <= response["statusCode"] < 300, response


def test_push_sample_event_delivers_the_topic_to_its_push_groups(seeded_store):
    subscriptions.set_push(
        store_module.get_store(),
        "billing",
        PushSpec(topic="orders", target="python:tests.push_targets:accept"),
        trigger.push_notifier(),
        TargetRules.of(get_settings()),
    )
    push_targets.reset()
    result = push_function.lambda_handler(SAMPLES[PUSH_SAMPLE], LocalContext("tidemq-push"))
    assert result == {"topic": "orders", "delivered": 1, "failed_calls": 0, "dead_lettered": 0, "continued": False}
    assert [m["msg_id"] for d in push_targets.deliveries for m in d["messages"]] == [seeded_store]
    assert store_module.get_store().committed_offsets("billing", "orders") == {0: 1}


def test_maintenance_sample_events_run_their_jobs(seeded_store):
    """On the embedded engine (which does its own periodic work) a run reports `skipped`; retention runs."""
    retention, scheduled, transactions = (SAMPLES[path] for path in MAINTENANCE_SAMPLES)
    assert maintenance_function.lambda_handler(scheduled, LocalContext("tidemq-maintenance")) == {
        "job": "upload",
        "skipped": True,
        "queues": 0,
        "messages_uploaded": 0,
        "files_deleted": 0,
        "failed": [],
        "upload_lag_seconds": 0.0,
    }
    assert maintenance_function.lambda_handler(retention, LocalContext("tidemq-maintenance")) == {
        "job": "retention",
        "segments_deleted": 0,
        "messages_expired": 0,
    }
    assert maintenance_function.lambda_handler(transactions, LocalContext("tidemq-maintenance")) == {
        "job": "transactions",
        "checks_opened": 1,  # the seed's half message: its first check was due at once
        "rolled_back": 0,
        "outcomes_pruned": 0,
    }


def test_the_timers_sample_event_moves_due_timer_messages(seeded_store):
    store = store_module.get_store()
    store.put("reminders", [Message(b"due", properties={TIMER_DELAY_MS: "0"})])  # due at once
    result = maintenance_function.lambda_handler(SAMPLES[TIMERS_SAMPLE], LocalContext("tidemq-maintenance"))
    assert result["job"] == "timers"  # the embedded engine's own mover may have been first: it moved it once
    assert store.queue_offsets("reminders")[0].max_offset == 1


def test_the_console_sample_event_keeps_a_sample_of_the_cluster_s_totals(seeded_store):
    result = maintenance_function.lambda_handler(SAMPLES[CONSOLE_JOB_SAMPLE], LocalContext("tidemq-maintenance"))
    assert (result["job"], result["topics"], result["groups"], result["stored"]) == ("console", 4, 2, 2)
    assert console_series.read_samples(store_module.get_store())[-1].at_ms == result["at_ms"]


def test_one_handler_serves_binary_bodies_base64_from_api_gateway_and_as_bytes_from_the_local_gateway(seeded_store):
    """Lambda events carry binary bodies base64-encoded both ways; the local gateway's events carry the bytes
    (functions/api/binary.py). The same produce and consume handlers serve both."""
    records = codec.encode_records("orders", [Message(b"records in", 2, ("order-2001",), "created")])
    produce = SAMPLES[EVENTS / "produce_batch.json"]
    produce = produce | {"headers": produce["headers"] | {"content-type": codec.RECORDS_CONTENT_TYPE}}
    from_lambda = produce | {"body": pybase64.b64encode(records).decode()}
    local_context = produce["requestContext"] | {"apiId": LOCAL_API_ID}
    from_local = produce | {"body": records, "isBase64Encoded": False, "requestContext": local_context}
    handler = handler_for("produce")
    stored = [handler(event, LocalContext("tidemq-produce"))["body"].split() for event in (from_lambda, from_local)]
    assert [(queue, offset) for _, queue, offset in stored] == [("2", "0"), ("2", "1")]

    consume = SAMPLES[EVENTS / "consume_batch.json"]
    consume = consume | {"pathParameters": {"topic": "orders", "queue": "2"}, "rawQueryString": "offset=0"}
    consume |= {"queryStringParameters": {"offset": "0"}, "rawPath": "/v1/topics/orders/queues/2/batch"}
    handler = handler_for("consume")
    lambda_reply = handler(consume, LocalContext("tidemq-consume"))
    assert lambda_reply["isBase64Encoded"] is True
    local_event = consume | {"requestContext": consume["requestContext"] | {"apiId": LOCAL_API_ID}}
    local_reply = handler(local_event, LocalContext("tidemq-consume"))
    assert isinstance(local_reply["body"], memoryview)
    assert bytes(local_reply["body"]) == pybase64.b64decode(lambda_reply["body"])
    messages, next_offset, _, _ = codec.decode_consume(bytes(local_reply["body"]))
    assert [m.body for m in messages] == [b"records in", b"records in"] and next_offset == 2
