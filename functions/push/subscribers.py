"""Which groups push from each topic, as this process knows it: what every produce asks ("does anyone push
from this topic?") and what the local worker reads at start to catch up.

A cache, not an index. The answer comes from one listing of every group (`MessageStore.list_groups`, paged),
kept for `push_subscribers_ttl_s` (default 10 s) and refreshed only when asked after that, so a produce costs
no store read on most calls and an idle process reads nothing. An index of groups by push topic would need
a new `MessageStore` method (and table or column family) in every backend, to answer a question the
configs already answer; the cost of the cache is one listing per TTL per producing process, which is cheap
at thousands of groups and the thing to revisit at millions.

Staleness: a change made through this process (the admin routes, locally the one gateway process) drops the
cache at once, and a starting local worker reads afresh. Another process (in AWS, a warm produce function)
may miss a new subscription for up to the TTL; the admin therefore asks the push function to catch the group
up once more after the TTL (see `trigger.PushFunctionNotifier.subscription_changed`), so no message produced
in that window waits for the next produce.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tidemq_store import MessageStore

PAGE = 1000


class Subscribers:
    """topic -> the groups pushing from it, from a listing of the groups at most `ttl_s` old."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._by_topic: dict[str, list[str]] | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()  # one listing at a time; invalidate() waits for it, so none outlives a change

    def of(self, store: MessageStore, topic: str) -> list[str]:
        """The groups pushing from `topic`."""
        return self.by_topic(store).get(topic, [])

    def by_topic(self, store: MessageStore) -> dict[str, list[str]]:
        """Every topic somebody pushes from, with its groups."""
        with self._lock:
            if self._by_topic is None or self._clock() - self._read_at >= self.ttl_s:
                read_at = self._clock()
                self._by_topic, self._read_at = self._list(store), read_at
            return self._by_topic

    def invalidate(self) -> None:
        """Forget the listing: the next question reads the groups again."""
        with self._lock:
            self._by_topic = None

    @staticmethod
    def _list(store: MessageStore) -> dict[str, list[str]]:
        by_topic: dict[str, list[str]] = {}
        after = None
        while True:
            page = store.list_groups(after=after, limit=PAGE)
            for config in page:
                if config.push is not None:
                    by_topic.setdefault(config.push.topic, []).append(config.name)
            if page.next_after is None:
                return by_topic
            after = page.next_after
