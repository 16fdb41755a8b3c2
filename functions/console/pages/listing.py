"""A page of a listing (topics, groups) the user may see, by name prefix: bounded reads of the store's own name-ordered
pages (never a walk over every topic), filtered by the user's policies as the HTTP API's listings are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.names import NAME_RULE

T = TypeVar("T")
PAGE = 50
STORE_PAGES = 4
"""Store pages read at most for one page of the listing (a user who sees few names pages on with `next`)."""


@dataclass(frozen=True)
class Listing(Generic[T]):
    """Items to show, and the `after` that continues the listing (None: it ended)."""

    items: list[T]
    next_after: str | None


def before(prefix: str) -> str | None:
    """A name just before every name starting with `prefix` (names sort in ASCII; `~` is past every name character)."""
    if not prefix:
        return None
    return prefix[:-1] + chr(ord(prefix[-1]) - 1) + "~"


def visible_page(
    read: Callable[[str | None, int], tuple[list[T], str | None]],
    name_of: Callable[[T], str],
    shown: Callable[[str], bool],
    after: str,
    prefix: str,
) -> Listing[T]:
    """Up to PAGE items whose names start with `prefix` that `shown` lets the user see, from after `after`."""
    if prefix and not NAME_RULE.fullmatch(prefix):
        raise InvalidArgument(f"a name filter uses a name's characters (letters, digits, - _ %): not {prefix[:40]!r}")
    start = max(after or "", before(prefix) or "") or None
    items: list[T] = []
    for _ in range(STORE_PAGES):
        found, next_after = read(start, PAGE)
        for item in found:
            if not name_of(item).startswith(prefix):
                return Listing(items, None)
            if shown(name_of(item)):
                items.append(item)
        if next_after is None or len(items) >= PAGE:
            return Listing(items[:PAGE], name_of(items[PAGE - 1]) if len(items) > PAGE else next_after)
        start = next_after
    return Listing(items, start)
