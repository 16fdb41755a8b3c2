"""Local API gateway: a real HTTP server that turns each request into an API Gateway HTTP API
(payload v2.0) event and calls the very `lambda_handler` the deployed function exports.

    python -m functions.local_gateway       # what `make run` starts; TIDEMQ_HOST / TIDEMQ_PORT

`running_gateway` starts one as a child process on a free loopback port (tests and benchmarks).

Handlers run in worker threads, so concurrent requests really run concurrently (and share group
commits), with one store per process as in a Lambda execution environment. Long polls (consumes and KV watches
with `wait_ms`) run on threads of their own, at most `TIDEMQ_GATEWAY_LONG_POLLS` at once (one more is a 503 at
once), so however many wait, every other request finds a handler thread. A body is read as it arrives and refused
with a 413 as soon as it (or the length it declares) passes `TIDEMQ_MAX_REQUEST_BYTES`, before the rest is sent. A
binary body goes to the function as the bytes that came: the event is handed over in this process, so it needs no
base64 (in Lambda, API Gateway base64-encodes it and the function decodes it once). A text body that is not UTF-8
goes base64-encoded, as API Gateway sends it, never with its bad bytes replaced.

With `TIDEMQ_PUSH_MODE=local` (the default) the process also runs the push worker (`functions.push.worker`), where
AWS would invoke the push function: started here, it is the push notifier the handlers give the produce and
subscription logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pybase64
import uvicorn

from functions.api import bounds
from functions.api.auth import secret_box
from functions.api.binary import LOCAL_API_ID
from functions.api.errors import no_route
from functions.logic import users
from functions.push import trigger
from functions.routes import Route, handler_for, routes
from functions.store import aws_endpoint, close_store, get_store
from shared.credentials import Credentials, write_profile
from shared.local_aws import free_port
from shared.settings import AuthMode, PushMode, Settings, get_settings
from tidemq_store import Backend, MessageStore
from tidemq_store.clock import now_ms
from tidemq_store.errors import InvalidConfiguration, Overloaded, RequestTooLarge

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
    for route in routes() if table is None else table:
        if route.method == method:
            found = route.pattern.match(path)
            if found:
                return route, found.groupdict()
    return None


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
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = name.decode("latin-1").lower()
        headers[key] = f"{headers[key]},{value.decode('latin-1')}" if key in headers else value.decode("latin-1")
    raw_query = scope.get("query_string", b"").decode("latin-1")
    query: dict[str, str] = {}
    for key, value in parse_qsl(raw_query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    content_type = headers.get("content-type", "")
    declared_text = content_type.startswith(TEXT_TYPES)
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


class LongPolls:
    """Where consumes that may wait (`wait_ms` > 0) run: threads of their own, at most `limit` at once, so that
    however many wait, the handler threads stay free for every other route. One more is refused at once
    (Overloaded, a 503 the SDK retries), not queued behind waits of up to TIDEMQ_MAX_GET_WAIT_MS."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting = 0  # changed on the event loop only
        self.executor = ThreadPoolExecutor(limit, thread_name_prefix="long-poll")

    @staticmethod
    def wants(route: Route, query: str) -> bool:
        """Whether a request may wait: a consume or a KV watch with a positive `wait_ms` (a malformed one fails
        validation)."""
        if route.function not in ("consume", "kv"):
            return False
        wait_ms = dict(parse_qsl(query)).get("wait_ms", "")
        return wait_ms.isdigit() and int(wait_ms) > 0

    def refusal(self) -> Overloaded | None:
        """Why one more long poll is refused now; None while there is room."""
        if self.waiting < self.limit:
            return None
        return Overloaded(f"{self.limit} long polls are waiting in this gateway already; send it again shortly")

    async def run(self, handler, event: dict[str, Any], context: LocalContext) -> dict[str, Any]:
        self.waiting += 1
        try:  # in a copy of this context, as asyncio.to_thread runs handlers
            call = functools.partial(contextvars.copy_context().run, handler, event, context)
            return await asyncio.get_running_loop().run_in_executor(self.executor, call)
        finally:
            self.waiting -= 1


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


async def send_response(send, status: int, headers: dict[str, str], body: bytes) -> None:
    raw_headers = [(k.lower().encode(), str(v).encode()) for k, v in headers.items()]
    if not any(k == b"content-length" for k, _ in raw_headers):
        raw_headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def _start_schedule():
    """With the serverless backend, what AWS runs on EventBridge schedules runs here on timers (the maintenance
    function: upload to the cold tier, clean-up, retention); None with the embedded engine, which does its own."""
    settings = get_settings()
    if settings.backend is not Backend.SERVERLESS:
        return None
    from functions.maintenance.schedule import LocalSchedule

    return LocalSchedule(settings.maintenance_interval_s, settings.clean_interval_s, LocalContext).start()


def start_pools() -> None:
    """The threads handlers run on (in the running event loop): a pool for requests, and one for long polls."""
    global _long_polls
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(get_settings().gateway_threads, thread_name_prefix="handler")
    )
    _long_polls = LongPolls(get_settings().gateway_long_polls)


async def app(scope, receive, send) -> None:
    """The ASGI application uvicorn serves."""
    if scope["type"] == "lifespan":
        schedule = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                start_pools()
                try:
                    store = await asyncio.to_thread(get_store)  # open (and recover) the store before serving
                except InvalidConfiguration as error:  # say what to change, without a traceback
                    await send({"type": "lifespan.startup.failed", "message": f"TideMQ cannot start: {error}"})
                    return
                aws = aws_endpoint()
                if store.tier_medium:
                    via = f" via {aws}" if aws is not None and store.tier_medium.startswith("s3:") else ""
                    print(f"cold tier {store.tier_medium}{via}, reads {get_settings().tier_level}", flush=True)
                if get_settings().backend is Backend.SERVERLESS:
                    print(f"DynamoDB via {aws}", flush=True)
                await asyncio.to_thread(first_super_user, store)
                if get_settings().push_mode is PushMode.LOCAL:
                    await asyncio.to_thread(trigger.start_worker, store)  # the notifier; it catches up
                schedule = _start_schedule()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if schedule is not None:
                    await asyncio.to_thread(schedule.stop)
                await asyncio.to_thread(trigger.stop_worker)
                await asyncio.to_thread(close_store)
                await send({"type": "lifespan.shutdown.complete"})
                return
    try:
        body = await read_body(scope, receive, get_settings().max_request_bytes)
    except RequestTooLarge as error:
        await refuse(send, error)
        return
    matched = match_route(scope["method"], scope["path"])
    if matched is None:
        refused = no_route(scope["method"], scope["path"])
        await send_response(send, refused.status_code, refused.headers, refused.body.encode())
        return
    route, path_parameters = matched
    request_id = str(uuid.uuid4())
    event = to_event(scope, body, route, path_parameters, request_id)
    await send_result(send, await call_function(route, event, LocalContext(f"tidemq-{route.function}", request_id)))


async def call_function(route: Route, event: dict[str, Any], context: LocalContext) -> dict[str, Any]:
    """Run the function serving `route` on `event`, as Lambda would: a long poll on a thread of its own (or a 503
    when there are too many), anything else on a handler thread; a function that fails is a 500."""
    handler = handler_for(route.function)
    long_polls = _long_polls if _long_polls is not None and _long_polls.wants(route, event["rawQueryString"]) else None
    if long_polls is not None and (refusal := long_polls.refusal()) is not None:
        return as_result(bounds.refused(refusal), **{"retry-after": "1"})
    try:
        if long_polls is not None:
            return await long_polls.run(handler, event, context)
        return await asyncio.to_thread(handler, event, context)
    except Exception:  # as API Gateway does when a Lambda function fails: a bug or an outage, never the client
        logging.getLogger("tidemq.gateway").exception(
            "function %s failed on %s %s", route.function, event["requestContext"]["http"]["method"], event["rawPath"]
        )
        return {"statusCode": 500, "headers": {"content-type": "application/json"}, "body": INTERNAL_ERROR}


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
    await send_response(send, int(result.get("statusCode", 200)), headers, data)


def first_super_user(store: MessageStore) -> None:
    """With authentication on and no user in the store yet, make the first super user and write its credentials,
    readable by the owner only, to `<home>/credentials`, where the CLI and SDK look by default."""
    settings = get_settings()
    if settings.auth is AuthMode.OFF:
        return
    created = users.bootstrap_super_user(store, secret_box(), users.FIRST_SUPER_USER)
    path = settings.home / "credentials"
    if created is None:
        if not path.exists():
            print(f"the store has users already; no credentials written to {path}", flush=True)
        return
    url = f"http://{settings.host}:{settings.port}"
    comment = f"TideMQ credentials of super user {created.name!r}, made by the local gateway on its first start."
    write_profile(path, Credentials(created.name, created.secret_key, url), comment=comment)
    print(f"super user {created.name!r} made; its credentials are in {path} (readable by you only)", flush=True)


def check_exposure(settings: Settings) -> None:
    """Refuse to serve without authentication on anything but a loopback address."""
    if settings.auth is AuthMode.ON:
        return
    addresses = {info[4][0] for info in socket.getaddrinfo(settings.host, settings.port, proto=socket.IPPROTO_TCP)}
    exposed = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if exposed:
        raise SystemExit(
            f"TIDEMQ_AUTH=off lets anyone do anything: it is refused on {settings.host} ({', '.join(exposed)}); "
            "listen on 127.0.0.1, or keep authentication on"
        )


def main() -> None:
    # Locally, EMF metric lines would drown the console; POWERTOOLS_METRICS_DISABLED=false brings them back.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    settings = get_settings()
    check_exposure(settings)
    print(f"TideMQ local gateway on http://{settings.host}:{settings.port} (data in {settings.home.resolve()})")
    # Once shut down, uvicorn raises again the signal that stopped it: as SystemExit, so that this process's atexit
    # hooks run (the store closed, a LocalStack it started stopped with its JVM) instead of dying with them undone.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", lifespan="on")


@contextlib.contextmanager
def running_gateway(
    home: Path, command: Sequence[str] = ("-m", "functions.local_gateway"), **env: str
) -> Iterator[str]:
    """Run a gateway process serving the store in `home` on a free loopback port (`env`: more settings,
    e.g. TIDEMQ_FLUSH_DISK_TYPE="ASYNC"; `command`: Python's arguments, a test's wrapper of this module); yield
    its base URL, then stop it with SIGTERM."""
    port = free_port()
    environment = {**os.environ, "TIDEMQ_PORT": str(port), "TIDEMQ_HOME": str(home), **env}
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    server = start_server(command, environment, home / "gateway.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(server, base, home / "gateway.log")
        yield base
    finally:
        stop_server(server)


def start_server(command: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start `python <command>` (a gateway, a container), its output appended to `log`: a file, not a pipe (a full
    pipe would stall the server)."""
    with log.open("ab") as output:
        return subprocess.Popen([sys.executable, *command], env=env, stdout=output, stderr=subprocess.STDOUT)


def wait_healthy(server: subprocess.Popen, base: str, log: Path, timeout_s: float = 180) -> None:
    """Return once `base`/health answers; RuntimeError with the server's output (and the server killed) if it
    stops first or does not answer within `timeout_s` (a gateway that starts LocalStack takes 10-20 s, more on
    busy cores)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{base}/health", timeout=1).close()
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):  # not up yet, or slow to answer
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"{base} did not start: {log.read_text(errors='replace')}") from None
            time.sleep(0.1)


def stop_server(server: subprocess.Popen, timeout_s: float = 90) -> None:
    """Stop a server with SIGTERM, and SIGKILL if it takes longer than `timeout_s` (its own shutdown: a LocalStack
    it started takes up to ~25 s to stop)."""
    if server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
