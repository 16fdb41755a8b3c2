"""The console's HTTP vocabulary: an API Gateway (v2) event as a `ConsoleRequest`, and what a page answers
(`Answer`) as the function's result, with the security headers every answer carries.

Every answer has a strict Content-Security-Policy (scripts, styles, fonts and requests from the console's own
origin only, no inline script, no framing), `nosniff`, referrers only to itself, and `no-store` unless it is a
static file.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape

from functions.api.binary import LOCAL_API_ID

TEMPLATES = Path(__file__).parent / "templates"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # not no-referrer: a form POST would then carry `Origin: null`
    "x-frame-options": "DENY",
}
HTML = "text/html; charset=utf-8"

templates = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True))
templates.filters["ms_time"] = lambda ms: (
    datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
)


@dataclass(frozen=True)
class ConsoleRequest:
    """One request to the console: `path` within it (`/topics/orders`), `base` the URL prefix it is served under
    (`/console`, or `/brokers/<name>/console` in a BrokerContainer), the query's and a form body's fields."""

    method: str
    path: str
    base: str
    query: dict[str, str]
    form: dict[str, list[str]]
    cookies: dict[str, str]
    secure: bool
    source_ip: str | None
    headers: dict[str, str]

    def arg(self, name: str, default: str = "") -> str:
        """A query field (stripped), or `default`."""
        return self.query.get(name, default).strip()

    def field(self, name: str, default: str = "") -> str:
        """A form field's first value (stripped), or `default`."""
        return (self.form.get(name) or [default])[0].strip()

    def fields(self, name: str) -> list[str]:
        return [value.strip() for value in self.form.get(name, []) if value.strip()]

    def url(self, path: str, **query: object) -> str:
        """A console URL (`path` within the console), with the query's non-empty fields."""
        shown = {name: value for name, value in query.items() if value not in (None, "")}
        return f"{self.base}{'' if path == '/' else path}" + (f"?{urlencode(shown)}" if shown else "")


@dataclass
class Answer:
    """What the console answers: a status, a body (text or bytes), headers, and Set-Cookie values."""

    status: int
    body: str | bytes
    content_type: str = HTML
    headers: dict[str, str] = field(default_factory=dict)
    cookies: list[str] = field(default_factory=list)

    def result(self) -> dict[str, Any]:
        """The Lambda (payload v2) result: binary bodies base64-encoded, as API Gateway expects them."""
        headers = {**SECURITY_HEADERS, "content-type": self.content_type, "cache-control": "no-store", **self.headers}
        binary = isinstance(self.body, bytes)
        body = base64.b64encode(self.body).decode() if binary else self.body
        return {
            "statusCode": self.status,
            "headers": headers,
            "body": body,
            "isBase64Encoded": binary,
            "cookies": self.cookies,
        }


def parse(event: dict[str, Any], console_path: str) -> ConsoleRequest:
    """The request an event carries; `console_path` is its path from `/console` on (the event's rawPath, which in a
    BrokerContainer is the path after the broker's prefix)."""
    headers = {name.lower(): value for name, value in (event.get("headers") or {}).items()}
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    sent_path = http.get("path") or event.get("rawPath", "")
    prefix = sent_path[: len(sent_path) - len(console_path)] if sent_path.endswith(console_path) else ""
    path = console_path.removeprefix("/console") or "/"
    query = {name: values[-1] for name, values in parse_qs(event.get("rawQueryString", "")).items()}
    body = event.get("body") or ""
    if isinstance(body, bytes | memoryview):
        body = bytes(body).decode("utf-8", "replace")
    elif event.get("isBase64Encoded"):
        body = base64.b64decode(body).decode("utf-8", "replace")
    form = parse_qs(body, keep_blank_values=True) if http.get("method") == "POST" else {}
    cookie = SimpleCookie()
    for text in [*(event.get("cookies") or []), headers.get("cookie", "")]:
        try:
            cookie.load(text)
        except Exception:  # a malformed cookie header is no session
            continue
    forwarded = headers.get("x-forwarded-proto", "")
    secure = forwarded == "https" or (not forwarded and context.get("apiId") != LOCAL_API_ID)  # API Gateway: https
    return ConsoleRequest(
        method=http.get("method", "GET"),
        path=path,
        base=f"{prefix}/console",
        query=query,
        form=form,
        cookies={name: morsel.value for name, morsel in cookie.items()},
        secure=secure,
        source_ip=http.get("sourceIp"),
        headers=headers,
    )


def render(request: ConsoleRequest, template: str, status: int = 200, **context: Any) -> Answer:
    """A page from its template, with what every page's layout needs."""
    page = templates.get_template(template).render(request=request, base=request.base, **context)
    return Answer(status, page)


def redirect(location: str, cookies: list[str] | None = None) -> Answer:
    """See other (after a form's POST: the page to show, so a reload does not post again)."""
    return Answer(303, "", headers={"location": location}, cookies=cookies or [])
