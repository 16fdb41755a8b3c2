"""Push subscriptions validate their targets and policy; only allowed targets can be used (Python targets on
the operator's list, checked before anything is imported; webhooks at public addresses or allowed hosts, never
the platform's own endpoints); targets are shown without credentials or secrets; deliveries are signed and a
receiver can verify them; a subscription stored with retry fields of its own loads with them as its group's retry
policy; the push function's invocations in one execution environment queue one continuation per topic."""

from __future__ import annotations

import sys

import pytest
from pydantic import ValidationError

from functions.logic.push import DLQ_REASON, ORIGIN_MESSAGE_ID, dead_letter_topic, letter
from functions.logic.push_invocations import PushEnvironment
from functions.logic.targets import TargetRules, check_target
from functions.logic.webhooks import WebhookRefused, WebhookRules
from shared.settings import Settings
from tidemq_protocol.api.groups import GroupView, PushSubscription
from tidemq_protocol.api.push import GroupPush, PushEvent, PushSubscribed
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.push_signature import InvalidPushSignature, push_signature, verify_push_signature
from tidemq_protocol.push_target import PushTargetKind, push_target_kind, shown_target
from tidemq_protocol.record import MAX_PROPERTIES, MAX_PROPERTIES_BYTES, encode_properties
from tidemq_protocol.retry import ExponentialBackoff, RetryPolicy
from tidemq_store import GroupConfig, model

ALLOWED = frozenset({"tests.push_targets:accept", "tests.no_such_module:call", "tests.push_targets:FLAKY_FAILURES"})
RULES = TargetRules(ALLOWED, WebhookRules())

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
    ("http://host:99999/hook", "is not a webhook URL"),
    ("python:tests.push_targets:_record", "private or dunder name"),
    ("python:functions.store:_store.close", "private or dunder name"),
    ("python:tests.push_targets:accept.__globals__", "private or dunder name"),
    ("python:os:__dict__", "private or dunder name"),
    ("python:tests._private:call", "private or dunder name"),
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
        check_target(target, RULES)


def test_a_python_target_not_on_the_allow_list_is_refused_before_its_module_is_imported():
    # importing tests.push_side_effect raises: a check that imported it would say "does not import"
    with pytest.raises(InvalidArgument, match="is not an allowed Python target: the operator lists those in"):
        check_target("python:tests.push_side_effect:call", RULES)
    with pytest.raises(InvalidArgument, match="not an allowed Python target"):
        check_target("python:builtins:print", RULES)
    assert "tests.push_side_effect" not in sys.modules


def test_an_allowed_python_target_must_import_and_be_callable():
    assert check_target("python:tests.push_targets:accept", RULES) is PushTargetKind.PYTHON
    with pytest.raises(InvalidArgument, match=r"module 'tests\.no_such_module' does not import"):
        check_target("python:tests.no_such_module:call", RULES)
    with pytest.raises(InvalidArgument, match="'FLAKY_FAILURES' is a int, not a callable"):
        check_target("python:tests.push_targets:FLAKY_FAILURES", RULES)


def test_the_allow_lists_are_comma_separated_settings_and_a_private_python_target_is_refused_at_start(monkeypatch):
    monkeypatch.setenv("TIDEMQ_PUSH_PYTHON_TARGETS", "app.hooks:on_order, app.hooks:on_refund")
    monkeypatch.setenv("TIDEMQ_PUSH_ALLOWED_HOSTS", "127.0.0.1,hooks.internal, 10.1.0.0/16")
    settings = Settings()
    assert settings.push_python_targets == {"app.hooks:on_order", "app.hooks:on_refund"}
    assert settings.push_allowed_hosts == {"127.0.0.1", "hooks.internal", "10.1.0.0/16"}
    monkeypatch.setenv("TIDEMQ_PUSH_PYTHON_TARGETS", "os:_exit")
    with pytest.raises(ValidationError, match="private or dunder name"):
        Settings()


# ---- which addresses a webhook may reach ------------------------------------------------------------------

NOT_PUBLIC = [
    ("127.0.0.1", "a loopback address"),
    ("127.0.0.2", "a loopback address"),
    ("::1", "a loopback address"),
    ("::ffff:127.0.0.1", "a loopback address"),
    ("10.0.0.1", "a private address"),
    ("172.16.5.4", "a private address"),
    ("192.168.1.1", "a private address"),
    ("fd00::1", "a private address"),
    ("169.254.169.254", "a link-local address"),
    ("fe80::1", "a link-local address"),
    ("224.0.0.1", "a multicast address"),
    ("ff02::1", "a multicast address"),
    ("0.0.0.0", "the unspecified address"),
    ("100.64.0.1", "a reserved address"),
    ("240.0.0.1", "a reserved address"),
]


@pytest.mark.parametrize(("host", "kind"), NOT_PUBLIC)
def test_a_webhook_host_that_is_not_public_is_refused_saying_which_kind(host, kind):
    with pytest.raises(WebhookRefused, match=f"resolves to {kind}; .* unless the operator allows the host in"):
        WebhookRules().addresses(host, 80)


def test_public_addresses_and_the_operator_s_allowed_hosts_and_networks_are_reached():
    rules = WebhookRules.of(["127.0.0.1", "10.1.0.0/16", "Hooks.Internal"], [], 1.0)
    assert [str(a) for a in rules.addresses("93.184.216.34", 443)] == ["93.184.216.34"]
    assert [str(a) for a in rules.addresses("2606:4700::1111", 443)] == ["2606:4700::1111"]
    assert [str(a) for a in rules.addresses("127.0.0.1", 9000)] == ["127.0.0.1"]
    assert [str(a) for a in rules.addresses("10.1.200.3", 80)] == ["10.1.200.3"]
    with pytest.raises(WebhookRefused, match="a private address"):
        rules.addresses("10.2.0.1", 80)  # outside the allowed network
    with pytest.raises(WebhookRefused, match="a loopback address"):
        rules.addresses("127.0.0.2", 80)  # 127.0.0.1 allows that address, not all of loopback


def test_the_platform_s_own_endpoints_are_refused_even_when_their_host_is_allowed():
    rules = WebhookRules.of(["127.0.0.1"], ["127.0.0.1:8080", "localhost:4566", "0.0.0.0:9001"], 1.0)
    for host, port in [("127.0.0.1", 8080), ("127.0.0.1", 4566), ("127.0.0.1", 9001), ("0.0.0.0", 8080)]:
        with pytest.raises(WebhookRefused, match="the platform's own endpoint"):
            rules.addresses(host, port)
    assert [str(a) for a in rules.addresses("127.0.0.1", 9000)] == ["127.0.0.1"]


def test_a_host_that_does_not_resolve_is_refused():
    with pytest.raises(WebhookRefused, match="does not resolve"):
        WebhookRules().addresses("no-such-host.invalid", 80)


# ---- how a subscription is shown, and signed deliveries ---------------------------------------------------


def test_credentials_in_a_webhook_url_are_redacted_wherever_it_is_shown():
    url = "https://billing:pa55@hooks.example.com:8443/orders?token=t0ken&v=2#frag"
    assert shown_target(url) == "https://***@hooks.example.com:8443/orders?token=***&v=***#***"
    assert shown_target("https://hooks.example.com/orders") == "https://hooks.example.com/orders"
    assert shown_target("lambda:billing") == "lambda:billing"
    record = model.PushSubscription(topic="orders", target=url, signing_secret="s3cret")
    config = GroupConfig(name="billing", push=record, created_at=1)
    for shown in (
        GroupView(**config.model_dump()).model_dump_json(),
        GroupPush(group="billing", push=record, dead_letter_topic="%DLQ%billing").model_dump_json(),
    ):
        assert "pa55" not in shown and "t0ken" not in shown and "s3cret" not in shown and "signing_secret" not in shown
        assert "https://***@hooks.example.com:8443/orders?token=***" in shown
    answer = PushSubscribed(group="billing", push=record, dead_letter_topic="%DLQ%billing", signing_secret="s3cret")
    assert answer.signing_secret == "s3cret" and answer.push is not None and "pa55" not in answer.push.target
    assert "s3cret" not in repr(record)


def test_a_client_cannot_choose_the_signing_secret():
    with pytest.raises(ValidationError, match="signing_secret"):
        PushSubscription(topic="orders", target="https://h/", signing_secret="mine")


def test_a_receiver_verifies_a_signed_delivery_and_refuses_a_changed_one_another_secret_or_a_replay():
    body = b'{"group": "billing", "messages": []}'
    header = push_signature("s3cret", body, timestamp=1_700_000_000)
    assert header.startswith("t=1700000000,v1=")
    assert verify_push_signature(body, header, "s3cret", now=1_700_000_100) == 1_700_000_000
    refusals = [
        (body + b" ", header, "s3cret", 1_700_000_100, "does not match the body"),
        (body, header, "other", 1_700_000_100, "does not match the body"),
        (body, header, "s3cret", 1_700_000_400, "400 s old, more than the 300 s accepted"),
        (body, None, "s3cret", 1_700_000_100, "no X-TideMQ-Signature header"),
        (body, "v1=abc", "s3cret", 1_700_000_100, "no timestamp"),
        (body, "t=1700000000", "s3cret", 1_700_000_100, "no v1= signature"),
    ]
    for received, signature, secret, now, says in refusals:
        with pytest.raises(InvalidPushSignature, match=says):
            verify_push_signature(received, signature, secret, now=now)


def test_the_store_keeps_a_target_as_given_and_only_refuses_an_empty_one():
    assert model.PushSubscription(topic="orders", target="ftp://files.example.com").target == "ftp://files.example.com"
    with pytest.raises(ValidationError, match="at least 1 character"):
        model.PushSubscription(topic="orders", target="")


def test_policy_fields_are_checked():
    with pytest.raises(ValidationError, match="tag filter"):
        PushSubscription(topic="orders", target="http://h/", tag="a ||")
    for former in ("max_attempts", "backoff_base_ms", "backoff_max_ms"):  # the group's retry policy says now
        with pytest.raises(ValidationError, match=former):
            PushSubscription(topic="orders", target="http://h/", **{former: 3})


def test_a_group_config_with_a_subscription_survives_json_and_shows_through_the_api():
    config = GroupConfig(name="billing", push=model.PushSubscription(topic="orders", target="lambda:f", batch_size=10))
    assert GroupConfig.model_validate_json(config.model_dump_json()) == config
    assert GroupConfig.model_validate_json('{"name": "old", "attributes": {}, "created_at": 1}').push is None
    stored = GroupConfig.model_validate_json(config.model_dump_json()).push
    shown = GroupPush(group="billing", push=stored, dead_letter_topic=dead_letter_topic("billing")).push
    assert shown is not None and shown.model_dump() == stored.model_dump(exclude={"signing_secret"})


def test_a_group_stored_with_a_subscription_s_own_retry_fields_loads_with_them_as_its_retry_policy():
    push = {"topic": "orders", "target": "lambda:f", "tag": "*", "batch_size": 1, "signing_secret": None}
    legacy = {**push, "max_attempts": 3, "backoff_base_ms": 500, "backoff_max_ms": 4000}
    config = GroupConfig.model_validate({"name": "billing", "push": legacy, "created_at": 1})
    assert config.push == model.PushSubscription(**push)
    assert config.retry == RetryPolicy(
        max_delivery_attempts=3, backoff=ExponentialBackoff(initial_ms=500, multiplier=2, max_ms=4000)
    )
    assert [config.retry.delay_ms(attempt) for attempt in range(1, 6)] == [500, 1000, 2000, 4000, 4000]
    assert GroupConfig.model_validate_json(config.model_dump_json()) == config  # stored again: the new form
    own = RetryPolicy(max_delivery_attempts=5)  # a policy the group has wins over the subscription's former fields
    assert GroupConfig.model_validate({"name": "b", "push": legacy, "retry": own}).retry == own


def test_dead_letter_topic_follows_rocketmq():
    assert dead_letter_topic("billing") == "%DLQ%billing"


def stored(keys: tuple[str, ...], properties: dict[str, str]) -> StoredMessage:
    encode_properties(keys, "created", properties)  # a message the store took
    return StoredMessage("orders", 0, 7, "0" * 24, 1, 2, b"body", keys, "created", properties)


ORIGIN = {ORIGIN_MESSAGE_ID: "0" * 24, DLQ_REASON: "HTTP 500 Internal Server Error"}


@pytest.mark.parametrize(
    ("message", "left_out"),
    [
        (stored(("k",), {"p": "v"}), None),
        (stored(("k",), {f"p{i}": "v" for i in range(MAX_PROPERTIES)}), f"{len(ORIGIN)} of its properties"),
        (stored(("k",), {"big": "x" * (MAX_PROPERTIES_BYTES - 100)}), "1 of its properties"),
        (stored(("k" * (MAX_PROPERTIES_BYTES - 100),), {"p": "v"}), "its keys"),
    ],
    ids=["fits", "as many properties as a record holds", "as many bytes", "keys as big as a record holds"],
)
def test_a_dead_letter_always_fits_a_record_with_its_origin_and_says_what_was_left_out(message, left_out):
    dead = letter(message, ORIGIN)
    encode_properties(dead.keys, dead.tag, dead.properties)  # a record the store takes
    assert dead.body == message.body and dead.tag == message.tag
    assert dead.properties[ORIGIN_MESSAGE_ID] == message.msg_id
    if left_out is None:
        assert dead.properties == {**message.properties, **ORIGIN} and dead.keys == message.keys
    else:
        assert dead.properties[DLQ_REASON] == f"{ORIGIN[DLQ_REASON]} ({left_out} left out of this letter)"


# ---- one execution environment of the push function -----------------------------------------------


def test_a_continuation_is_queued_once_per_topic_until_it_arrives():
    environment = PushEnvironment()
    first = environment.continue_later("orders", not_before_ms=42_000)
    assert first == PushEvent(topic="orders", not_before_ms=42_000, continues=True)
    assert environment.continue_later("orders", None) is None  # one is queued already
    assert environment.continue_later("payments", None) is not None  # per topic
    environment.begin(PushEvent(topic="orders"), [])  # not the continuation: still queued
    assert environment.continue_later("orders", None) is None
    environment.begin(first, [])  # it arrived
    assert environment.continue_later("orders", None) is not None


def test_a_continuation_queued_by_an_earlier_version_with_its_retries_still_parses():
    retries = [{"group": "billing", "queue": 0, "offset": 5, "attempts": 2, "due_ms": 1}]
    assert PushEvent.model_validate({"topic": "orders", "retries": retries, "continues": True}) == PushEvent(
        topic="orders", continues=True
    )
