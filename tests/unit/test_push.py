"""Push subscriptions validate their targets and policy; retry waits grow exponentially, capped, with jitter;
the push function's invocations in one execution environment merge their retries and queue one continuation
per topic."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from functions.logic.push import backoff_ms, dead_letter_topic
from functions.logic.push_invocations import PushEnvironment
from functions.logic.targets import check_target
from shared.models import GroupPush, PendingRetry, PushEvent, PushSubscription
from shared.push_target import PushTargetKind, push_target_kind
from tidemq_store import GroupConfig, model
from tidemq_store.errors import InvalidArgument

TARGET_KINDS = [
    ("lambda:billing-consumer", PushTargetKind.LAMBDA),
    ("lambda:billing-consumer:live", PushTargetKind.LAMBDA),
    ("lambda:arn:aws:lambda:eu-west-1:123456789012:function:billing", PushTargetKind.LAMBDA),
    ("https://billing.example.com/hooks/orders", PushTargetKind.HTTP),
    ("http://127.0.0.1:9000/hook?token=x", PushTargetKind.HTTP),
    ("python:app.hooks:on_message", PushTargetKind.PYTHON),
]
MALFORMED_TARGETS = [
    ("ftp://files.example.com", "is not a push target: use lambda:"),
    ("billing-consumer", "is not a push target"),
    ("", "is not a push target"),
    ("lambda:", "give a function name"),
    ("lambda:bad name", "give a function name"),
    ("https://", "is not a webhook URL"),
    ("python:app.hooks", "give <module>:<callable>"),
]


@pytest.mark.parametrize(("target", "kind"), TARGET_KINDS)
def test_each_target_form_is_recognised_and_accepted_by_the_api(target, kind):
    assert push_target_kind(target) is kind
    assert PushSubscription(topic="orders", target=target).target == target


@pytest.mark.parametrize(("target", "says"), MALFORMED_TARGETS)
def test_a_malformed_target_is_refused_by_the_api_and_the_logic_saying_what_is_expected(target, says):
    with pytest.raises(ValidationError, match=says):
        PushSubscription(topic="orders", target=target)
    with pytest.raises(InvalidArgument, match=says):
        check_target(target)


def test_the_store_keeps_a_target_as_given_and_only_refuses_an_empty_one():
    assert model.PushSubscription(topic="orders", target="ftp://files.example.com").target == "ftp://files.example.com"
    with pytest.raises(ValidationError, match="at least 1 character"):
        model.PushSubscription(topic="orders", target="")


def test_policy_fields_are_checked():
    with pytest.raises(ValidationError, match="tag filter"):
        PushSubscription(topic="orders", target="http://h/", tag="a ||")
    with pytest.raises(ValidationError, match="max_attempts"):
        PushSubscription(topic="orders", target="http://h/", max_attempts=0)


def test_a_group_config_with_a_subscription_survives_json_and_shows_through_the_api():
    config = GroupConfig(name="billing", push=model.PushSubscription(topic="orders", target="lambda:f", batch_size=10))
    assert GroupConfig.model_validate_json(config.model_dump_json()) == config
    assert GroupConfig.model_validate_json('{"name": "old", "attributes": {}, "created_at": 1}').push is None
    stored = GroupConfig.model_validate_json(config.model_dump_json()).push
    shown = GroupPush(group="billing", push=stored, dead_letter_topic=dead_letter_topic("billing")).push
    assert shown is not None and shown.model_dump() == stored.model_dump()


def test_retry_waits_double_up_to_the_limit_with_the_upper_half_random():
    policy = PushSubscription(topic="orders", target="http://h/", backoff_base_ms=1000, backoff_max_ms=5000)
    lowest = [backoff_ms(policy, attempts, rand=lambda: 0.0) for attempts in range(1, 6)]
    highest = [backoff_ms(policy, attempts, rand=lambda: 1.0) for attempts in range(1, 6)]
    assert lowest == [500, 1000, 2000, 2500, 2500]
    assert highest == [1000, 2000, 4000, 5000, 5000]
    assert backoff_ms(policy, 10_000, rand=lambda: 1.0) == 5000  # no overflow at absurd counts


def test_a_limit_below_the_base_is_every_wait():
    policy = PushSubscription(topic="orders", target="http://h/", backoff_base_ms=10_000, backoff_max_ms=3000)
    assert [backoff_ms(policy, attempts, rand=lambda: 1.0) for attempts in range(1, 4)] == [3000, 3000, 3000]


def test_dead_letter_topic_follows_rocketmq():
    assert dead_letter_topic("billing") == "%DLQ%billing"


# ---- one execution environment of the push function -----------------------------------------------


def retry(group: str, queue: int, offset: int, attempts: int) -> PendingRetry:
    return PendingRetry(group=group, queue=queue, offset=offset, attempts=attempts, due_ms=1_000 * attempts)


def test_an_event_s_retries_join_the_environment_s_the_one_further_on_winning_for_each_queue():
    environment = PushEnvironment()
    environment.begin(
        PushEvent(
            topic="orders", retries=[retry("billing", 0, 5, 2), retry("billing", 1, 7, 1), retry("billing", 2, 3, 4)]
        ),
        [],
    )
    event = PushEvent(
        topic="orders",
        retries=[
            retry("billing", 0, 5, 3),  # the same batch, more attempts: wins
            retry("billing", 1, 6, 9),  # an earlier offset: an old batch, loses whatever its attempts
            retry("billing", 2, 4, 1),  # a later offset: a newer batch, wins
        ],
    )
    environment.begin(event, [])
    queues = environment.retries["billing"]
    assert {queue: (p.offset, p.attempts) for queue, p in queues.items()} == {0: (5, 3), 1: (7, 1), 2: (4, 1)}


def test_an_invocation_delivers_its_groups_and_every_group_its_event_has_retries_for():
    event = PushEvent(topic="orders", retries=[retry("shipping", 0, 1, 1)])
    assert PushEnvironment().begin(event, ["billing"]) == ["billing", "shipping"]


def test_a_continuation_is_queued_once_per_topic_until_it_arrives():
    environment = PushEnvironment()
    environment.retries["billing"] = {0: retry("billing", 0, 5, 2)}
    environment.retries["audit"] = {0: retry("audit", 0, 9, 1)}
    first = environment.continue_later("orders", ["billing"], not_before_ms=42_000)
    assert first == PushEvent(topic="orders", not_before_ms=42_000, retries=[retry("billing", 0, 5, 2)], continues=True)
    assert environment.continue_later("orders", ["billing"], None) is None  # one is queued already
    assert environment.continue_later("payments", ["billing"], None) is not None  # per topic
    environment.begin(PushEvent(topic="orders", retries=first.retries), [])  # not the continuation: still queued
    assert environment.continue_later("orders", ["billing"], None) is None
    environment.begin(first, [])  # it arrived
    assert environment.continue_later("orders", ["billing"], None) is not None
