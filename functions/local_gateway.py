"""Local API gateway: a real HTTP server that turns each request into an API Gateway HTTP API
(payload v2.0) event and calls the very `lambda_handler` the deployed function exports.

    python -m functions.local_gateway       # what `make run` starts; TIDEMQ_HOST / TIDEMQ_PORT

`running_gateway` starts one as a child process on a free loopback port (tests and benchmarks).

Handlers run in worker threads, so concurrent requests really run concurrently (and share group
commits), with one store per process as in a Lambda execution environment. With `TIDEMQ_PUSH_MODE=local`
(the default) the process also runs the push worker (`functions.push.worker`), where AWS would invoke the
push function: started here, it is the push notifier the handlers give the produce and subscription logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
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

from functions.api.errors import no_route
from functions.push import trigger
from functions.routes import Route, handler_for, routes
from functions.store import close_store, get_store
from shared.local_aws import free_port
from shared.settings import PushMode, get_settings
from tidemq_store import Backend
from tidemq_store.clock import now_ms

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


def match_route(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The route serving `method` at `path` and its path parameters; None if there is none (`no_route` says
    whether that is a 404 or a 405)."""
    for route in routes():
        if route.method == method:
            found = route.pattern.match(path)
            if found:
                return route, found.groupdict()
    return None


def to_event(
    scope: dict[str, Any], body: bytes, route: Route, path_parameters: dict[str, str], request_id: str
) -> dict[str, Any]:
    """An API Gateway HTTP API v2.0 event for one request."""
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = name.decode("latin-1").lower()
        headers[key] = f"{headers[key]},{value.decode('latin-1')}" if key in headers else value.decode("latin-1")
    raw_query = scope.get("query_string", b"").decode("latin-1")
    query: dict[str, str] = {}
    for key, value in parse_qsl(raw_query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    content_type = headers.get("content-type", "")
    is_text = not body or content_type.startswith(TEXT_TYPES)
    now = time.time()
    client = scope.get("client") or ("127.0.0.1", 0)
    return {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": scope["path"],
        "rawQueryString": raw_query,
        "headers": headers,
        "queryStringParameters": query or None,
        "pathParameters": path_parameters or None,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
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
        "body": (body.decode("utf-8", "replace") if is_text else pybase64.b64encode(body).decode()) if body else None,
        "isBase64Encoded": not is_text,
        "stageVariables": None,
    }


async def _read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send(send, status: int, headers: dict[str, str], body: bytes) -> None:
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


async def app(scope, receive, send) -> None:
    """The ASGI application uvicorn serves."""
    if scope["type"] == "lifespan":
        schedule = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # Long polls hold a thread each: give handlers more threads than asyncio's default.
                asyncio.get_running_loop().set_default_executor(
                    ThreadPoolExecutor(get_settings().gateway_threads, thread_name_prefix="handler")
                )
                store = await asyncio.to_thread(get_store)  # open (and recover) the store before serving
                if store.tier_medium:
                    via = os.environ.get("AWS_ENDPOINT_URL", "AWS")
                    print(f"cold tier {store.tier_medium} via {via}, reads {get_settings().tier_level}", flush=True)
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
    body = await _read_body(receive)
    matched = match_route(scope["method"], scope["path"])
    if matched is None:
        refused = no_route(scope["method"], scope["path"])
        await _send(send, refused.status_code, refused.headers, refused.body.encode())
        return
    route, path_parameters = matched
    request_id = str(uuid.uuid4())
    event = to_event(scope, body, route, path_parameters, request_id)
    context = LocalContext(f"tidemq-{route.function}", request_id)
    try:
        result = await asyncio.to_thread(handler_for(route.function), event, context)
    except Exception:  # as API Gateway does when a Lambda function fails: a bug or an outage, never the client
        logging.getLogger("tidemq.gateway").exception(
            "function %s failed on %s %s", route.function, scope["method"], scope["path"]
        )
        await _send(send, 500, {"content-type": "application/json"}, b'{"message":"Internal Server Error"}')
        return
    payload = result.get("body") or ""
    data = pybase64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
    headers = dict(result.get("headers") or {})
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[name] = ",".join(values)
    await _send(send, int(result.get("statusCode", 200)), headers, data)


def main() -> None:
    # Locally, EMF metric lines would drown the console; POWERTOOLS_METRICS_DISABLED=false brings them back.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    settings = get_settings()
    print(f"TideMQ local gateway on http://{settings.host}:{settings.port} (data in {settings.home.resolve()})")
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
    log = home / "gateway.log"  # a file, not a pipe: a full pipe would stall the server
    with log.open("ab") as output:
        server = subprocess.Popen([sys.executable, *command], env=environment, stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=1).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    raise RuntimeError(f"gateway did not start: {log.read_text(errors='replace')}") from None
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
