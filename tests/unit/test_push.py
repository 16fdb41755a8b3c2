"""Push subscriptions validate their targets and policy; retry waits grow exponentially, capped, with jitter."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from functions.logic.push import backoff_ms, dead_letter_topic
from tidemq_store import GroupConfig
from tidemq_store.model import PushSubscription, PushTargetKind


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("lambda:billing-consumer", PushTargetKind.LAMBDA),
        ("lambda:billing-consumer:live", PushTargetKind.LAMBDA),
        ("lambda:arn:aws:lambda:eu-west-1:123456789012:function:billing", PushTargetKind.LAMBDA),
        ("https://billing.example.com/hooks/orders", PushTargetKind.HTTP),
        ("http://127.0.0.1:9000/hook?token=x", PushTargetKind.HTTP),
        ("python:app.hooks:on_message", PushTargetKind.PYTHON),
    ],
)
def test_each_target_form_is_recognised(target, kind):
    assert PushSubscription(topic="orders", target=target).target_kind is kind


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("ftp://files.example.com", "is not a push target: use lambda:"),
        ("billing-consumer", "is not a push target"),
        ("lambda:", "give a function name"),
        ("lambda:bad name", "give a function name"),
        ("https://", "is not a webhook URL"),
        ("python:app.hooks", "give <module>:<callable>"),
    ],
)
def test_a_malformed_target_is_refused_saying_what_is_expected(target, says):
    with pytest.raises(ValidationError, match=says):
        PushSubscription(topic="orders", target=target)


def test_policy_fields_are_checked():
    with pytest.raises(ValidationError, match="tag filter"):
        PushSubscription(topic="orders", target="http://h/", tag="a ||")
    with pytest.raises(ValidationError, match="below backoff_base_ms"):
        PushSubscription(topic="orders", target="http://h/", backoff_base_ms=10, backoff_max_ms=5)
    with pytest.raises(ValidationError, match="max_attempts"):
        PushSubscription(topic="orders", target="http://h/", max_attempts=0)


def test_a_group_config_with_a_subscription_survives_json():
    config = GroupConfig(name="billing", push=PushSubscription(topic="orders", target="lambda:f", batch_size=10))
    assert GroupConfig.model_validate_json(config.model_dump_json()) == config
    assert GroupConfig.model_validate_json('{"name": "old", "attributes": {}, "created_at": 1}').push is None


def test_retry_waits_double_up_to_the_limit_with_the_upper_half_random():
    policy = PushSubscription(topic="orders", target="http://h/", backoff_base_ms=1000, backoff_max_ms=5000)
    lowest = [backoff_ms(policy, attempts, rand=lambda: 0.0) for attempts in range(1, 6)]
    highest = [backoff_ms(policy, attempts, rand=lambda: 1.0) for attempts in range(1, 6)]
    assert lowest == [500, 1000, 2000, 2500, 2500]
    assert highest == [1000, 2000, 4000, 5000, 5000]
    assert backoff_ms(policy, 10_000, rand=lambda: 1.0) == 5000  # no overflow at absurd counts


def test_dead_letter_topic_follows_rocketmq():
    assert dead_letter_topic("billing") == "%DLQ%billing"
