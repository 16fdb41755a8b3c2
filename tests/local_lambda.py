"""A stand-in for the Lambda Invoke API on a loopback port, for boto3 pointed at it with
`AWS_ENDPOINT_URL_LAMBDA`: functions are Python callables registered by name, run in this process.

`RequestResponse` invocations run at once and answer as Lambda does (a raising function: 200 with
`X-Amz-Function-Error: Unhandled` and Lambda's error document). `Event` invocations answer 202 and queue;
one thread runs them in turn, as Lambda does for a function with reserved concurrency 1, each with a context
whose deadline is `timeout_s` away.
"""

from __future__ import annotations

import json
import queue
import threading
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from servers.adapter import LocalContext
from tidemq_protocol.clock import now_ms

Function = Callable[[dict[str, Any], Any], Any]


class LocalLambda:
    def __init__(self, functions: dict[str, Function], timeout_s: float = 30.0) -> None:
        self.functions = functions
        self.timeout_s = timeout_s
        self.invocations: list[tuple[str, str, dict[str, Any]]] = []  # (function, invocation type, event)
        self.results: list[Any] = []  # what each Event invocation returned, or the exception it raised
        self.errors: list[str] = []
        self._queue: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                name = unquote(self.path.split("/functions/", 1)[1].split("/", 1)[0]).split(":function:")[-1]
                event = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                kind = self.headers.get("x-amz-invocation-type", "RequestResponse")
                with service._lock:
                    service.invocations.append((name, kind, event))
                if kind == "Event":
                    service._queue.put((name, event))
                    self._answer(202, b"")
                    return
                try:
                    result = service.functions[name](event, service._context(name))
                    self._answer(200, json.dumps(result).encode())
                except Exception as error:
                    body = {"errorMessage": str(error), "errorType": type(error).__name__}
                    self._answer(200, json.dumps(body).encode(), {"X-Amz-Function-Error": "Unhandled"})

            def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in {"content-type": "application/json", **(headers or {})}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._threads = [
            threading.Thread(target=self._server.serve_forever, daemon=True),
            threading.Thread(target=self._run_events, daemon=True),
        ]

    def _context(self, name: str) -> LocalContext:
        return LocalContext(name, deadline_ms=now_ms() + int(self.timeout_s * 1000))

    def _run_events(self) -> None:
        while (item := self._queue.get()) is not None:
            name, event = item
            try:
                self.results.append(self.functions[name](event, self._context(name)))
            except Exception:
                self.errors.append(traceback.format_exc())
            finally:
                self._queue.task_done()

    def events(self, function: str) -> list[dict[str, Any]]:
        with self._lock:
            return [event for name, kind, event in self.invocations if name == function and kind == "Event"]

    def __enter__(self) -> LocalLambda:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._queue.put(None)
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=60)
