"""Where a container's log lines go: RIP-31's log isolation.

Every line is logged in the context of the broker it is about, when there is one: the container serves a broker's
requests, runs its replication and checks its quota with the broker's identity (`cluster_name_id`) set in
`broker_identity`, and the threads the broker's store starts carry it too (`tidemq_store.threads`). RocketMQ tells
brokers apart by a thread-local variable or a thread-name prefix; a context variable is Python's way of doing both.

`LogRouter` is the one handler on the root logger: a line of a broker with `isolateLogEnable=true` goes to
`<logs>/<identity>/broker.log`, every other line to `<logs>/container.log`, each line also to stderr. Without
isolation, a broker's lines carry its identity in the container's file.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

broker_identity: ContextVar[str | None] = ContextVar("tidemq_broker_identity", default=None)
FORMAT = "%(asctime)s %(levelname)s [%(broker)s] %(name)s: %(message)s"


@contextmanager
def as_broker(identity: str) -> Iterator[None]:
    """Log (and start threads) as the broker `identity` in this context."""
    token = broker_identity.set(identity)
    try:
        yield
    finally:
        broker_identity.reset(token)


class LogRouter(logging.Handler):
    """The container's log handler (see the module docstring)."""

    def __init__(self, directory: Path, echo: bool = True) -> None:
        super().__init__()
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.formatter = logging.Formatter(FORMAT)
        self.container = self._file(directory / "container.log")
        self.echo = logging.StreamHandler(sys.stderr) if echo else None
        if self.echo:
            self.echo.setFormatter(self.formatter)
        self._isolated: dict[str, logging.FileHandler] = {}
        self._files = threading.Lock()

    def _file(self, path: Path) -> logging.FileHandler:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(self.formatter)
        return handler

    def isolate(self, identity: str) -> Path:
        """Send the broker's lines to a file of its own from now on; its path."""
        path = self.directory / identity / "broker.log"
        with self._files:
            if identity not in self._isolated:
                self._isolated[identity] = self._file(path)
        return path

    def forget(self, identity: str) -> None:
        """The broker is gone (or logs to the container's file again): close its file."""
        with self._files:
            handler = self._isolated.pop(identity, None)
        if handler is not None:
            handler.close()

    def emit(self, record: logging.LogRecord) -> None:
        identity = broker_identity.get()
        record.broker = identity or "container"
        target = self._isolated.get(identity) if identity else None
        (target or self.container).handle(record)
        if self.echo is not None:
            self.echo.handle(record)

    def close(self) -> None:
        with self._files:
            handlers, self._isolated = list(self._isolated.values()), {}
        for handler in [*handlers, self.container]:
            handler.close()
        super().close()


def install(directory: Path, level: int = logging.INFO) -> LogRouter:
    """Make a `LogRouter` writing under `directory` the root logger's one handler; TideMQ's loggers log at `level`."""
    router = LogRouter(directory)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(router)
    root.setLevel(logging.WARNING)
    service = logging.getLogger("tidemq")  # Powertools' logger (functions/api/observability.py) is this one
    for handler in list(service.handlers):  # its lines go through the router too, not as JSON to stdout
        service.removeHandler(handler)
    service.setLevel(level)
    service.propagate = True
    return router
