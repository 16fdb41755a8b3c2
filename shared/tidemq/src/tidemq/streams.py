"""The Consumer's streaming reads: one stream a queue (GET .../queues/{queue}/stream, `tidemq_protocol.stream`),
each read on a background thread into one bounded queue of frames that the consumer takes from.

The bound is the client's window: a reader whose frame does not fit waits, stops reading its socket, and so stops
the server's stream (flow control is TCP's). A stream that drops (the server restarted, a heartbeat overdue) is
reopened by its reader from the offset after the last frame it read, with backoff, so the frames it queues follow
one another without a gap or a repeat. What a reader cannot get past (an offset out of range, a permission taken
away) is queued as the error, in order, for the consumer to deal with; the reader then stops.
"""

from __future__ import annotations

import contextlib
import http.client
import queue
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tidemq_protocol import codec, stream
from tidemq_protocol.errors import CorruptStore, TideMQError

from .client import HttpClient, segment
from .errors import ApiError

Frame = tuple[int, bytes | TideMQError]
"""What the consumer takes: a queue and its next consume batch (or what ended its stream)."""

WINDOW_FRAMES = 4
"""Frames read ahead of the consumer at most, over all its streams."""
REOPEN_BACKOFF_S = (0.05, 2.0)  # the first wait before reopening a dropped stream, and the longest
OVERDUE_HEARTBEATS = 3  # a stream silent this many heartbeats (and a second) is taken as dropped


def offered(error: BaseException) -> bool:
    """Whether an answer to a stream's opening still says the server streams: a 404 or 405 that no engine error
    explains (no such route: Lambda behind API Gateway) says it does not."""
    return not (type(error) is ApiError and error.status in (404, 405))


class QueueStreams:
    """The streams of one consumer's queues of `topic`. `params(queue, offset)`: the query of a queue's stream."""

    def __init__(
        self, client: HttpClient, topic: str, params: Callable[[int, int], Mapping[str, Any]], window: int
    ) -> None:
        self.client, self.topic, self.params = client, topic, params
        self.frames: queue.Queue[Frame] = queue.Queue(maxsize=window)
        self.stopped = threading.Event()
        self._readers: list[_Reader] = []
        self._held: Frame | None = None  # taken and put back (the taker's thread only)

    def open(self, queue_number: int, offset: int) -> None:
        """Open a queue's stream at `offset` and start its reader; raises what the server answered instead (the
        consumer falls back to long polling if `offered` says so)."""
        reader = _Reader(self, queue_number)
        reader.connect(offset)
        self._readers.append(reader)
        reader.thread.start()

    def take(self, timeout_s: float) -> Frame | None:
        """The next frame of any queue, waiting up to `timeout_s`; None if none came."""
        if self._held is not None:
            held, self._held = self._held, None
            return held
        try:
            return self.frames.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return None

    def put_back(self, frame: Frame) -> None:
        """Make `frame`, just taken, the next one `take` returns."""
        self._held = frame

    def close(self) -> None:
        """Stop every reader and close its connection; what they had queued is dropped (the consumer's positions
        say where a new stream starts)."""
        self.stopped.set()
        for reader in self._readers:
            reader.disconnect()
        for reader in self._readers:
            reader.thread.join()


class _Reader:
    """One queue's stream, read on a thread of its own."""

    def __init__(self, streams: QueueStreams, queue_number: int) -> None:
        self.streams, self.queue = streams, queue_number
        self.path = f"/v1/topics/{segment(streams.topic)}/queues/{queue_number}/stream"
        self.offset = 0
        self.connection: http.client.HTTPConnection | None = None
        self.answer: http.client.HTTPResponse | None = None
        self.thread = threading.Thread(target=self._run, name=f"tidemq-stream-{queue_number}", daemon=True)

    def connect(self, offset: int) -> None:
        self.offset = offset
        client = self.streams.client
        self.connection, self.answer = client.open_stream(
            self.path, self.streams.params(self.queue, offset), timeout_s=client.timeout_s
        )
        heartbeat_ms = int(self.answer.getheader(stream.HEARTBEAT_HEADER) or 10_000)
        if self.connection.sock is not None:  # an overdue heartbeat is a dropped stream
            self.connection.sock.settimeout(OVERDUE_HEARTBEATS * heartbeat_ms / 1000 + 1)

    def disconnect(self) -> None:
        connection = self.connection
        if connection is not None and connection.sock is not None:
            with contextlib.suppress(OSError):  # wakes the reader's blocked read, whichever thread this runs on
                connection.sock.shutdown(socket.SHUT_RDWR)

    def _run(self) -> None:
        backoff_s = REOPEN_BACKOFF_S[0]
        while not self.streams.stopped.is_set():
            try:
                if self.answer is None:
                    self.connect(self.offset)
                self._read()
                backoff_s = REOPEN_BACKOFF_S[0]  # it was open: reopen at once
            except (OSError, http.client.HTTPException, EOFError, CorruptStore):
                pass
            except TideMQError as error:
                if isinstance(error, ApiError) and (error.status is None or error.status >= 500):
                    pass  # unreachable, or busy (503): try again
                else:  # the consumer deals with it (out of range, not allowed), in its place among the frames
                    self._queue(error)
                    return
            self._close()
            if self.streams.stopped.wait(backoff_s):
                break
            backoff_s = min(REOPEN_BACKOFF_S[1], backoff_s * 2)
        self._close()

    def _read(self) -> None:
        """Queue each frame as it comes, until the stream ends (EOFError, OSError) or the reader is stopped."""
        assert self.answer is not None
        while not self.streams.stopped.is_set():
            batch = stream.read_frame(self.answer.read)
            if batch is None:
                continue  # a heartbeat
            if not self._queue(batch):
                return
            self.offset = codec.consume_header(batch)[0]
        raise EOFError("stopped")

    def _queue(self, item: bytes | TideMQError) -> bool:
        """Queue a frame, waiting while the window is full (the socket unread meanwhile); False once stopped."""
        while not self.streams.stopped.is_set():
            try:
                self.streams.frames.put((self.queue, item), timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = self.answer = None
