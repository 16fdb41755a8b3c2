"""Push delivery in process, over a real store (embedded, and serverless on a moto server): what the produce and
subscription logic tell their notifier, the local push worker, the push function's delivery within an
invocation's time, and its notifier's asynchronous invokes; Python targets that record or fail their calls,
only those on the allow-list; commits that respect a reset made mid-delivery, and a deleted group that stays
deleted."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from functions.logic import groups, produce, subscriptions, targets
from functions.logic.push import dead_letter_topic
from functions.logic.push_invocations import InvocationTime, PushEnvironment
from functions.logic.push_retries import PushRetries
from functions.logic.targets import TargetRules
from functions.logic.webhooks import WebhookRules
from functions.push import trigger
from functions.push.subscribers import Subscribers
from functions.push.worker import PushWorker
from shared.settings import get_settings
from tests import push_targets
from tests.local_lambda import LocalLambda
from tests.push_targets import wait_for
from tidemq_protocol.api.groups import OffsetReset
from tidemq_protocol.api.messages import MessageIn
from tidemq_protocol.api.push import PushEvent
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import GroupNotFound, InvalidArgument, OffsetConflict, TopicNotFound
from tidemq_protocol.message import Message
from tidemq_protocol.push import PushSpec
from tidemq_protocol.retry import ExponentialBackoff, RetryPolicy
from tidemq_store import GroupConfig, MessageStore, StoreConfig, TopicConfig, open_store
from tidemq_store.model import PushSubscription
from tidemq_store.serverless.store import ServerlessMessageStore

FAST = ExponentialBackoff(initial_ms=5, multiplier=2, max_ms=20)  # retries within milliseconds
DEFAULTS = get_settings().retry_policy
ALLOWED = frozenset(push_targets.ALLOWED["TIDEMQ_PUSH_PYTHON_TARGETS"].split(","))
RULES = TargetRules(
    ALLOWED | {"tests.no_such_module:call", "tests.push_targets:FLAKY_FAILURES", "tests.push_targets:nothing"},
    WebhookRules(),
)
"""What the subscription logic allows here: the test targets, and three that are allowed but do not work."""
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
    for name, value in push_targets.ALLOWED.items():  # what the process's push worker allows
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
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
    get_settings.cache_clear()
    store.close()


@pytest.fixture
def counted(store) -> CountingStore:
    return CountingStore(store)


@pytest.fixture
def worker(counted) -> PushWorker:
    """The process's push worker, reading the store through `counted`."""
    return trigger.start_worker(counted)


class Notices:
    """A push notifier that writes down what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, ...]] = []

    def messages_stored(self, topic: str) -> None:
        self.told.append(("messages stored", topic))

    def subscription_changed(self, group: str, topic: str | None) -> None:
        self.told.append(("subscription changed", group, str(topic)))


def retrying(store: MessageStore, attempts: int, backoff: Any = FAST) -> None:
    """Give `billing` a retry policy of `attempts` deliveries, waiting `backoff` between them."""
    store.update_group(
        store.get_group("billing").model_copy(
            update={"retry": RetryPolicy(max_delivery_attempts=attempts, backoff=backoff)}
        )
    )


def push_to(
    store: MessageStore, target: str, notifier: Any = None, attempts: int | None = None, **options: Any
) -> None:
    """Subscribe `billing` to `orders` (retrying `attempts` times, FAST, if given), telling `notifier` (default: the
    process's, as the admin handler does)."""
    if attempts is not None:
        retrying(store, attempts)
    subscription = PushSpec(topic="orders", target=f"python:tests.push_targets:{target}", **options)
    subscriptions.set_push(store, "billing", subscription, notifier or trigger.push_notifier(), RULES)


def send(store: MessageStore, *bodies: str, queue: int = 0, notifier: Any = None, **fields: Any) -> list[str]:
    """Produce through the produce logic, telling `notifier` (default: the process's, as the produce handler
    does); the messages' ids."""
    messages = [MessageIn(body=b, queue=queue, **fields) for b in bodies]
    response = produce.produce_json(store, "orders", messages, notifier or trigger.push_notifier())
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
    push_to(store, "reject", attempts=3)
    first, second = send(store, "m1", "m2", queue=1, keys=["order-7"], tag="created", properties={"origin": "shop"})
    letters = wait_for(lambda: len(dead_letters(store)) == 2 and dead_letters(store), "two dead letters")
    assert dict(push_targets.calls) == {"m1": 3, "m2": 3}
    calls = [(d["messages"][0]["body"], d["attempt"]) for d in push_targets.deliveries]
    assert calls == [("m1", 1), ("m1", 2), ("m1", 3), ("m2", 1), ("m2", 2), ("m2", 3)]  # the queue waits for its head
    assert [m.body for m in letters] == [b"m1", b"m2"]
    assert letters[0].keys == ("order-7",) and letters[0].tag == "created"
    assert letters[0].properties == {
        "origin": "shop",
        "ORIGIN_MESSAGE_ID": first,
        "RETRY_TOPIC": "orders",
        "ORIGIN_QUEUE_ID": "1",
        "ORIGIN_QUEUE_OFFSET": "0",
        "RECONSUME_TIME": "3",
        "DLQ_REASON": "RuntimeError: the target is down",
    }
    assert letters[1].properties["ORIGIN_MESSAGE_ID"] == second
    wait_for(lambda: not worker.busy, "the worker to finish")  # it commits just after putting the dead letters
    assert store.committed_offsets("billing", "orders") == {1: 2}  # moved past them
    assert dict(push_targets.calls) == {"m1": 3, "m2": 3}  # and never called again


def test_a_target_failing_twice_then_succeeding_receives_the_message_and_nothing_is_dead_lettered(store, worker):
    push_to(store, "flaky", attempts=5)
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
    assert sorted(b for _, _, b, _ in received) == sorted(
        [f"q0-{n}" for n in range(1, 10, 2)] + [f"q1-{n}" for n in range(10)]
    )
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
    subscriptions.clear_push(store, "billing", trigger.push_notifier())
    send(store, "not-pushed")
    wait_for(lambda: not worker.busy, "the worker to finish")
    assert list(push_targets.calls) == ["pushed"]
    assert store.get_group("billing").push is None
    assert store.committed_offsets("billing", "orders") == {0: 1}


BAD_SUBSCRIPTIONS = [
    ("nobody", {}, GroupNotFound, "'nobody' does not exist"),
    ("billing", {"topic": "missing"}, TopicNotFound, "'missing' does not exist"),
    ("billing", {"target": "python:tests.push_side_effect:call"}, InvalidArgument, "not an allowed Python target"),
    ("billing", {"target": "python:builtins:print"}, InvalidArgument, "not an allowed Python target"),
    ("billing", {"target": "python:tests.push_targets:_record"}, InvalidArgument, "private or dunder name"),
    ("billing", {"target": "python:tests.no_such_module:call"}, InvalidArgument, "does not import"),
    ("billing", {"target": "python:tests.push_targets:FLAKY_FAILURES"}, InvalidArgument, "not a callable"),
    ("billing", {"target": "python:tests.push_targets:nothing"}, InvalidArgument, "has no 'nothing'"),
    ("billing", {"topic": "%DLQ%billing"}, InvalidArgument, "its own dead-letter topic"),
    ("g" * 125, {}, InvalidArgument, "dead-letter topic name is 130 characters long"),
]


def test_a_bad_subscription_is_refused_saying_why_and_changes_nothing(store):
    store.create_topic(TopicConfig(name="%DLQ%billing", queues=1))
    store.create_group(GroupConfig(name="g" * 125))
    notices = Notices()
    for group, change, error, says in BAD_SUBSCRIPTIONS:
        fields = {"topic": "orders", "target": "python:tests.push_targets:accept", **change}
        with pytest.raises(error, match=says):
            subscriptions.set_push(store, group, PushSpec(**fields), notices, RULES)
    assert [g.push for g in store.list_groups()] == [None, None]
    assert notices.told == []
    assert "tests.push_side_effect" not in sys.modules  # refused before anything was imported


# ---- what the logic tells its notifier, and the process's notifier ----------------------------------------


def test_a_produce_tells_its_notifier_the_topic_has_new_messages_once_they_are_stored(store):
    stored_when_told = []

    class Checking(Notices):
        def messages_stored(self, topic: str) -> None:
            stored_when_told.append(lag(store))  # nobody consumed: the lag counts the stored messages
            super().messages_stored(topic)

    notices = Checking()
    send(store, "a", "b", notifier=notices)
    assert notices.told == [("messages stored", "orders")] and stored_when_told == [2]


def test_setting_and_clearing_a_subscription_tells_the_notifier_and_clearing_none_tells_nothing(store):
    notices = Notices()
    push_to(store, "accept", notices)
    subscriptions.clear_push(store, "billing", notices)
    subscriptions.clear_push(store, "billing", notices)  # it pushes no more: nothing changes
    assert notices.told == [("subscription changed", "billing", "orders"), ("subscription changed", "billing", "None")]


def test_a_local_process_without_a_worker_tells_nobody_and_its_started_worker_delivers(store, counted):
    assert trigger.push_notifier() is trigger.NO_DELIVERY
    push_to(store, "accept")
    send(store, "while-nobody-delivers")
    assert push_targets.deliveries == []
    worker = trigger.start_worker(counted)
    assert trigger.push_notifier() is worker
    send(store, "with-a-worker")
    wait_for(lambda: lag(store) == 0, "lag 0")
    trigger.stop_worker()
    assert trigger.push_notifier() is trigger.NO_DELIVERY
    assert sorted(push_targets.calls) == ["while-nobody-delivers", "with-a-worker"]


def test_the_push_function_notifier_invokes_it_asynchronously_only_for_topics_somebody_pushes_from(
    store, local_aws, monkeypatch
):
    with LocalLambda({"tidemq-push": lambda event, context: None}) as service:
        for name, value in {**local_aws.env, "AWS_ENDPOINT_URL_LAMBDA": service.url}.items():
            monkeypatch.setenv(name, value)
        targets.lambda_client.cache_clear()
        try:
            notifier = trigger.PushFunctionNotifier(store, Subscribers(ttl_s=60))
            send(store, "nobody-pushes-yet", notifier=notifier)
            before = now_ms()
            push_to(store, "accept", notifier)
            send(store, "somebody-pushes", notifier=notifier)
            subscriptions.clear_push(store, "billing", notifier)
            send(store, "nobody-pushes-again", notifier=notifier)
            events = service.events("tidemq-push")
        finally:
            targets.lambda_client.cache_clear()
    assert events[:2] == [
        {"topic": "orders", "group": "billing"},  # deliver what the group has waiting, then
        {"topic": "orders", "group": "billing", "not_before_ms": events[1]["not_before_ms"]},
    ]
    assert events[1]["not_before_ms"] >= before + 60_000  # once more when every process has seen the change
    assert events[2:] == [{"topic": "orders"}]
    assert [kind for _, kind, _ in service.invocations] == ["Event"] * 3


# ---- the push function's delivery within an invocation's time ----------------------------------------------


def invocation(calls_for_s: float) -> InvocationTime:
    """An invocation's time in which target calls (of at most 0.1 s) may start for `calls_for_s` from now."""
    return InvocationTime(deadline_ms=now_ms() + int(calls_for_s * 1000) + 100, target_timeout_s=0.1)


def test_an_invocation_waits_for_a_retry_due_within_its_time_and_delivers_until_caught_up(store):
    push_to(store, "flaky", Notices(), attempts=5)
    send(store, "once", notifier=Notices())
    done = PushEnvironment().deliver(
        store, PushEvent(topic="orders"), ["billing"], invocation(60), Notices(), RULES, DEFAULTS
    )
    assert (done.report.delivered, done.report.failed_calls, done.continued) == (1, 2, False)
    assert [d["attempt"] for d in push_targets.deliveries] == [1, 2, 3]
    assert lag(store) == 0


def test_a_retry_due_after_the_invocation_s_time_goes_on_in_a_continuation_that_keeps_counting_attempts(store):
    retrying(store, 2, ExponentialBackoff(initial_ms=60_000, multiplier=2, max_ms=60_000))
    push_to(store, "reject", Notices())
    send(store, "doomed", notifier=Notices())
    environment = PushEnvironment()
    done = environment.deliver(
        store, PushEvent(topic="orders"), ["billing"], invocation(1.5), Notices(), RULES, DEFAULTS
    )
    assert (done.report.failed_calls, done.continued) == (1, True)
    continuation = done.continuation
    assert continuation is not None and continuation.continues and continuation.topic == "orders"
    [pending] = store.pop_ledger.read("billing", "orders", 0).entries  # the retry is in the store
    assert (pending.offset, pending.attempt) == (0, 1)
    assert continuation.not_before_ms == pending.visible_at_ms  # it starts when the retry is due
    assert environment.continue_later("orders", None) is None  # it is queued: no second one

    # The continuation reaches a new execution environment once the retry is due (made due now, in the store): the
    # second call is attempt 2, the last, so the message is dead-lettered and the notifier told.
    retry_due_now(store, "billing", "orders", 0)
    notices = Notices()
    due_now = continuation.model_copy(update={"not_before_ms": None})
    done = PushEnvironment().deliver(store, due_now, ["billing"], invocation(60), notices, RULES, DEFAULTS)
    assert (done.report.dead_lettered, done.continued) == (1, False)
    assert [d["attempt"] for d in push_targets.deliveries] == [1, 2]
    assert notices.told == [("messages stored", "%DLQ%billing")]
    assert dead_letters(store)[0].properties["RECONSUME_TIME"] == "2"
    assert store.pop_ledger.read("billing", "orders", 0).entries == ()  # and the retry is gone


def retry_due_now(store: MessageStore, group: str, topic: str, queue: int) -> None:
    """Make the queue's pending push retry due now, as if its time had come (tests do not sleep through backoffs)."""
    retries = PushRetries(store.pop_ledger, group, topic)
    pending = retries.pending(queue)
    assert pending is not None
    retries.record(queue, pending.offset, pending.attempts, now_ms())


def test_an_invocation_out_of_time_before_a_call_hands_everything_over(store):
    push_to(store, "accept", Notices())
    send(store, "later", notifier=Notices())
    environment = PushEnvironment()
    done = environment.deliver(
        store, PushEvent(topic="orders"), ["billing"], invocation(-1), Notices(), RULES, DEFAULTS
    )
    assert done.continued and done.continuation == PushEvent(topic="orders", continues=True)
    assert push_targets.deliveries == []


def test_an_invocation_forgets_a_group_that_no_longer_pushes_from_its_topic(store):
    push_to(store, "accept", Notices())
    send(store, "not-pushed", notifier=Notices())
    subscriptions.clear_push(store, "billing", Notices())
    event = PushEvent(topic="orders", continues=True)
    done = PushEnvironment().deliver(store, event, ["billing"], invocation(60), Notices(), RULES, DEFAULTS)
    assert (done.report.delivered, done.continued) == (0, False)
    assert push_targets.deliveries == []


def test_a_stored_python_target_no_longer_allowed_is_never_imported_and_its_messages_are_dead_lettered(store):
    # A subscription the allow-list no longer names (stored before it changed): delivery refuses each call.
    retrying(store, 2)
    stored = PushSubscription(topic="orders", target="python:tests.push_side_effect:call")
    store.update_group(store.get_group("billing").model_copy(update={"push": stored}))
    send(store, "never-imported")
    trigger.start_worker(store)
    [letter] = wait_for(lambda: dead_letters(store), "a dead letter")
    assert letter.properties["DLQ_REASON"] == (
        "target 'python:tests.push_side_effect:call' is not an allowed Python target: "
        "the operator lists those in TIDEMQ_PUSH_PYTHON_TARGETS"
    )
    assert "tests.push_side_effect" not in sys.modules


# ---- commits that respect resets, and a deleted group that stays deleted ----------------------------------------


def test_a_compare_and_set_commit_is_made_only_from_the_offset_expected_and_a_refused_one_changes_nothing(store):
    send(store, "a", "b", "c", notifier=Notices())
    store.commit_offsets("billing", "orders", {0: 1}, expected={0: None})  # none committed yet: as expected
    with pytest.raises(OffsetConflict, match="has committed offset 1 on orders:0, not the none expected") as moved:
        store.commit_offsets("billing", "orders", {0: 3}, expected={0: None})
    assert (moved.value.queue, moved.value.expected, moved.value.actual) == (0, None, 1)
    store.commit_offsets("billing", "orders", {0: 2}, expected={0: 1})
    with pytest.raises(OffsetConflict) as moved:
        store.commit_offsets("billing", "orders", {0: 3, 1: 0}, expected={0: 1, 1: None})
    assert (moved.value.expected, moved.value.actual) == (1, 2)
    assert store.committed_offsets("billing", "orders") == {0: 2}  # neither queue of the refused commit changed
    store.commit_offsets("billing", "orders", {0: 3, 1: 0}, expected={0: 2, 1: None})
    assert store.committed_offsets("billing", "orders") == {0: 3, 1: 0}


def test_a_store_with_a_cold_tier_commits_with_the_same_compare_and_set(tmp_path):
    with open_store(StoreConfig(home=tmp_path / "tiered", tier="posix")) as tiered:
        tiered.create_topic(TopicConfig(name="orders", queues=1))
        tiered.create_group(GroupConfig(name="billing"))
        tiered.put("orders", [Message(b"a", queue=0), Message(b"b", queue=0)])
        tiered.commit_offsets("billing", "orders", {0: 2}, expected={0: None})
        with pytest.raises(OffsetConflict):
            tiered.commit_offsets("billing", "orders", {0: 1}, expected={0: None})
        assert tiered.committed_offsets("billing", "orders") == {0: 2}


def reset(store: MessageStore, to: str) -> None:
    """Reset `billing` on `orders` as the admin API does."""
    groups.reset_offsets(store, "billing", OffsetReset(topic="orders", to=to))


def test_a_reset_to_earliest_in_the_middle_of_a_delivery_is_replayed(store, worker):
    def reset_at_m2(delivery: dict[str, Any]) -> None:
        if delivery["messages"][0]["body"] == "m2" and push_targets.calls["m2"] == 1:
            reset(store, "earliest")  # while the call delivering m2 is in progress

    push_targets.hook = reset_at_m2
    push_to(store, "hooked")
    send(store, *(f"m{n}" for n in range(5)))
    wait_for(lambda: lag(store) == 0 and not worker.busy, "delivery to finish")
    bodies = [d["messages"][0]["body"] for d in push_targets.deliveries]
    assert bodies == ["m0", "m1", "m2", "m0", "m1", "m2", "m3", "m4"]  # replayed from the start, in order
    assert store.committed_offsets("billing", "orders") == {0: 5, 1: 0}


def test_a_reset_to_latest_in_the_middle_of_a_delivery_skips_the_rest(store, worker):
    def reset_at_m2(delivery: dict[str, Any]) -> None:
        if delivery["messages"][0]["body"] == "m2":
            reset(store, "latest")  # skip what m2 is stuck in front of

    push_targets.hook = reset_at_m2
    push_to(store, "hooked")
    send(store, *(f"m{n}" for n in range(5)))
    wait_for(lambda: lag(store) == 0 and not worker.busy, "delivery to finish")
    send(store, "after")
    wait_for(lambda: lag(store) == 0 and not worker.busy, "delivery of what came after")
    assert [d["messages"][0]["body"] for d in push_targets.deliveries] == ["m0", "m1", "m2", "after"]
    assert store.committed_offsets("billing", "orders") == {0: 6, 1: 0}


AFTER_DELETION = 20
"""Writes a racer still tries once the deletion returned (each must be refused: the group stays deleted)."""


def race_deletion(store: MessageStore, name: str) -> list[str]:
    """Delete group `name` while threads commit offsets for it (on each queue) and set its subscription as fast
    as they can, each until refused; what each thread ended with."""
    config = store.get_group(name)
    pushing = config.model_copy(update={"push": PushSubscription(topic="orders", target="lambda:f")})
    outcomes: list[str] = []
    deleted = threading.Event()

    def race(write) -> None:
        started.wait()
        try:
            while not deleted.is_set():
                write()
            for _ in range(AFTER_DELETION):
                write()
            outcomes.append("went on writing after the deletion")
        except GroupNotFound:
            outcomes.append("refused")

    writes = [lambda: store.update_group(pushing)]
    writes += [partial(store.commit_offsets, name, "orders", {queue: 1}) for queue in (0, 0, 1, 1)]
    started = threading.Barrier(len(writes) + 1)
    racers = [threading.Thread(target=race, args=(write,)) for write in writes]
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can: the race is run, not left to chance
    try:
        for racer in racers:
            racer.start()
        started.wait()
        store.delete_group(name)
        deleted.set()
        for racer in racers:
            racer.join()
    finally:
        sys.setswitchinterval(switch_interval)
    return outcomes


def test_a_deleted_group_stays_deleted_whatever_commits_and_subscription_changes_race_its_deletion(store):
    send(store, "a", queue=0, notifier=Notices())
    send(store, "b", queue=1, notifier=Notices())
    for round_ in range(8 if isinstance(store, ServerlessMessageStore) else 40):
        name = f"racer-{round_}"
        store.create_group(GroupConfig(name=name))
        assert race_deletion(store, name) == ["refused"] * 5
        with pytest.raises(GroupNotFound):
            store.get_group(name)
        store.create_group(GroupConfig(name=name))  # the same name again: a new group, nothing of the old one
        assert (store.get_group(name).push, store.committed_offsets(name, "orders")) == (None, {})
