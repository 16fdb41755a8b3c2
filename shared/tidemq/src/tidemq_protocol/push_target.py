"""How a push target is written: its three forms, the check of a target's syntax, and how a target is shown.

    lambda:<function name or ARN>[:<version or alias>]   a Lambda function, invoked synchronously
    http(s)://[<user>:<password>@]<host>[:<port>]/<path> a webhook, POSTed signed JSON
    python:<module>:<callable>                           imported and called in the delivering process

A Python target names no private or dunder name (no part of the module or the callable starts with `_`): a
target like `python:functions.store:_store.close` is malformed before anything else is asked. Which targets
may be used at all (an operator's allow-list for Python targets, the addresses a webhook may reach) is the
server's to decide when a subscription is set and when it delivers: `functions.logic.targets`.

The store engine keeps a group's target as the string it was given; this grammar is checked where a
subscription is set: by the API's model of a subscription (`tidemq_protocol.api.groups.PushSubscription`, a 422 naming
the field) and by the subscription logic (`functions.logic.subscriptions.set_push`). It lives here, beside the
API models, because those models are also the SDK's, and the SDK imports no server code.

`shown_target` is a target as it may be shown or logged: a webhook URL's credentials (its user and password,
every query value, a fragment) are replaced by `***`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import urlsplit, urlunsplit

from tidemq_protocol.errors import InvalidArgument


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
_PRIVATE = re.compile(r"(^|[.:])_")  # a part of the module or callable that starts with "_" (private, dunder)
REDACTED = "***"
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
        if not _is_webhook_url(target):
            raise InvalidArgument(f"target {target!r} is not a webhook URL: expected {scheme}://host[:port]/path")
        return PushTargetKind.HTTP
    if scheme == "python":
        if not _PYTHON_TARGET.fullmatch(rest):
            raise InvalidArgument(
                f"target {target!r}: after 'python:' give <module>:<callable>, e.g. python:app.hooks:on_message"
            )
        if _PRIVATE.search(rest):
            raise InvalidArgument(
                f"target {target!r} names a private or dunder name (starting with '_'): never a target"
            )
        return PushTargetKind.PYTHON
    raise InvalidArgument(f"target {target!r} is not a push target: use {TARGET_FORMS}")


def _is_webhook_url(target: str) -> bool:
    parts = urlsplit(target)
    try:
        parts.port  # noqa: B018 (raises for a port that is not a number from 0 to 65535)
    except ValueError:
        return False
    return bool(parts.hostname) and not any(c.isspace() for c in target)


def python_target_name(target: str) -> str:
    """`<module>:<callable>` of a Python target (what an operator's allow-list names)."""
    return target.removeprefix("python:")


def shown_target(target: str) -> str:
    """`target` as it may be shown or logged: a webhook URL with `***` for its user and password, each query
    value and its fragment; other targets as they are."""
    scheme, _, _ = target.partition(":")
    if scheme not in ("http", "https"):
        return target
    parts = urlsplit(target)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(f"{field.partition('=')[0]}={REDACTED}" for field in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, REDACTED if parts.fragment else ""))


def checked_push_target(target: str) -> str:
    """`target` if it is written as a push target, else InvalidArgument (a ValueError: pydantic reports it
    as a validation error of the field)."""
    push_target_kind(target)
    return target
