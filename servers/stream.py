"""Streaming reads of one queue, for the long-running servers (the local gateway, the BrokerContainer): the consumer
holds one request open and the server writes each batch as soon as it is stored, so no message waits for a poll's
round trip. Lambda behind API Gateway cannot stream: no function serves this route, and there a consumer gets a 404
and long-polls `.../batch` instead (the SDK does so by itself).

    GET /v1/topics/{topic}/queues/{queue}/stream?offset=N[&max_messages=][&max_bytes=][&tag=|&sql=]

The stream is opened as the batch route answers a read: its request authenticated (signed once, here), validated
and authorized by the same resolver code, its first read done through the same logic (`functions.logic.consume`),
so a bad request gets the 4xx the batch route would give (an unknown topic 404, an offset outside the queue 409).
Then 200 with frames (`tidemq_protocol.stream`): the first read's batch, then each batch as the store has it,
read from where the previous one ended with the same filter; an idle stream sends a heartbeat every
`TIDEMQ_STREAM_HEARTBEAT_MS`. The stream ends when the client goes, when the offset falls out of the queue
(retention: the client reopens and learns where it went, as a 409) or when the store closes; the client reopens
it from its next offset, and nothing is lost or repeated.

Flow control is the transport's: a frame is read from the store only once the previous one was handed to the
socket, and uvicorn's `send` waits while the socket's buffer is over its high-water mark, so a client that stops
reading stops its stream with at most one frame (beyond the transport's buffers) held here. Each stream runs on
a thread of its own, at most `TIDEMQ_GATEWAY_STREAMS` at once; one more is a 503 at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from functools import cache
from typing import Any

from functions.api.routing import Route, routes_of
from functions.logic.consume import consume_records
from functions.store import get_store
from servers.adapter import LocalContext, match_route, refuse, send_result, to_event
from shared.settings import get_settings
from tidemq_protocol import codec, stream
from tidemq_protocol.errors import Overloaded, TideMQError

log = logging.getLogger("tidemq.stream")
HAND_OVER_CHECK_S = 1.0  # how often a send the transport holds back looks whether the stream is over
NOT_YET_READABLE_S = 0.0005
"""How long a stream waits before reading again when the store's wait for a message returned early and the read found
none readable (the embedded store's wait ends only once the message is durable; this guards any store that ends it
sooner, so that a stream never spins)."""


@cache
def stream_routes() -> tuple[Route, ...]:
    """The servers' own routes: the stream's (its opening's resolver, imported now)."""
    from servers import stream_opening

    return tuple(routes_of("stream", stream_opening.app, stream_opening.__name__))


def wants(method: str, path: str) -> bool:
    """Whether a request (its path within the broker) is a streaming read's."""
    return path.endswith("/stream") and match_route(method, path, stream_routes()) is not None


class Streams:
    """The threads streams run on, at most `limit` at once (one more is refused: Overloaded, a 503)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0  # changed on the event loop only
        self.executor = ThreadPoolExecutor(limit, thread_name_prefix="stream")


_streams: Streams | None = None


def _pool() -> Streams:
    global _streams
    if _streams is None:
        _streams = Streams(get_settings().gateway_streams)
    return _streams


async def serve(
    scope,
    receive,
    send,
    body: bytes,
    path: str | None = None,
    binding: Callable[[], AbstractContextManager] | None = None,
) -> None:
    """Serve a streaming read (`wants` said it is one); `path`: the path within a container's broker, `binding`:
    what binds the broker's store around each read (the gateway's one store needs none)."""
    pool = _pool()
    if pool.open >= pool.limit:
        await refuse(send, Overloaded(f"{pool.limit} streams are open in this server already; long-poll or retry"))
        return
    route, parameters = match_route(scope["method"], path or scope["path"], stream_routes())
    request_id = str(uuid.uuid4())
    event = to_event(scope, body, route, parameters, request_id, path=path)
    loop = asyncio.get_running_loop()
    gone = threading.Event()
    watcher = asyncio.create_task(_watch_disconnect(receive, gone))
    pool.open += 1
    try:
        run = _Stream(loop, send, gone, binding or contextlib.nullcontext)
        call = contextvars.copy_context().run
        await loop.run_in_executor(pool.executor, call, run.serve, event, LocalContext("tidemq-stream", request_id))
    finally:  # cancelled too, when the server's graceful shutdown runs out: the thread ends on its next send
        gone.set()
        pool.open -= 1
        watcher.cancel()


def shutdown_grace_s() -> float:
    """How long a server stopping waits for the answers in flight (uvicorn's `timeout_graceful_shutdown`): the
    longest long poll, and a second; an open stream is then cut, and its client reopens elsewhere or later."""
    return get_settings().max_get_wait_ms / 1000 + 1


class _Gone(Exception):
    """The client, or the server's event loop, is gone: the stream ends."""


async def _watch_disconnect(receive, gone: threading.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


class _Stream:
    """One stream, run on its thread: each frame handed to the event loop's `send`, and waited for."""

    def __init__(self, loop, send, gone: threading.Event, binding: Callable[[], AbstractContextManager]) -> None:
        self.loop, self.send, self.gone, self.binding = loop, send, gone, binding
        self.heartbeat_ms = get_settings().stream_heartbeat_ms

    def serve(self, event: dict[str, Any], context: LocalContext) -> None:
        from servers.stream_opening import Opening, lambda_handler
        from servers.stream_opening import opened as accepted

        opened: list[Opening] = []
        accepted.set(opened)
        with self.binding():
            result = lambda_handler(event, context)
        if not opened or result.get("statusCode") != 200:
            self._hand_over(send_result(self.send, result))
            return
        headers = [
            (b"content-type", stream.CONTENT_TYPE.encode()),
            (b"cache-control", b"no-store"),
            (stream.HEARTBEAT_HEADER.encode(), str(self.heartbeat_ms).encode()),
        ]
        self._hand_over(self.send({"type": "http.response.start", "status": 200, "headers": headers}))
        try:
            self._follow(opened[0], bytes(result["body"]))
            self._hand_over(self.send({"type": "http.response.body", "body": b"", "more_body": False}))
        except _Gone:
            pass

    def _follow(self, opening, first: bytes) -> None:
        """Send the first batch, then each next one as the store has it, until the client goes or a read fails."""
        self._write(stream.frame(first))
        offset, said_at = opening.next_offset, time.monotonic()
        while True:
            if self.gone.is_set():
                raise _Gone()
            try:
                with self.binding():
                    batch = consume_records(
                        get_store(),
                        opening.topic,
                        opening.queue,
                        offset,
                        opening.max_messages,
                        opening.max_bytes,
                        opening.chosen_by,
                        self.heartbeat_ms,
                    )
            except TideMQError as error:  # out of range now, or the store is closing: the client reopens
                log.info("stream of %s/%s ends at %d: %s", opening.topic, opening.queue, offset, error)
                return
            now = time.monotonic()
            if batch.count or batch.next_offset != offset:
                self._write(stream.frame(codec.encode_consume(batch)))
                offset, said_at = batch.next_offset, now
            elif now - said_at >= self.heartbeat_ms / 1000:
                self._write(stream.HEARTBEAT)
                said_at = now
            else:  # the wait ended before a message was readable (NOT_YET_READABLE_S)
                time.sleep(NOT_YET_READABLE_S)

    def _write(self, data: bytes) -> None:
        self._hand_over(self.send({"type": "http.response.body", "body": data, "more_body": True}))

    def _hand_over(self, sending) -> None:
        """Run a send on the event loop and wait until the transport took it (flow control); _Gone if the client
        went (or the server's loop stopped) first."""
        try:
            future = asyncio.run_coroutine_threadsafe(sending, self.loop)
        except RuntimeError:  # the loop is closed
            sending.close()
            raise _Gone() from None
        while True:
            try:
                future.result(timeout=HAND_OVER_CHECK_S)
                return
            except TimeoutError:
                if self.gone.is_set():
                    future.cancel()
                    raise _Gone() from None
