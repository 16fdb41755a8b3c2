"""Push delivery in process: the local push worker over a real store (embedded, and serverless on a moto
server), messages produced through the produce logic, Python targets that record or fail their calls."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from functions.logic import produce, subscriptions
from functions.logic.push import dead_letter_topic
from functions.push import trigger
from functions.push.worker import PushWorker
from shared.models import MessageIn
from tests import push_targets
from tests.push_targets import wait_for
from tidemq_store import GroupConfig, MessageStore, StoreConfig, TopicConfig, open_store
from tidemq_store.errors import GroupNotFound, InvalidArgument, TopicNotFound
from tidemq_store.model import PushSubscription

FAST = {"backoff_base_ms": 5, "backoff_max_ms": 20}  # retries within milliseconds
READS = ("get", "read_records", "queue_offsets", "committed_offsets", "get_group", "list_groups", "get_topic")


class CountingStore:
    """A real store, passed through, counting the calls that read from it."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if name not in READS:
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.reads += 1
            return attribute(*args, **kwargs)

        return counted


@pytest.fixture(params=["embedded", "serverless"])
def store(request, tmp_path, monkeypatch) -> Iterator[MessageStore]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    config = StoreConfig(home=tmp_path / "store")
    if request.param == "serverless":
        request.getfixturevalue("aws_env")
        config = StoreConfig(home=tmp_path / "store", backend="serverless", dynamodb_prefix=f"p{uuid.uuid4().hex[:8]}")
    store = open_store(config)
    store.create_topic(TopicConfig(name="orders", queues=2))
    store.create_group(GroupConfig(name="billing"))
    push_targets.reset()
    yield store
    trigger.stop_worker()
    trigger.subscribers.cache_clear()
    store.close()


@pytest.fixture
def counted(store) -> CountingStore:
    return CountingStore(store)


@pytest.fixture
def worker(counted) -> PushWorker:
    """The process's push worker, reading the store through `counted`."""
    return trigger.start_worker(counted)


def push_to(store: MessageStore, target: str, **options: Any) -> None:
    subscription = PushSubscription(topic="orders", target=f"python:tests.push_targets:{target}", **options)
    subscriptions.set_push(store, "billing", subscription)


def send(store: MessageStore, *bodies: str, queue: int = 0, **fields: Any) -> list[str]:
    """Produce through the produce logic (which tells push delivery); the messages' ids."""
    response = produce.produce_json(store, "orders", [MessageIn(body=b, queue=queue, **fields) for b in bodies])
    return [m.msg_id for m in response.messages]


def lag(store: MessageStore) -> int:
    committed = store.committed_offsets("billing", "orders")
    return sum(
        q.max_offset - max(committed.get(q.queue, q.min_offset), q.min_offset) for q in store.queue_offsets("orders")
    )


def dead_letters(store: MessageStore) -> list:
    try:
        return store.get(dead_letter_topic("billing"), 0, 0, max_messages=100).messages
    except TopicNotFound:
        return []


def test_a_failing_target_is_called_max_attempts_times_then_the_messages_land_in_the_dead_letter_topic(store, worker):
    push_to(store, "reject", max_attempts=3, **FAST)
    first, second = send(store, "m1", "m2", queue=1, keys=["order-7"], tag="created", properties={"origin": "shop"})
    letters = wait_for(lambda: len(dead_letters(store)) == 2 and dead_letters(store), "two dead letters")
    assert dict(push_targets.calls) == {"m1": 3, "m2": 3}
    calls = [(d["messages"][0]["body"], d["attempt"]) for d in push_targets.deliveries]
    assert calls == [("m1", 1), ("m1", 2), ("m1", 3), ("m2", 1), ("m2", 2), ("m2", 3)]  # the queue waits for its head
    assert [m.body for m in letters] == [b"m1", b"m2"]
    assert letters[0].keys == ("order-7",) and letters[0].tag == "created"
    assert letters[0].properties == {
        "origin": "shop", "ORIGIN_MESSAGE_ID": first, "RETRY_TOPIC": "orders", "ORIGIN_QUEUE_ID": "1",
        "ORIGIN_QUEUE_OFFSET": "0", "RECONSUME_TIME": "3", "DLQ_REASON": "RuntimeError: the target is down",
    }  # fmt: skip
    assert letters[1].properties["ORIGIN_MESSAGE_ID"] == second
    wait_for(lambda: not worker.busy, "the worker to finish")  # it commits just after putting the dead letters
    assert store.committed_offsets("billing", "orders") == {1: 2}  # moved past them
    assert dict(push_targets.calls) == {"m1": 3, "m2": 3}  # and never called again


def test_a_target_failing_twice_then_succeeding_receives_the_message_and_nothing_is_dead_lettered(store, worker):
    push_to(store, "flaky", max_attempts=5, **FAST)
    send(store, "once")
    wait_for(lambda: lag(store) == 0, "lag 0")
    assert [d["attempt"] for d in push_targets.deliveries] == [1, 2, 3]
    assert dead_letters(store) == []
    with pytest.raises(TopicNotFound):
        store.get_topic(dead_letter_topic("billing"))


def test_every_message_arrives_once_in_queue_order_in_batches_of_the_tag_filter_only(store, worker):
    push_to(store, "accept", batch_size=3, tag="paid || shipped")
    for n in range(10):
        send(store, f"q0-{n}", queue=0, tag="paid" if n % 2 else "new")
        send(store, f"q1-{n}", queue=1, tag="shipped")
    wait_for(lambda: lag(store) == 0, "lag 0")
    received = [(d["queue"], m["offset"], m["body"], m["tag"]) for d in push_targets.deliveries for m in d["messages"]]
    assert all(len(d["messages"]) <= 3 for d in push_targets.deliveries)
    assert sorted(b for _, _, b, _ in received) == sorted([f"q0-{n}" for n in range(1, 10, 2)] +
                                                          [f"q1-{n}" for n in range(10)])  # fmt: skip
    assert all(tag in ("paid", "shipped") for *_, tag in received)
    for queue in (0, 1):
        offsets = [offset for q, offset, _, _ in received if q == queue]
        assert offsets == sorted(set(offsets))  # in order, none twice


def test_an_idle_worker_reads_nothing_until_a_message_is_produced(store, counted, worker):
    push_to(store, "accept")
    send(store, "a", "b", queue=0)
    wait_for(lambda: lag(store) == 0 and not worker.busy, "delivery to finish")
    reads, runs = counted.reads, worker.runs
    time.sleep(1.0)  # an idle second: no produce, no retry due
    assert (counted.reads, worker.runs) == (reads, runs)
    send(store, "c", queue=1)
    wait_for(lambda: lag(store) == 0, "lag 0")
    assert counted.reads > reads and worker.runs == runs + 1
    assert sorted(push_targets.calls) == ["a", "b", "c"] and set(push_targets.calls.values()) == {1}


def test_a_starting_worker_catches_up_on_what_was_produced_while_it_was_down(store, counted):
    push_to(store, "accept")  # no worker yet: nothing is delivered
    send(store, "before-1", "before-2", queue=1)
    assert push_targets.deliveries == []
    worker = trigger.start_worker(counted)
    wait_for(lambda: lag(store) == 0 and not worker.busy, "catch-up")
    trigger.stop_worker()
    send(store, "while-down", queue=0)
    worker = trigger.start_worker(counted)
    wait_for(lambda: lag(store) == 0, "catch-up after a restart")
    assert dict(push_targets.calls) == {"before-1": 1, "before-2": 1, "while-down": 1}


def test_a_cleared_subscription_stops_delivery_and_keeps_the_offsets(store, worker):
    push_to(store, "accept")
    send(store, "pushed")
    wait_for(lambda: lag(store) == 0, "lag 0")
    subscriptions.clear_push(store, "billing")
    send(store, "not-pushed")
    wait_for(lambda: not worker.busy, "the worker to finish")
    assert list(push_targets.calls) == ["pushed"]
    assert store.get_group("billing").push is None
    assert store.committed_offsets("billing", "orders") == {0: 1}


BAD_SUBSCRIPTIONS = [
    ("nobody", {}, GroupNotFound, "'nobody' does not exist"),
    ("billing", {"topic": "missing"}, TopicNotFound, "'missing' does not exist"),
    ("billing", {"target": "python:tests.no_such_module:call"}, InvalidArgument, "does not import"),
    ("billing", {"target": "python:tests.push_targets:FLAKY_FAILURES"}, InvalidArgument, "not a callable"),
    ("billing", {"target": "python:tests.push_targets:nothing"}, InvalidArgument, "has no 'nothing'"),
    ("billing", {"topic": "%DLQ%billing"}, InvalidArgument, "its own dead-letter topic"),
    ("g" * 125, {}, InvalidArgument, "dead-letter topic name is 130 characters long"),
]


def test_a_bad_subscription_is_refused_saying_why_and_changes_nothing(store):
    store.create_topic(TopicConfig(name="%DLQ%billing", queues=1))
    store.create_group(GroupConfig(name="g" * 125))
    for group, change, error, says in BAD_SUBSCRIPTIONS:
        fields = {"topic": "orders", "target": "python:tests.push_targets:accept", **change}
        with pytest.raises(error, match=says):
            subscriptions.set_push(store, group, PushSubscription(**fields))
    assert [g.push for g in store.list_groups()] == [None, None]
