"""Errors the SDK raises: the classes client and server share (`tidemq_protocol.errors`), rebuilt from the API's
error bodies.

A 4xx body names the class that caused it (`{"error": "TopicNotFound", "message": ...}`), so
callers catch the same `tidemq_protocol.errors` classes whether they use the store in process or over
HTTP. A 422 (the request broke the schema) becomes `InvalidArgument` with the offending `fields`.
Everything else is an `ApiError`; a server that cannot be reached is a `ServerUnreachable`.
"""

from __future__ import annotations

import http.client
import json
import re
from typing import Any, Protocol

from tidemq_protocol.errors import ClientError, InvalidArgument, TideMQError


class ApiError(TideMQError):
    """An error response the engine's classes do not cover (an unknown route, a 415, a 5xx)."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class ServerUnreachable(ApiError):
    """No HTTP answer at all: connection refused, name not resolved, timed out (after retries)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(None, f"cannot reach {url}: {reason}")
        self.url, self.reason = url, reason


def _client_errors(cls: type[ClientError]) -> dict[str, type[ClientError]]:
    found = {cls.__name__: cls}
    for subclass in cls.__subclasses__():
        found |= _client_errors(subclass)
    return found


ENGINE_ERRORS = _client_errors(ClientError)
"""Engine exception classes by name, as the API's error bodies name them."""


class HttpAnswer(Protocol):
    """What an error response is read through (`tidemq.client.Response`, or an httpx response in tools)."""

    status_code: int
    reason_phrase: str

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


FINAL_STATUSES = frozenset({507})
"""5xx answers that retrying cannot change: a broker past its disk quota (DiskQuotaExceeded) stays so for a while."""


def error_from_response(response: HttpAnswer) -> TideMQError:
    """The exception an error response stands for, carrying the server's message."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        return ApiError(response.status_code, response.text.strip() or response.reason_phrase)
    message = str(body.get("message") or response.reason_phrase)
    if response.status_code == 422:
        return _schema_error(body.get("detail") or [], message)
    cls = ENGINE_ERRORS.get(str(body.get("error")))
    if cls is None or (response.status_code >= 500 and response.status_code not in FINAL_STATUSES):
        return ApiError(response.status_code, message)
    # The engine classes build their message from their arguments; keep the server's message as it is.
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    for name, value in body.items():  # e.g. OffsetOutOfRange's min_offset and max_offset
        if name not in ("error", "message"):
            setattr(error, name, value)
    return error


def _schema_error(detail: list[dict], fallback: str) -> InvalidArgument:
    """A 422 as InvalidArgument: `fields` maps each offending field ("name", "offset") to what is wrong with it."""
    fields: dict[str, str] = {}
    for problem in detail:
        location = [str(part) for part in problem.get("loc", [])]
        if location and location[0] in ("body", "query", "path"):
            location = location[1:]  # where the field was sent is not what is wrong with it
        fields[".".join(location) or "request"] = str(problem.get("msg", "")).removeprefix("Value error, ")
    message = "; ".join(f"{field}: {why}" for field, why in fields.items()) or fallback
    error = InvalidArgument(message)
    error.fields = fields
    return error


def transport_reason(error: OSError | http.client.HTTPException) -> str:
    """A short, lower-case reason for a failed connection: "[Errno 111] Connection refused" -> "connection refused"."""
    if isinstance(error, TimeoutError):
        return "timed out"
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(error)) or type(error).__name__
    return text[:1].lower() + text[1:]
