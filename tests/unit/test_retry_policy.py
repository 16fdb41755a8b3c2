"""A group's retry policy: its two kinds of backoff wait as RocketMQ's do, each bounded; the text the CLI and the
settings write them in parses to the same thing or says what is wrong; a policy's unset fields come from the
server's; JSON gives integers as integers and a backoff its kind."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from shared.settings import Settings
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.retry import ROCKETMQ_DELAYS_MS, CustomizedBackoff, ExponentialBackoff, RetryPolicy, parse_backoff


def test_an_exponential_backoff_multiplies_up_to_its_most_without_overflow():
    backoff = ExponentialBackoff(initial_ms=1000, multiplier=3, max_ms=20_000)
    assert [backoff.delay_ms(attempt) for attempt in range(1, 6)] == [1000, 3000, 9000, 20_000, 20_000]
    assert backoff.delay_ms(10**6) == 20_000
    assert ExponentialBackoff(initial_ms=10_000, max_ms=3000).delay_ms(1) == 3000  # a most below the first: every wait
    assert ExponentialBackoff(initial_ms=0).delay_ms(5) == 0


def test_a_customized_backoff_repeats_its_last_delay_and_rocketmq_s_is_the_default():
    backoff = CustomizedBackoff(delays_ms=(5, 50))
    assert [backoff.delay_ms(attempt) for attempt in (1, 2, 3, 99)] == [5, 50, 50, 50]
    assert CustomizedBackoff().delays_ms == ROCKETMQ_DELAYS_MS and ROCKETMQ_DELAYS_MS[-1] == 2 * 3_600_000
    assert Settings().retry_policy == RetryPolicy(max_delivery_attempts=16, backoff=CustomizedBackoff())


@pytest.mark.parametrize(
    ("text", "backoff"),
    [
        ("exponential:1s,2,5m", ExponentialBackoff(initial_ms=1000, multiplier=2, max_ms=300_000)),
        ("exponential:250ms,1.5,1h", ExponentialBackoff(initial_ms=250, multiplier=1.5, max_ms=3_600_000)),
        ("customized:1s,5s,10", CustomizedBackoff(delays_ms=(1000, 5000, 10))),
    ],
)
def test_a_backoff_written_as_text_parses_and_writes_back(text, backoff):
    assert parse_backoff(text) == backoff
    assert parse_backoff(backoff.text()) == backoff


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("linear:1s", "must be exponential:"),
        ("exponential:1s,2", "must be exponential:"),
        ("exponential:1s,x,5m", "multiplier 'x' is not a number"),
        ("exponential:1s,0.5,5m", "greater than or equal to 1"),
        ("customized:", "must be exponential:"),
        ("customized:1d", "'1d' is not a duration"),
        ("customized:25h", "less than or equal to 86400000"),
        ("customized:" + ",".join(["1s"] * 65), "at most 64"),
    ],
)
def test_a_bad_backoff_text_says_what_is_wrong(text, says):
    with pytest.raises(InvalidArgument, match=says):
        parse_backoff(text)
    with pytest.raises(ValidationError):
        Settings(retry_backoff=text)


def test_a_policy_s_unset_fields_come_from_the_defaults():
    defaults = RetryPolicy(max_delivery_attempts=16, backoff=CustomizedBackoff())
    partial = RetryPolicy(max_delivery_attempts=3).over(defaults)
    assert (partial.attempts, partial.delay_ms(1)) == (3, 1000)
    with pytest.raises(ValueError, match="no defaults applied"):
        RetryPolicy().delay_ms(1)


@pytest.mark.parametrize(
    "data",
    [
        {"max_delivery_attempts": "3"},
        {"max_delivery_attempts": True},
        {"max_delivery_attempts": 0},
        {"max_delivery_attempts": 1001},
        {"backoff": {"initial_ms": 5}},  # no kind
        {"backoff": {"kind": "customized", "delays_ms": ["5"]}},
        {"backoff": {"kind": "exponential", "multiplier": "2"}},
        {"backoff": {"kind": "exponential", "tries": 2}},
    ],
)
def test_json_that_is_not_a_policy_is_refused(data):
    with pytest.raises(ValidationError):
        RetryPolicy.model_validate_json(json.dumps(data))
