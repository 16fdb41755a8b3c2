"""Push targets for the push-delivery tests: Python callables (`python:tests.push_targets:<name>`) that
record what they receive, a real HTTP webhook server on a free loopback port, and waiting for delivery; the
settings that allow them (`ALLOWED`: the Python targets here, webhooks on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

_lock = threading.Lock()
deliveries: list[dict[str, Any]] = []
"""Every delivery any callable below was called with, in call order."""
calls: Counter[str] = Counter()
"""Calls per message body (of a delivery's first message)."""
FLAKY_FAILURES = 2
hook: Callable[[dict[str, Any]], None] | None = None
"""What `hooked` does with each delivery it takes (a test's action in the middle of delivery)."""
PYTHON_TARGETS = ("accept", "reject", "flaky", "hooked")
ALLOWED = {
    "TIDEMQ_PUSH_PYTHON_TARGETS": ",".join(f"tests.push_targets:{name}" for name in PYTHON_TARGETS),
    "TIDEMQ_PUSH_ALLOWED_HOSTS": "127.0.0.1",
}
"""Settings of a server whose push tests use these targets (what `make run` allows, and these callables)."""


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = 60) -> Any:
    """Wait until `condition()` is truthy and return it; fail saying `what` did not happen in `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)
    return result


def reset() -> None:
    global hook
    with _lock:
        deliveries.clear()
        calls.clear()
        hook = None


def _record(delivery: dict[str, Any]) -> int:
    with _lock:
        deliveries.append(delivery)
        calls[delivery["messages"][0]["body"]] += 1
        return calls[delivery["messages"][0]["body"]]


def accept(delivery: dict[str, Any]) -> None:
    """Takes every delivery."""
    _record(delivery)


def hooked(delivery: dict[str, Any]) -> None:
    """Takes every delivery, after calling `hook` with it."""
    _record(delivery)
    if hook is not None:
        hook(delivery)


def reject(delivery: dict[str, Any]) -> None:
    """Fails every call."""
    _record(delivery)
    raise RuntimeError("the target is down")


def flaky(delivery: dict[str, Any]) -> None:
    """Fails the first FLAKY_FAILURES calls with each message, then takes it."""
    if _record(delivery) <= FLAKY_FAILURES:
        raise ConnectionError(f"call {calls[delivery['messages'][0]['body']]} fails")


class Received(NamedTuple):
    """One POST a webhook received: its headers (names lowercase), raw body and the body parsed."""

    headers: dict[str, str]
    raw: bytes
    body: dict[str, Any]


class Webhook:
    """An HTTP server on 127.0.0.1 that records each POST and answers `status(body)` (200 unless told
    otherwise) with `headers` and `reply` as its body; stopped by leaving the `with` block. `bodies` are the
    deliveries' JSON bodies, `pings` what setting a subscription sent, `received` every POST."""

    def __init__(
        self,
        status: Callable[[dict[str, Any]], int] = lambda body: 200,
        headers: dict[str, str] | None = None,
        reply: bytes = b"",
    ) -> None:
        self.status = status
        self.received: list[Received] = []
        self._lock = threading.Lock()
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["content-length"]))
                with webhook._lock:
                    webhook.received.append(
                        Received({k.lower(): v for k, v in self.headers.items()}, raw, json.loads(raw))
                    )
                status = webhook.status(json.loads(raw))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _of(self, event: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.headers.get("x-tidemq-event") == event]

    @property
    def deliveries(self) -> list[Received]:
        return self._of("delivery")

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.deliveries]

    @property
    def pings(self) -> list[Received]:
        return self._of("ping")

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message received, delivery by delivery."""
        for body in self.bodies:
            yield from body["messages"]

    def bodies_received(self) -> list[str]:
        """The body of each message received, in the order received."""
        return [message["body"] for message in self.messages()]

    def __enter__(self) -> Webhook:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
