"""A page request as the pages see it (`Visit`): the request, the store it is about, the logged-in user and the
session's CSRF token, and the route table the pages add themselves to (`page`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.settings import Settings
from tidemq_protocol.errors import InvalidArgument
from tidemq_store import MessageStore
from tidemq_store.acl import UserRecord

from .web import Answer, ConsoleRequest, render


@dataclass(frozen=True)
class Visit:
    """One logged-in request: what a page needs to answer it."""

    request: ConsoleRequest
    store: MessageStore
    settings: Settings
    user: UserRecord
    csrf: str
    params: dict[str, str]  # the page path's named parts (`topic`, `group`, ...)

    def page(self, template: str, status: int = 200, **context: Any) -> Answer:
        return render(self.request, template, status, user=self.user, csrf=self.csrf, **context)

    def number(self, name: str, default: int | None = None, low: int = 0, high: int = 2**63 - 1) -> int | None:
        """A whole-number query or form field within [low, high] (InvalidArgument, a 400, otherwise)."""
        text = self.request.field(name) or self.request.arg(name)
        if not text:
            return default
        if not re.fullmatch(r"-?[0-9]{1,19}", text) or not low <= int(text) <= high:
            raise InvalidArgument(f"{name} must be a whole number from {low} to {high}, not {text[:40]!r}")
        return int(text)

    def time_ms(self, name: str) -> int | None:
        """A time field as ms since the epoch: ISO 8601 (`2026-11-27T10:00`, UTC unless it names its zone) or a
        number of ms; None when blank (InvalidArgument, a 400, when it is neither)."""
        text = self.request.field(name) or self.request.arg(name)
        if not text:
            return None
        if text.isdigit() and len(text) <= 16:
            return int(text)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgument(
                f"{name} is ISO 8601 (2026-11-27T10:00Z) or ms since the epoch: {text[:40]!r}"
            ) from None
        return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


Page = Callable[[Visit], Answer]


@dataclass(frozen=True)
class PageRoute:
    method: str
    pattern: re.Pattern[str]
    page: Page


ROUTES: list[PageRoute] = []
SEGMENT = r"[^/]+"


def page(method: str, path: str) -> Callable[[Page], Page]:
    """Add a page to the console's routes: `path` within the console, `{name}` one path segment."""

    def add(function: Page) -> Page:
        pattern = re.compile("^" + re.sub(r"\{(\w+)\}", rf"(?P<\1>{SEGMENT})", path) + "$")
        ROUTES.append(PageRoute(method, pattern, function))
        return function

    return add


def find(method: str, path: str) -> tuple[Page, dict[str, str]] | None:
    """The page serving `method` at `path` and its named parts; None if there is none."""
    for route in ROUTES:
        if route.method == method and (found := route.pattern.match(path)):
            return route.page, found.groupdict()
    return None
