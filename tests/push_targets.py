"""Push targets for the push-delivery tests: Python callables (`python:tests.push_targets:<name>`) that
record what they receive, a real HTTP webhook server on a free loopback port, and waiting for delivery."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_lock = threading.Lock()
deliveries: list[dict[str, Any]] = []
"""Every delivery any callable below was called with, in call order."""
calls: Counter[str] = Counter()
"""Calls per message body (of a delivery's first message)."""
FLAKY_FAILURES = 2


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = 60) -> Any:
    """Wait until `condition()` is truthy and return it; fail saying `what` did not happen in `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)
    return result


def reset() -> None:
    with _lock:
        deliveries.clear()
        calls.clear()


def _record(delivery: dict[str, Any]) -> int:
    with _lock:
        deliveries.append(delivery)
        calls[delivery["messages"][0]["body"]] += 1
        return calls[delivery["messages"][0]["body"]]


def accept(delivery: dict[str, Any]) -> None:
    """Takes every delivery."""
    _record(delivery)


def reject(delivery: dict[str, Any]) -> None:
    """Fails every call."""
    _record(delivery)
    raise RuntimeError("the target is down")


def flaky(delivery: dict[str, Any]) -> None:
    """Fails the first FLAKY_FAILURES calls with each message, then takes it."""
    if _record(delivery) <= FLAKY_FAILURES:
        raise ConnectionError(f"call {calls[delivery['messages'][0]['body']]} fails")


class Webhook:
    """An HTTP server on 127.0.0.1 that records each POSTed JSON body and answers `status(body)` (200 unless
    told otherwise); stopped by leaving the `with` block."""

    def __init__(self, status: Callable[[dict[str, Any]], int] = lambda body: 200) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with webhook._lock:
                    webhook.bodies.append(body)
                status = webhook.status(body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message received, delivery by delivery."""
        with self._lock:
            bodies = list(self.bodies)
        for body in bodies:
            yield from body["messages"]

    def __enter__(self) -> Webhook:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
