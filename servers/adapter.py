"""HTTP in, Lambda out: each request as an API Gateway HTTP API (payload v2.0) event, handed to the very
`lambda_handler` the deployed function exports, and its result as the HTTP answer. The local gateway and the
BrokerContainer serve the handlers through this.

Handlers run in worker threads, so concurrent requests really run concurrently (and share group commits), with one
store per process as in a Lambda execution environment. Long polls (consumes, KV watches and check-back takes with
`wait_ms`) run on threads of their own, at most `TIDEMQ_GATEWAY_LONG_POLLS` at once (one more is a 503 at once), so
however many wait, every other request finds a handler thread. A body is read as it arrives and refused with a 413
as soon as it (or the length it declares) passes `TIDEMQ_MAX_REQUEST_BYTES`, before the rest is sent. A binary body
goes to the function as the bytes that came: the event is handed over in this process, so it needs no base64 (in
Lambda, API Gateway base64-encodes it and the function decodes it once). A text body that is not UTF-8 goes
base64-encoded, as API Gateway sends it, never with its bad bytes replaced.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import pybase64

from functions.api import bounds
from functions.api.binary import LOCAL_API_ID
from functions.api.routing import Route
from functions.routes import routes
from shared.settings import GatewayDispatch, get_settings
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import Overloaded, RequestTooLarge

T = TypeVar("T")
TEXT_TYPES = ("text/", "application/json", "application/x-ndjson", "application/xml")


@dataclass
class LocalContext:
    """The parts of the Lambda context object that handlers and Powertools read."""

    function_name: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""
    deadline_ms: int = field(default_factory=lambda: now_ms() + 30_000)

    def __post_init__(self) -> None:
        self.invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - now_ms())


def match_route(method: str, path: str, table: Sequence[Route] | None = None) -> tuple[Route, dict[str, str]] | None:
    """The route of `table` (default: the HTTP API's) serving `method` at `path` and its path parameters; None if
    there is none (`no_route` says whether that is a 404 or a 405)."""
    for route in _by_method(routes() if table is None else table).get(method, ()):
        found = route.pattern.match(path)
        if found:
            return route, found.groupdict()
    return None


_indexed: dict[int, tuple[Sequence[Route], dict[str, tuple[Route, ...]]]] = {}


def _by_method(table: Sequence[Route]) -> dict[str, tuple[Route, ...]]:
    """The routes of `table` by method, in order, their patterns compiled: made once per table (the tables are
    made once: `routes()`, a container's), so that a request is matched against its method's routes alone."""
    known = _indexed.get(id(table))
    if known is None or known[0] is not table:
        by_method: dict[str, list[Route]] = {}
        for route in table:
            by_method.setdefault(route.method, []).append(route)
            route.pattern  # noqa: B018 (compiled now, not on a request)
        known = _indexed[id(table)] = (table, {method: tuple(matching) for method, matching in by_method.items()})
    return known[1]


def to_event(
    scope: dict[str, Any],
    body: bytes,
    route: Route,
    path_parameters: dict[str, str],
    request_id: str,
    path: str | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API v2.0 event for one request; `path`: the path the function routes on, when it is not
    the whole path sent (a container's broker, under its prefix: `requestContext.http.path` keeps what was sent)."""
    headers = request_headers(scope)
    raw_query = scope.get("query_string", b"").decode("latin-1")
    query = query_parameters(raw_query)[0]
    content_type = headers.get("content-type", "")
    declared_text = not content_type or content_type.startswith(TEXT_TYPES)  # none: JSON, as the resolvers read it
    text = _utf8(body) if body and declared_text else None
    if not body or text is not None:
        encoded = text
    elif declared_text:  # not UTF-8: base64, as API Gateway sends it, for the function to judge
        encoded = pybase64.b64encode(body).decode()
    else:  # binary, handed over in this process as the bytes that came; a Lambda event (JSON) carries base64
        encoded = body
    now = time.time()
    client = scope.get("client") or ("127.0.0.1", 0)
    return {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": scope["path"] if path is None else path,
        "rawQueryString": raw_query,
        "headers": headers,
        "queryStringParameters": query or None,
        "pathParameters": path_parameters or None,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": LOCAL_API_ID,
            "domainName": headers.get("host", "localhost"),
            "domainPrefix": "local",
            "http": {
                "method": scope["method"],
                "path": scope["path"],
                "protocol": f"HTTP/{scope.get('http_version', '1.1')}",
                "sourceIp": client[0],
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route.route_key,
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": encoded or None,  # `binary.request_bytes` takes text, base64 or bytes
        "isBase64Encoded": isinstance(encoded, str) and text is None and bool(body),
        "stageVariables": None,
    }


def request_headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers as API Gateway passes them: lower-case names, a repeated one's values joined by commas."""
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = name.decode("latin-1").lower()
        headers[key] = f"{headers[key]},{value.decode('latin-1')}" if key in headers else value.decode("latin-1")
    return headers


def query_parameters(raw_query: str) -> tuple[dict[str, str], bool]:
    """The query's parameters as API Gateway passes them (a repeated one's values joined by commas), and whether
    one is repeated."""
    query: dict[str, str] = {}
    repeated = False
    for key, value in parse_qsl(raw_query, keep_blank_values=True):
        repeated = repeated or key in query
        query[key] = f"{query[key]},{value}" if key in query else value
    return query, repeated


def _utf8(body: bytes) -> str | None:
    """A text body as text, or None if it is not UTF-8 (the function then gets it base64-encoded, and judges it)."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


async def read_body(scope, receive, limit: int) -> bytes:
    """The request body, read as it arrives: RequestTooLarge as soon as it passes `limit` bytes, or at once when
    its Content-Length says it will, so the rest is never read (nor held in memory)."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"the request body is {int(declared)} bytes; the limit is {limit}")
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"the request body is over {limit} bytes, the limit")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def body_or_refusal(scope, receive, send) -> bytes | None:
    """The request body (`read_body` within `TIDEMQ_MAX_REQUEST_BYTES`), or None once the request was answered
    with a 413 for being over it."""
    try:
        return await read_body(scope, receive, get_settings().max_request_bytes)
    except RequestTooLarge as error:
        await refuse(send, error)
        return None


class Threads:
    """Threads calls run on (`executor`; None: the event loop's default one), with at most `limit` calls admitted
    at once, running or waiting for a thread: one more is refused at once (Overloaded, a 503 with Retry-After that
    the SDK retries), so that a server with more callers than it can serve keeps its queue and memory bounded and
    answers busy rather than letting its callers time out behind a queue that only grows."""

    def __init__(self, limit: int, what: str, executor: ThreadPoolExecutor | None = None) -> None:
        self.limit, self.what, self.executor = limit, what, executor
        self.admitted = 0  # changed on the event loop only

    def refusal(self) -> Overloaded | None:
        """Why one more call is refused now; None while there is room."""
        if self.admitted < self.limit:
            return None
        return Overloaded(f"{self.limit} {self.what} in this server already; send it again shortly")

    async def run(self, call: Callable[[], T]) -> T:
        self.admitted += 1
        try:  # in a copy of this context, as asyncio.to_thread runs calls
            in_context = functools.partial(contextvars.copy_context().run, call)
            return await asyncio.get_running_loop().run_in_executor(self.executor, in_context)
        finally:
            self.admitted -= 1


class LongPolls(Threads):
    """Where consumes that may wait (`wait_ms` > 0) run: threads of their own, at most `limit` at once, so that
    however many wait, the handler threads stay free for every other route. One more is refused at once, not
    queued behind waits of up to TIDEMQ_MAX_GET_WAIT_MS."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit, "long polls are waiting", ThreadPoolExecutor(limit, thread_name_prefix="long-poll"))

    @staticmethod
    def wants(route: Route, query: str) -> bool:
        """Whether a request may wait: a consume, a KV watch or a producer's take of its check-backs with a positive
        `wait_ms` (a malformed one fails validation)."""
        if route.function not in ("consume", "kv", "produce"):
            return False
        wait_ms = dict(parse_qsl(query)).get("wait_ms", "")
        return wait_ms.isdigit() and int(wait_ms) > 0


_long_polls: LongPolls | None = None


async def refuse(send, error: RequestTooLarge | Overloaded) -> None:
    """Answer a request the gateway refuses itself, as API Gateway answers what no function sees (the body says
    why, as the functions' errors do). A body left unread closes the connection rather than being read."""
    response = bounds.refused(error)
    headers = {"content-type": response.content_type}
    if isinstance(error, RequestTooLarge):
        headers["connection"] = "close"
    else:
        headers["retry-after"] = "1"
    await send_response(send, response.status_code, headers, response.body.encode())


async def send_response(
    send, status: int, headers: dict[str, str], body: bytes, repeated: Sequence[tuple[str, str]] = ()
) -> None:
    """Answer; `repeated`: headers sent once per value (Set-Cookie)."""
    raw_headers = [(k.lower().encode(), str(v).encode()) for k, v in [*headers.items(), *repeated]]
    if not any(k == b"content-length" for k, _ in raw_headers):
        raw_headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


_handlers: Threads | None = None


def start_pools() -> None:
    """The threads handlers run on (in the running event loop): a pool for requests, and one for long polls."""
    global _handlers, _long_polls
    settings = get_settings()
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(settings.gateway_threads, thread_name_prefix="handler")
    )
    _handlers = Threads(settings.gateway_threads + settings.gateway_queue, "requests are being served or waiting")
    _long_polls = LongPolls(settings.gateway_long_polls)


async def call_function(route: Route, event: dict[str, Any], context: LocalContext) -> dict[str, Any]:
    """Run the function serving `route` on `event`, as Lambda would: a long poll on a thread of its own (or a 503
    when there are too many), anything else on a handler thread; a function that fails is a 500."""
    what = f"function {route.function} failed on {event['requestContext']['http']['method']} {event['rawPath']}"
    result = await _run(route, event["rawQueryString"], functools.partial(route.handler, event, context), what)
    assert result is not None  # a function always answers
    return result


async def _run(route: Route, raw_query: str, call: Callable[[], dict | None], what: str) -> dict[str, Any] | None:
    """`call` (a function, or a hot route's lean translation) on a long-poll thread if the request may wait, else on
    a handler thread (either a 503 when too many wait already); one that fails is a 500, logged as `what`."""
    long_polls = _long_polls if _long_polls is not None and _long_polls.wants(route, raw_query) else None
    pool = long_polls or _handlers
    if pool is not None and (refusal := pool.refusal()) is not None:
        return as_result(bounds.refused(refusal), **{"retry-after": "1"})
    try:
        if pool is not None:
            return await pool.run(call)
        return await asyncio.to_thread(call)
    except Exception:  # as API Gateway does when a Lambda function fails: a bug or an outage, never the client
        logging.getLogger("tidemq.gateway").exception(what)
        return {"statusCode": 500, "headers": {"content-type": "application/json"}, "body": INTERNAL_ERROR}


async def dispatch(
    scope: dict[str, Any], body: bytes, matched: tuple[Route, dict[str, str]], path: str | None = None
) -> dict[str, Any]:
    """The answer of the function serving the route `matched` (`match_route`'s route and path parameters): a hot
    route's straight from its route function (servers/lean.py, unless TIDEMQ_GATEWAY_DISPATCH=events or it leaves
    the request to the resolver), any other request's as an API Gateway event to the function's `lambda_handler`
    (`path`: as `to_event` takes it)."""
    route, path_parameters = matched
    # Imported here, as `routes()` imports the functions: once a server's settings are in place (they read them).
    from servers import lean

    hot = lean.HOT_ROUTES.get(route.route_key) if get_settings().gateway_dispatch is GatewayDispatch.LEAN else None
    if hot is not None:
        raw_query = scope.get("query_string", b"").decode("latin-1")
        query, repeated = query_parameters(raw_query)
        client = scope.get("client") or ("127.0.0.1", 0)
        request = lean.LeanRequest(
            scope["method"],
            scope["path"],
            path_parameters,
            raw_query,
            None if repeated else query,
            request_headers(scope),
            body,
            client[0],
        )
        what = f"the lean dispatch of {route.route_key} failed on {scope['path']}"
        result = await _run(route, raw_query, functools.partial(lean.serve, hot, request), what)
        if result is not None:
            return result
    request_id = str(uuid.uuid4())
    event = to_event(scope, body, route, path_parameters, request_id, path)
    return await call_function(route, event, LocalContext(f"tidemq-{route.function}", request_id))


INTERNAL_ERROR = '{"message":"Internal Server Error"}'


def as_result(response, **headers: str) -> dict[str, Any]:
    """A Powertools `Response` (with more `headers`) as a function's result."""
    return {"statusCode": response.status_code, "headers": {**response.headers, **headers}, "body": response.body}


async def send_result(send, result: dict[str, Any]) -> None:
    """Answer with what a function returned (binary replies handed over as they are, base64 decoded)."""
    payload = result.get("body") or ""
    if isinstance(payload, memoryview):  # a binary reply, handed over as it is (functions/api/binary.py)
        data = payload.obj if isinstance(payload.obj, bytes) else bytes(payload)
    else:
        data = pybase64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
    headers = dict(result.get("headers") or {})
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[name] = ",".join(values)
    cookies = [("set-cookie", cookie) for cookie in result.get("cookies") or ()]  # payload v2: one header each
    await send_response(send, int(result.get("statusCode", 200)), headers, data, cookies)
