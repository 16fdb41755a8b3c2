"""The HTTP client under Admin, Producer and Consumer: one keep-alive connection pool, retries, errors.

Retries (with exponential backoff) cover what a later attempt can fix: no connection, a dropped
connection, a 5xx. A 4xx is the request's own fault and is raised at once, as the engine's exception
class when the body names one (`tidemq.errors`). A retried produce can store a message twice if
the first attempt was stored but its answer lost: delivery is at least once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from shared.credentials import Credentials
from tidemq_store.errors import InvalidArgument

from .auth import RequestSigner, find_credentials
from .errors import ApiError, ServerUnreachable, error_from_response, transport_reason

DEFAULT_URL = "http://127.0.0.1:8080"


def default_url() -> str:
    """The API's base URL: `TIDEMQ_URL`, else the local gateway's default address (a credentials profile with a
    `url` names its server first)."""
    return os.environ.get("TIDEMQ_URL") or DEFAULT_URL


def segment(name: str) -> str:
    """`name` as one URL path segment (topic names may hold `%` and `|`)."""
    return quote(name, safe="")


class HttpClient:
    """Requests to the TideMQ HTTP API, signed (auth.py: `credentials`, else those found as it says), with retries;
    error responses become exceptions.

    `retries` is how many times a failed attempt is repeated, waiting `backoff_s`, then twice as
    long each time (at most `max_backoff_s`).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
        credentials: Credentials | None = None,
        profile: str | None = None,
        sign: bool = True,
    ) -> None:
        """`sign=False`: send unsigned requests, for a server run with TIDEMQ_AUTH=off."""
        credentials = (credentials or find_credentials(profile)) if sign else None
        self.url = (url or (credentials.url if credentials else None) or default_url()).rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise InvalidArgument(f"{self.url!r} is not an http:// or https:// URL")
        self.timeout_s = timeout_s
        self.retries, self.backoff_s, self.max_backoff_s = retries, backoff_s, max_backoff_s
        self.user = credentials.access_key if credentials else None
        self._http = httpx.Client(
            base_url=self.url, timeout=timeout_s, auth=RequestSigner(credentials) if credentials else None
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        """Send a request and return its 2xx response, or raise what the error response means."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    method, path, json=json, params=params, content=content, headers=headers, timeout=timeout
                )
            except httpx.TransportError as error:
                if attempt == self.retries:
                    raise ServerUnreachable(self.url, transport_reason(error)) from None
            else:
                if response.is_success:
                    return response
                if response.status_code < 500 or attempt == self.retries:
                    raise error_from_response(response)
            time.sleep(min(self.max_backoff_s, self.backoff_s * 2**attempt))
            attempt += 1

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ["ApiError", "HttpClient", "ServerUnreachable", "default_url", "segment"]
