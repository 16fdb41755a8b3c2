"""Push targets: which ones a process allows (`TargetRules`), and how one delivery
(`tidemq_protocol.api.push.PushDelivery`) reaches a group's target.

    lambda:<function>   invoked synchronously (InvocationType=RequestResponse) with the delivery as its event;
                        success unless the function raised (FunctionError) or Lambda refused the call
    http(s)://...       the delivery POSTed as JSON, signed (`tidemq_protocol.push_signature`), to an allowed address
                        (`functions.logic.webhooks`); success on any 2xx
    python:<mod>:<fn>   only a target on the operator's allow-list (`TIDEMQ_PUSH_PYTHON_TARGETS`, exact
                        `module:callable` entries): imported in the delivering process and called with the
                        delivery as a JSON-like dict; success unless it raises (locally; in AWS the module must
                        ship with the push function)

Python targets run the server's own code with the server's rights, so what may be named is the operator's
choice, never a caller's: a target not on the list is refused before anything is imported (importing a module
runs it), and one that names a private or dunder name is not even written as a target (`tidemq_protocol.push_target`).

Every target gets the same JSON document. A call that fails (an error, a non-2xx, a timeout after
`push_target_timeout_s`) raises `TargetFailed` with a short reason (a status or an error's kind, never what a
webhook or function answered); push delivery then retries it. `check_target` is what setting a subscription
checks, `ping_webhook` the call it makes to a webhook.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from shared.settings import Settings
from tidemq_protocol.api.push import PushDelivery, PushPing
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.push_signature import EVENT_HEADER, SIGNATURE_HEADER, push_signature
from tidemq_protocol.push_target import PushTargetKind, push_target_kind, python_target_name, shown_target
from tidemq_store.aws import aws_region
from tidemq_store.model import PushSubscription

from . import webhooks
from .webhooks import WebhookFailed, WebhookRules

Target = Callable[[PushDelivery], None]
ERROR_TEXT_LIMIT = 300  # characters of a Python target's error kept in logs and dead-letter properties
PYTHON_TARGETS = "TIDEMQ_PUSH_PYTHON_TARGETS"


class TargetFailed(Exception):
    """A push target did not accept a delivery; the message says how it failed, briefly."""


@dataclass(frozen=True, slots=True)
class TargetRules:
    """What this process allows push targets to be: the Python targets on the operator's allow-list, and the
    addresses webhooks may reach (with the longest wait for a call)."""

    python_targets: frozenset[str]
    webhooks: WebhookRules

    @classmethod
    def of(cls, settings: Settings) -> TargetRules:
        """The rules `settings` give, the platform's own endpoints as this process knows them now (make them
        once the store is open: it may have started the embedded AWS endpoint)."""
        own = webhooks.platform_endpoints(settings.host, settings.port)
        rules = WebhookRules.of(settings.push_allowed_hosts, own, settings.push_target_timeout_s)
        return cls(settings.push_python_targets, rules)

    @property
    def timeout_s(self) -> float:
        return self.webhooks.timeout_s


def check_target(target: str, rules: TargetRules) -> PushTargetKind:
    """The kind of `target`, or InvalidArgument if it cannot be used at all: it is not written as a push
    target (`tidemq_protocol.push_target`), or it is a Python target not on the allow-list, or whose module does not
    import or whose attribute is not callable. (Webhooks are checked by `ping_webhook`; Lambda functions are
    only reached when delivering.)"""
    kind = push_target_kind(target)
    if kind is PushTargetKind.PYTHON:
        _python_callable(target, rules)
    return kind


def ping_webhook(target: str, ping: PushPing, secret: str, rules: TargetRules) -> None:
    """Call the webhook `target` once, signed with `secret`, as a subscription to it is set; InvalidArgument
    saying why if it cannot be reached (an address not allowed, no HTTP answer) or answers with a redirect.
    Any other answer will do: the receiver cannot know the secret yet."""
    try:
        webhooks.call(rules.webhooks, target, *_signed(ping.model_dump_json().encode(), secret, "ping"))
    except WebhookFailed as failed:
        raise InvalidArgument(f"webhook {shown_target(target)}: {failed}") from None


def target_caller(subscription: PushSubscription, rules: TargetRules) -> Target:
    """A function that delivers to the subscription's target, raising TargetFailed when it does not accept (a
    Python target that is not allowed, or does not import, fails every call)."""
    target = subscription.target
    kind = push_target_kind(target)
    if kind is PushTargetKind.LAMBDA:
        function = target.removeprefix("lambda:")
        return lambda delivery: _invoke_lambda(lambda_client(rules.timeout_s), function, delivery)
    if kind is PushTargetKind.HTTP:
        secret = subscription.signing_secret
        return lambda delivery: _post(rules.webhooks, target, delivery, secret)
    try:
        call = _python_callable(target, rules)
    except InvalidArgument as refused:
        reason = str(refused)

        def refuse(delivery: PushDelivery) -> None:
            raise TargetFailed(reason)

        return refuse
    return lambda delivery: _call_python(call, delivery)


def _short(text: str) -> str:
    return text if len(text) <= ERROR_TEXT_LIMIT else text[: ERROR_TEXT_LIMIT - 3] + "..."


def _python_callable(target: str, rules: TargetRules) -> Callable[[dict[str, Any]], Any]:
    name = python_target_name(target)
    if name not in rules.python_targets:  # before anything is imported: importing runs the module
        raise InvalidArgument(
            f"target {target!r} is not an allowed Python target: the operator lists those in {PYTHON_TARGETS}"
        )
    module_name, _, attribute = name.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as error:  # whatever the module raises while importing
        raise InvalidArgument(f"target {target!r}: module {module_name!r} does not import: {error}") from None
    for part in attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise InvalidArgument(f"target {target!r}: module {module_name!r} has no {attribute!r}")
    if not callable(found):
        raise InvalidArgument(f"target {target!r}: {attribute!r} is a {type(found).__name__}, not a callable")
    return found


def _call_python(call: Callable[[dict[str, Any]], Any], delivery: PushDelivery) -> None:
    try:
        call(delivery.model_dump(mode="json"))
    except Exception as error:
        raise TargetFailed(_short(f"{type(error).__name__}: {error}")) from error


def _signed(body: bytes, secret: str | None, event: str) -> tuple[bytes, dict[str, str]]:
    headers = {"content-type": "application/json", "user-agent": "tidemq-push", EVENT_HEADER: event}
    if secret is not None:  # a subscription set before deliveries were signed has none until it is set again
        headers[SIGNATURE_HEADER] = push_signature(secret, body)
    return body, headers


def _post(rules: WebhookRules, url: str, delivery: PushDelivery, secret: str | None) -> None:
    try:
        webhooks.post(rules, url, *_signed(delivery.model_dump_json().encode(), secret, "delivery"))
    except WebhookFailed as failed:
        raise TargetFailed(str(failed)) from None


@cache
def lambda_client(read_timeout_s: float = 60.0):
    """A Lambda client (region from the environment, else us-east-1; endpoint from AWS_ENDPOINT_URL_LAMBDA or
    AWS_ENDPOINT_URL when set). `read_timeout_s` bounds a synchronous invoke; botocore's standard retries cover
    throttling and network errors."""
    config = Config(read_timeout=read_timeout_s, retries={"mode": "standard"})
    return boto3.session.Session().client("lambda", region_name=aws_region(), config=config)


def _invoke_lambda(client, function: str, delivery: PushDelivery) -> None:
    try:
        response = client.invoke(
            FunctionName=function, InvocationType="RequestResponse", Payload=delivery.model_dump_json().encode()
        )
    except ClientError as error:  # Lambda refused the call: its error code says why (never its message)
        raise TargetFailed(f"invoke {function}: {error.response['Error'].get('Code', 'refused')}") from error
    except Exception as error:  # connection and read-timeout errors
        raise TargetFailed(f"invoke {function}: {type(error).__name__}") from error
    if response.get("FunctionError"):
        kind = response["FunctionError"]
        with contextlib.suppress(ValueError, AttributeError):  # Lambda's {"errorType": ...}; never its message
            kind = json.loads(response["Payload"].read()).get("errorType") or kind
        raise TargetFailed(_short(f"{function} raised {kind}"))
