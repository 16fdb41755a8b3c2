"""Signed requests for httpx: for tools, tests and servers that speak raw HTTP (the SDK's own client signs with
`tidemq.auth.signature_headers`). Needs httpx (`pip install 'tidemq[httpx]'`)."""

from __future__ import annotations

from collections.abc import Generator

import httpx

from tidemq.auth import find_credentials, signature_headers
from tidemq.credentials import Credentials


class RequestSigner(httpx.Auth):
    """Signs every request of an httpx client (each attempt anew) as the credentials' user: for tools and tests
    that speak raw HTTP (the SDK's own client signs with `signature_headers`)."""

    requires_request_body = True

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        target = request.url.raw_path.decode("ascii")
        request.headers.update(signature_headers(self.credentials, request.method, target, request.content))
        yield request


def signed_client(url: str, credentials: Credentials | None = None, **options) -> httpx.Client:
    """A plain httpx client whose requests are signed (for tools and tests that speak raw HTTP)."""
    credentials = credentials or find_credentials()
    return httpx.Client(base_url=url, auth=RequestSigner(credentials) if credentials else None, **options)
