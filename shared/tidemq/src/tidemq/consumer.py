"""Consumer: read a topic's queues in turn through the binary batch endpoint, tracking each queue's position.

    with Consumer("orders", group="billing", tag="new || paid") as consumer:
        for message in consumer:         # waits for new messages; commits what it handed out before each poll
            handle(message.body)

    Consumer("orders", sql="region = 'eu' AND amount > 100")   # a SQL92 filter over properties, on the broker

Without a group the consumer starts every queue at `start`. With a group (created if missing) each
queue starts at the group's committed offset, or at `start` where the group never committed, and
`commit()` records the current positions. A position is past every message examined: messages the
filter skips move it on too, so a filtering group still reaches lag 0.

Waiting reads (`poll` with `wait_ms`, and iterating) stream where the server offers it (the local gateway and the
BrokerContainer do; Lambda behind API Gateway does not): one stream a queue (`tidemq.streams`), so a message is
handed over as soon as it is stored rather than at the next poll. Where the server answers the stream's route
with a 404 or 405, the consumer long-polls `.../batch` as before, and remembers that. Streams start at the
consumer's positions, and only what `poll` returns moves them, so commits mean what they meant: what the loop
received. `poll(wait_ms=0)` and `seek` close the streams (dropping what they had read ahead); the next waiting
read opens them again from the positions.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Literal

from tidemq_protocol import codec
from tidemq_protocol.errors import (
    GroupExists,
    InvalidArgument,
    OffsetOutOfRange,
    Overloaded,
    QueueOutOfRange,
    TideMQError,
)
from tidemq_protocol.filter import SqlFilter, subscription_filter
from tidemq_protocol.message import StoredMessage

from .admin import Admin
from .api_client import ApiClient
from .client import HttpClient, segment
from .errors import ApiError
from .streams import WINDOW_FRAMES, QueueStreams, offered

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
        stream: bool = True,
        window: int = WINDOW_FRAMES,
    ) -> None:
        """`stream`: stream where the server offers it (False: always long-poll); `window`: batches streamed
        ahead of the caller at most (each up to `max_bytes`)."""
        self.topic, self.group, self.max_bytes = topic, group, max_bytes
        self._streaming: bool = stream  # False once the server said it does not stream
        self._window = window
        self._streams: QueueStreams | None = None
        self._pending: tuple[int, list[StoredMessage], int] | None = None  # a batch handed out in part
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
        self._close_streams()
        self._positions[queue] = offset

    def poll(self, max_messages: int = 1000, wait_ms: int = 0) -> list[StoredMessage]:
        """The next messages from one queue, taking the queues in turn.

        Returns [] only once every queue is read to its end and no message arrived within `wait_ms`;
        stretches of messages the tag filter skips are read past without returning.
        """
        deadline = time.monotonic() + wait_ms / 1000
        if wait_ms > 0 and self._open_streams():
            return self._poll_streams(max_messages, deadline)
        self._close_streams()
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

    def _open_streams(self) -> bool:
        """Whether the queues are streamed (opening their streams if they are not open yet): not where the server
        does not stream, nor while it has no room for more streams (a 503: long-poll meanwhile)."""
        if self._streams is not None or not self._streaming:
            return self._streaming
        self._streams = QueueStreams(self._client, self.topic, self._stream_params, self._window)
        try:
            for queue in self._positions:
                self._open_stream(queue)
        except (Overloaded, ApiError) as error:
            self._close_streams()
            if isinstance(error, Overloaded) or error.status is None or error.status >= 500:
                return False
            self._streaming = offered(error)
            if self._streaming:
                raise
        except BaseException:
            self._close_streams()
            raise
        return self._streaming

    def _open_stream(self, queue: int) -> None:
        assert self._streams is not None
        while True:
            try:
                self._streams.open(queue, self._positions[queue])
                return
            except OffsetOutOfRange as error:
                self._out_of_range(queue, error)

    def _stream_params(self, queue: int, offset: int) -> dict[str, int | str]:
        return {"offset": offset, "max_bytes": self.max_bytes, **self._filter_params()}

    def _poll_streams(self, max_messages: int, deadline: float) -> list[StoredMessage]:
        """The next messages the streams brought (or the rest of a batch handed out in part), waiting until
        `deadline` for them; [] if none came."""
        assert self._streams is not None
        while self._pending is None:
            frame = self._streams.take(deadline - time.monotonic())
            if frame is None:
                return []
            queue, batch = frame
            if isinstance(batch, TideMQError):
                self._stream_ended(queue, batch)
                continue
            messages, next_offset, _, max_offset = codec.decode_consume(batch, self._filter)
            self._ends[queue] = max_offset
            if messages:
                self._pending = (queue, messages, next_offset)
                self._gather(max_messages)
            else:  # the filter skipped them all: move on past them
                self._positions[queue] = next_offset
        queue, messages, next_offset = self._pending
        given, rest = messages[:max_messages], messages[max_messages:]
        if rest:
            self._pending = (queue, rest, next_offset)
            self._positions[queue] = given[-1].queue_offset + 1
        else:
            self._pending = None
            self._positions[queue] = next_offset
        return given

    def _gather(self, max_messages: int) -> None:
        """Add to the pending batch the next frames of its queue that arrived already, up to `max_messages`: one
        poll hands over what is there, as a long poll's answer would, rather than a call per frame."""
        assert self._streams is not None and self._pending is not None
        queue, messages, next_offset = self._pending
        while len(messages) < max_messages and (frame := self._streams.take(0)) is not None:
            if frame[0] != queue or isinstance(frame[1], TideMQError):
                self._streams.put_back(frame)
                break
            more, next_offset, _, self._ends[queue] = codec.decode_consume(frame[1], self._filter)
            messages = messages + more
        self._pending = (queue, messages, next_offset)

    def _stream_ended(self, queue: int, error: TideMQError) -> None:
        """A queue's stream could not go on: retention moved past its position (go on from where the queue is
        now, on a new stream), or anything else (raised)."""
        if not isinstance(error, OffsetOutOfRange):
            self._close_streams()
            raise error
        self._out_of_range(queue, error)
        self._open_stream(queue)

    def _close_streams(self) -> None:
        """Close the streams and drop what they read ahead; a later waiting read opens them from the positions."""
        if self._streams is not None:
            self._streams.close()
            self._streams = None
        self._pending = None

    def close(self) -> None:
        self._close_streams()
        super().close()

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
        params.update(self._filter_params())
        path = f"/v1/topics/{segment(self.topic)}/queues/{queue}/batch"
        try:
            response = self._client.request(
                "GET", path, params=params, timeout_s=self._client.timeout_s + wait_ms / 1000
            )
        except OffsetOutOfRange as error:
            self._out_of_range(queue, error)
            return []
        messages, next_offset, _, max_offset = codec.decode_consume(response.content, self._filter)
        self._positions[queue], self._ends[queue] = next_offset, max_offset
        return messages

    def _filter_params(self) -> dict[str, str]:
        if isinstance(self._filter, SqlFilter):
            return {"sql": self._filter.expression}
        return {} if self._filter is None else {"tag": self._tag}

    def _out_of_range(self, queue: int, error: OffsetOutOfRange) -> None:
        """Retention removed the messages below the position: go on from the oldest one left. (A position past the
        end, only reachable by `seek`, goes to the end.)"""
        below = self._positions[queue] < error.min_offset
        self._positions[queue] = error.min_offset if below else error.max_offset
        self._ends[queue] = error.max_offset

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
                    self._close_streams()  # they read on from past the batch
                    self._positions[message.queue] = message.queue_offset + 1
                    raise
