"""Binary bodies through API Gateway, which carries them base64-encoded in the event and the reply.

pybase64 (SIMD) rather than the standard library: a 2 MB consume batch takes 0.3 ms instead of 5.
"""

from __future__ import annotations

import pybase64
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from tidemq_store.errors import InvalidArgument


def request_bytes(event: BaseProxyEvent) -> bytes:
    """The request body as bytes, whether API Gateway base64-encoded it or passed it as text, or the local gateway
    handed it over as bytes (functions/local_gateway.py)."""
    body = event.body or ""
    if isinstance(body, bytes):
        return body
    if not event.is_base64_encoded:
        return body.encode()
    try:
        return pybase64.b64decode(body, validate=True)
    except ValueError:
        raise InvalidArgument("the request body is not valid base64") from None


def binary_response(data: bytes, content_type: str, status: int = 200) -> Response:
    response = Response(status, content_type, pybase64.b64encode(data).decode("ascii"))
    response.base64_encoded = True
    return response
