"""Push targets: how one delivery (`shared.models.PushDelivery`) reaches a group's target.

    lambda:<function>   invoked synchronously (InvocationType=RequestResponse) with the delivery as its event;
                        success unless the function raised (FunctionError) or Lambda refused the call
    http(s)://...       the delivery POSTed as JSON; success on any 2xx
    python:<mod>:<fn>   imported in the delivering process and called with the delivery as a JSON-like dict;
                        success unless it raises (locally; in AWS the module must ship with the push function)

Every target gets the same JSON document. A call that fails (an error, a non-2xx, a timeout after
`push_target_timeout_s`) raises `TargetFailed`; push delivery then retries it. How a target is written is
`shared.push_target`; `check_target` is what setting a subscription checks.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import boto3
import httpx
from botocore.config import Config

from shared.models import PushDelivery
from shared.push_target import PushTargetKind, push_target_kind
from tidemq_store.aws import aws_region
from tidemq_store.errors import InvalidArgument

Target = Callable[[PushDelivery], None]
ERROR_TEXT_LIMIT = 300  # characters of a target's error kept in logs and dead-letter properties


class TargetFailed(Exception):
    """A push target did not accept a delivery; the message says how it failed."""


def check_target(target: str) -> None:
    """Raise InvalidArgument if `target` cannot work at all: it is not written as a push target
    (`shared.push_target`), or it is a Python target whose module does not import or whose attribute is not
    callable. (Hosts and functions are only reached when delivering.)"""
    if push_target_kind(target) is PushTargetKind.PYTHON:
        _python_callable(target)


def target_caller(target: str, timeout_s: float) -> Target:
    """A function that delivers to `target`, raising TargetFailed when the target does not accept."""
    kind = push_target_kind(target)
    if kind is PushTargetKind.LAMBDA:
        function = target.removeprefix("lambda:")
        return lambda delivery: _invoke_lambda(lambda_client(timeout_s), function, delivery)
    if kind is PushTargetKind.HTTP:
        return lambda delivery: _post(_http_client(timeout_s), target, delivery)
    call = _python_callable(target)
    return lambda delivery: _call_python(call, delivery)


def _short(text: str) -> str:
    return text if len(text) <= ERROR_TEXT_LIMIT else text[: ERROR_TEXT_LIMIT - 3] + "..."


def _python_callable(target: str) -> Callable[[dict[str, Any]], Any]:
    _, module_name, attribute = target.split(":")
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


@cache
def _http_client(timeout_s: float) -> httpx.Client:
    return httpx.Client(timeout=timeout_s, headers={"user-agent": "tidemq-push"})


def _post(client: httpx.Client, url: str, delivery: PushDelivery) -> None:
    try:
        response = client.post(url, content=delivery.model_dump_json(), headers={"content-type": "application/json"})
    except httpx.HTTPError as error:
        raise TargetFailed(_short(f"POST {url}: {type(error).__name__}: {error}")) from error
    if not response.is_success:
        raise TargetFailed(_short(f"POST {url}: HTTP {response.status_code} {response.text.strip()}"))


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
    except Exception as error:  # botocore's ClientError, connection and read-timeout errors alike
        raise TargetFailed(_short(f"invoke {function}: {error}")) from error
    if response.get("FunctionError"):
        payload = response["Payload"].read().decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError):  # Lambda's {"errorMessage": ...}, else as it is
            payload = json.loads(payload).get("errorMessage", payload)
        raise TargetFailed(_short(f"{function} raised ({response['FunctionError']}): {payload}"))
