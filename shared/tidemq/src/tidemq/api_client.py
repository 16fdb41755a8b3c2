"""What the SDK's clients (Admin, Producer, Consumer, KV, Container) share: the HttpClient they send through and
who closes it; reading an answer into an API model, or a listing page by page.

A client made with a `url` makes its own HttpClient and closes it with itself (`close`, or leaving a `with`
block); one given `client=` shares that one and leaves it open: its owner closes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from .client import HttpClient, Response

if TYPE_CHECKING:  # pydantic is imported by the models themselves: a Producer never loads it
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")
T = TypeVar("T")


class Page(Protocol):
    """One page of a listing: the next one starts after `next_after` (None: this is the last)."""

    @property
    def next_after(self) -> str | None: ...


P = TypeVar("P", bound=Page)


def every(list_page: Callable[[str | None], P], items: Callable[[P], Iterable[T]]) -> Iterator[T]:
    """Every item of a listing, fetched a page at a time as the caller iterates: `list_page(after)` is the page
    after `after` (None: the first), `items(page)` its items."""
    after = None
    while True:
        page = list_page(after)
        yield from items(page)
        if page.next_after is None:
            return
        after = page.next_after


def model_of(model: type[M], response: Response) -> M:
    """The answer's JSON body as `model`."""
    return model.model_validate_json(response.content)


class ApiClient:
    """A client of the TideMQ HTTP API over an HttpClient: its own one for `url` (else TIDEMQ_URL, else the local
    gateway's address), or `client`, shared and left to its owner."""

    def __init__(self, url: str | None = None, *, client: HttpClient | None = None) -> None:
        self._client = client or HttpClient(url)
        self._owns_client = client is None

    def _get(self, model: type[M], path: str, **params: Any) -> M:
        """GET `path` with the `params` that are not None, its answer as `model`."""
        given = {name: value for name, value in params.items() if value is not None}
        return model_of(model, self._client.request("GET", path, params=given))

    def _release_client(self) -> None:
        if self._owns_client:
            self._client.close()

    def close(self) -> None:
        """Close the HTTP client, unless it was passed in (then its owner closes it)."""
        self._release_client()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
