"""Consumer: read a topic's queues in turn through the binary batch endpoint, tracking each queue's position.

    with Consumer("orders", group="billing", tag="new || paid") as consumer:
        for message in consumer:         # waits for new messages; commits what it handed out before each poll
            handle(message.body)

    Consumer("orders", sql="region = 'eu' AND amount > 100")   # a SQL92 filter over properties, on the broker

Without a group the consumer starts every queue at `start`. With a group (created if missing) each
queue starts at the group's committed offset, or at `start` where the group never committed, and
`commit()` records the current positions. A position is past every message examined: messages the
filter skips move it on too, so a filtering group still reaches lag 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Literal

from tidemq_protocol import codec
from tidemq_protocol.errors import GroupExists, InvalidArgument, OffsetOutOfRange, QueueOutOfRange
from tidemq_protocol.filter import SqlFilter, subscription_filter
from tidemq_protocol.message import StoredMessage

from .admin import Admin
from .api_client import ApiClient
from .client import HttpClient, segment

Start = Literal["earliest", "latest"] | int
"""Where a queue without a committed offset starts: its oldest message, its end, or a time (ms since the epoch)."""

LONG_POLL_SLICE_MS = 500
"""With every queue idle, `poll` long-polls one queue at a time for at most this long, so a message
arriving on another queue waits no longer than this."""


class Consumer(ApiClient):
    """Pulls messages of `topic` (optionally of some `queues` only, and those its filter selects: a `tag`
    expression, or a SQL92 expression `sql` over message properties, evaluated by the broker). Closing it commits
    nothing: call `commit()` first."""

    def __init__(
        self,
        topic: str,
        group: str | None = None,
        *,
        start: Start = "earliest",
        tag: str = "*",
        sql: str | None = None,
        queues: Iterable[int] | None = None,
        url: str | None = None,
        client: HttpClient | None = None,
        max_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.topic, self.group, self.max_bytes = topic, group, max_bytes
        self._tag = tag
        self._filter = subscription_filter(tag, sql)  # raises before any request
        if start not in ("earliest", "latest") and (type(start) is not int or start < 0):
            raise InvalidArgument(f"start must be 'earliest', 'latest' or a timestamp in ms, got {start!r}")
        super().__init__(url, client=client)
        self._admin = Admin(client=self._client)
        self._positions: dict[int, int] = {}  # next offset to read, per queue
        self._ends: dict[int, int] = {}  # max_offset per queue, as last seen
        self._committed: dict[int, int] = {}  # the group's offsets, as last committed
        try:
            self._start(start, queues)
        except BaseException:
            self.close()
            raise
        self._order = list(self._positions)
        self._turn = 0

    def _start(self, start: Start, queues: Iterable[int] | None) -> None:
        description = self._admin.describe_topic(self.topic)
        ranges = {q.queue: q for q in description.queue_offsets}
        chosen = list(ranges) if queues is None else list(dict.fromkeys(queues))
        if not chosen:
            raise InvalidArgument("queues must name at least one queue (None: every queue)")
        for queue in chosen:
            if queue not in ranges:
                raise QueueOutOfRange(self.topic, queue, description.queues)
        if self.group is not None:
            try:
                self._admin.create_group(self.group)
            except GroupExists:
                lags = self._admin.describe_group(self.group, self.topic).topics[0].queues
                self._committed = {q.queue: q.committed_offset for q in lags if q.committed_offset is not None}
        for queue in chosen:
            position = self._committed.get(queue)
            if position is None:
                position = self._start_offset(start, queue, ranges[queue].min_offset, ranges[queue].max_offset)
            self._positions[queue], self._ends[queue] = position, ranges[queue].max_offset

    def _start_offset(self, start: Start, queue: int, min_offset: int, max_offset: int) -> int:
        if start == "earliest":
            return min_offset
        if start == "latest":
            return max_offset
        return self._admin.offset_for_time(self.topic, queue, start).offset

    @property
    def positions(self) -> dict[int, int]:
        """The next offset to read, per queue."""
        return dict(self._positions)

    @property
    def drained(self) -> bool:
        """Whether every queue was read up to the end it had when last read."""
        return all(self._positions[q] >= self._ends[q] for q in self._positions)

    def seek(self, queue: int, offset: int) -> None:
        """Read `queue` from `offset` on. An offset below the queue's oldest message moves up to it on the
        next poll; one past its end moves to the end."""
        if queue not in self._positions:
            raise InvalidArgument(f"queue {queue} is not one this consumer reads: {sorted(self._positions)}")
        self._positions[queue] = offset

    def poll(self, max_messages: int = 1000, wait_ms: int = 0) -> list[StoredMessage]:
        """The next messages from one queue, taking the queues in turn.

        Returns [] only once every queue is read to its end and no message arrived within `wait_ms`;
        stretches of messages the tag filter skips are read past without returning.
        """
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            moved = False
            for _ in self._order:
                queue = self._next_queue()
                before = self._positions[queue]
                messages = self._fetch(queue, max_messages, wait_ms=0)
                if messages:
                    return messages
                moved = moved or self._positions[queue] != before
            if moved:  # skipped by the tag filter or moved into range: read on
                continue
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                return []
            messages = self._fetch(self._next_queue(), max_messages, wait_ms=min(remaining_ms, LONG_POLL_SLICE_MS))
            if messages:
                return messages

    def _next_queue(self) -> int:
        queue = self._order[self._turn % len(self._order)]
        self._turn += 1
        return queue

    def _fetch(self, queue: int, max_messages: int, wait_ms: int) -> list[StoredMessage]:
        params: dict[str, int | str] = {
            "offset": self._positions[queue],
            "max_messages": max_messages,
            "max_bytes": self.max_bytes,
            "wait_ms": wait_ms,
        }
        if isinstance(self._filter, SqlFilter):
            params["sql"] = self._filter.expression
        elif self._filter is not None:
            params["tag"] = self._tag
        path = f"/v1/topics/{segment(self.topic)}/queues/{queue}/batch"
        try:
            response = self._client.request(
                "GET", path, params=params, timeout_s=self._client.timeout_s + wait_ms / 1000
            )
        except OffsetOutOfRange as error:
            # Retention removed the messages below the position: go on from the oldest one left. (A
            # position past the end, only reachable by `seek`, goes to the end.)
            below = self._positions[queue] < error.min_offset
            self._positions[queue] = error.min_offset if below else error.max_offset
            self._ends[queue] = error.max_offset
            return []
        messages, next_offset, _, max_offset = codec.decode_consume(response.content, self._filter)
        self._positions[queue], self._ends[queue] = next_offset, max_offset
        return messages

    def commit(self) -> None:
        """Record the current positions as the group's committed offsets (those that changed since the last commit)."""
        if self.group is None:
            raise InvalidArgument("commit needs a consumer group: create the Consumer with group=...")
        changed = {q: offset for q, offset in self._positions.items() if self._committed.get(q) != offset}
        if changed:
            self._admin.commit_offsets(self.group, self.topic, changed)
            self._committed.update(changed)

    def __iter__(self) -> Iterator[StoredMessage]:
        """Every message as it arrives, waiting when there is none; never ends by itself.

        With a group, each poll first commits what the loop has received so far (at least once: a
        crash redelivers at most the last batch). Leaving the loop keeps the position just past the
        last message it received, so iterating again goes on from there.
        """
        while True:
            if self.group is not None:
                self.commit()
            for message in self.poll(wait_ms=LONG_POLL_SLICE_MS * 2):
                try:
                    yield message
                except GeneratorExit:  # the loop stopped here: the rest of the batch was not received
                    self._positions[message.queue] = message.queue_offset + 1
                    raise
