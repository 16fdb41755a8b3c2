"""What a request body may be before any route reads it: at most `TIDEMQ_MAX_REQUEST_BYTES` (6 MiB by default,
Lambda's own payload limit: 413), and where JSON is expected, UTF-8 (never replaced: 400) nested at most
`MAX_JSON_DEPTH` levels deep (400, never the RecursionError that was a 500). A refused body changes nothing.

The local gateway enforces the size as the body arrives (`servers.gateway`), so that an oversized body is
refused before the rest is sent; `refusal` checks it again where every invocation passes, as in Lambda, where
API Gateway has read the body before the function sees it.
"""

from __future__ import annotations

import json
from typing import Any

import pybase64
from aws_lambda_powertools.event_handler import Response

from shared.settings import get_settings
from tidemq_protocol.api.common import ErrorBody
from tidemq_protocol.errors import ClientError, InvalidArgument, Overloaded, RequestTooLarge

from .errors import error_response, status_of

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects a JSON body may have (the API's own bodies need 4)."""

JSON_TYPES = ("application/json", "")  # as Powertools parses bodies: no content type is taken for JSON


def refusal(event: dict[str, Any]) -> Response | None:
    """The error response for a body no route may take, or None if the body is within bounds."""
    try:
        check_body(event, get_settings().max_request_bytes)
    except ClientError as error:
        return refused(error)
    return None


def refused(error: ClientError | Overloaded) -> Response:
    """The response to a request refused before any route saw it (here, or by the local gateway as it arrives)."""
    return error_response(status_of(error), ErrorBody(error=type(error).__name__, message=str(error)))


def check_body(event: dict[str, Any], max_bytes: int) -> None:
    """Raise RequestTooLarge for a body over `max_bytes`, InvalidArgument for a JSON body that is not UTF-8."""
    body = event.get("body")
    if not body:
        return
    encoded = bool(event.get("isBase64Encoded"))
    if isinstance(body, bytes):  # the local gateway hands a binary body over as bytes
        encoded, size = False, len(body)
    elif encoded:
        size = _decoded_size(body)
    else:
        size = _utf8_size(body, max_bytes)
    if size > max_bytes:
        raise RequestTooLarge(f"the request body is {size} bytes; the limit is {max_bytes}")
    content_type = ((event.get("headers") or {}).get("content-type") or "").split(";")[0].strip().lower()
    if encoded and content_type in JSON_TYPES:
        try:
            pybase64.b64decode(body, validate=True).decode("utf-8")
        except ValueError as error:  # binascii.Error and UnicodeDecodeError both are
            raise InvalidArgument(f"the request body is not valid UTF-8 JSON: {error}") from None


def load_json(text: str) -> Any:
    """The resolvers' JSON parser: `json.loads`, refusing a body nested more than MAX_JSON_DEPTH levels deep
    (InvalidArgument). Malformed JSON still raises JSONDecodeError, which Powertools reports as a 422."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep() from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # else it cannot be that deep: no walk
        _check_depth(value)
    return value


def _check_depth(value: Any) -> None:
    """Walk the containers of a parsed body (without recursion), refusing one deeper than MAX_JSON_DEPTH."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _too_deep() -> InvalidArgument:
    return InvalidArgument(f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep")


def _decoded_size(body: str) -> int:
    """Bytes a base64 text decodes to (for valid base64; invalid base64 is refused where it is decoded)."""
    return len(body) // 4 * 3 - body[-2:].count("=")


def _utf8_size(body: str, max_bytes: int) -> int:
    """Bytes of a text body in UTF-8, encoding it only when its length alone cannot tell it is within `max_bytes`."""
    if len(body) > max_bytes or len(body) * 4 <= max_bytes:
        return len(body)
    return len(body.encode("utf-8", "surrogatepass"))
