"""How a push target is written: its three forms, and the check of a target's syntax.

    lambda:<function name or ARN>[:<version or alias>]   a Lambda function, invoked synchronously
    http(s)://<host>[:<port>]/<path>                     a webhook, POSTed JSON
    python:<module>:<callable>                           imported and called in the delivering process

The store engine keeps a group's target as the string it was given; this grammar is checked where a
subscription is set: by the API's model of a subscription (`shared.models.PushSubscription`, a 422 naming
the field) and by the subscription logic (`functions.logic.subscriptions.set_push`). It lives here, beside the
API models, because those models are also the SDK's, and the SDK imports no server code. Delivering to a
target is `functions.logic.targets`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import urlsplit

from tidemq_store.errors import InvalidArgument


class PushTargetKind(StrEnum):
    """Where push delivery sends a group's messages (the target's prefix or URL scheme)."""

    LAMBDA = "lambda"  # lambda:<function name or ARN>[:<qualifier>], invoked synchronously
    HTTP = "http"  # http(s)://... a webhook, POSTed JSON
    PYTHON = "python"  # python:<module>:<callable>, imported and called in the delivering process


_LAMBDA_FUNCTION = re.compile(
    r"(arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:)?[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?"
)
_DOTTED = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*"
_PYTHON_TARGET = re.compile(rf"{_DOTTED}:{_DOTTED}")
TARGET_FORMS = "lambda:<function name or ARN>, http(s)://<webhook URL> or python:<module>:<callable>"


def push_target_kind(target: str) -> PushTargetKind:
    """The kind of a push target, or InvalidArgument saying what is wrong with it (syntax only: whether a
    function, host or module exists is learned when delivering)."""
    scheme, _, rest = target.partition(":")
    if scheme == "lambda":
        if not _LAMBDA_FUNCTION.fullmatch(rest):
            raise InvalidArgument(
                f"target {target!r}: after 'lambda:' give a function name (letters, digits, - and _, at most 64), "
                "a function ARN, optionally with ':<version or alias>'"
            )
        return PushTargetKind.LAMBDA
    if scheme in ("http", "https"):
        parts = urlsplit(target)
        if not parts.hostname or any(c.isspace() for c in target):
            raise InvalidArgument(f"target {target!r} is not a webhook URL: expected {scheme}://host[:port]/path")
        return PushTargetKind.HTTP
    if scheme == "python":
        if not _PYTHON_TARGET.fullmatch(rest):
            raise InvalidArgument(
                f"target {target!r}: after 'python:' give <module>:<callable>, e.g. python:app.hooks:on_message"
            )
        return PushTargetKind.PYTHON
    raise InvalidArgument(f"target {target!r} is not a push target: use {TARGET_FORMS}")


def checked_push_target(target: str) -> str:
    """`target` if it is written as a push target, else InvalidArgument (a ValueError: pydantic reports it
    as a validation error of the field)."""
    push_target_kind(target)
    return target
