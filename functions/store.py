"""The one `MessageStore` of this process: a Lambda execution environment or the local gateway.

Handlers hold no state between calls; the store is opened on first use and reused by every
invocation the environment serves (as RIP-20's stateless compute reuses its storage client).

A BrokerContainer (servers/container) holds a store of its own, where its users live, and one store per broker:
it serves each broker's requests with that broker's store bound (`serving`), so the same handlers reach the
broker's store through `get_store()`, while users are always looked up in the process's store (`process_store`).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from shared import aws
from shared.aws import AwsEndpoint, LocalAwsStarter
from shared.settings import get_settings
from tidemq_store import Backend, MessageStore, TierMedium, open_store

_lock = threading.Lock()
_store: MessageStore | None = None
_aws: AwsEndpoint | None = None
_local_aws: LocalAwsStarter | None = None
_serving: ContextVar[MessageStore | None] = ContextVar("tidemq_serving_store", default=None)


def get_store() -> MessageStore:
    """The store this request is served from: the broker's in a container (`serving`), else the process's."""
    bound = _serving.get()
    return bound if bound is not None else process_store()


@contextmanager
def serving(store: MessageStore) -> Iterator[None]:
    """Serve from `store` in this context (a container's broker); threads started in a copy of it do too."""
    token = _serving.set(store)
    try:
        yield
    finally:
        _serving.reset(token)


def install_store(store: MessageStore) -> None:
    """Make `store`, opened by the host, the process's store (a container's own, where its users live)."""
    global _store
    with _lock:
        if _store is not None:
            raise RuntimeError("this process has its store already")
        _store = store
        atexit.register(store.close)


def allow_local_aws(start: LocalAwsStarter | None) -> None:
    """Let this process start the local AWS its settings may ask for (`TIDEMQ_LOCAL_AWS`): the local servers do,
    with `devtools.local_aws.start`; a Lambda function never does."""
    global _local_aws
    _local_aws = start


def process_store() -> MessageStore:
    """The process's store, opened on first use. S3 or DynamoDB are looked for where the settings say
    (`aws.connect`): a misconfiguration fails here, at start-up, saying what to change."""
    global _store, _aws
    if _store is None:
        with _lock:
            if _store is None:
                settings = get_settings()
                if settings.tier is TierMedium.S3 or settings.backend is Backend.SERVERLESS:
                    _aws = aws.connect(settings.local_aws, settings.home, _local_aws)
                _store = open_store(settings)
                atexit.register(_store.close)
                for hook in _open_hooks:
                    hook(_store)
    return _store


_open_hooks: list[Callable[[MessageStore], None]] = []


def when_opened(hook: Callable[[MessageStore], None]) -> None:
    """Call `hook` with the process's store once it is opened (at once if it is open already)."""
    with _lock:
        _open_hooks.append(hook)
        opened = _store
    if opened is not None:
        hook(opened)


def aws_endpoint() -> AwsEndpoint | None:
    """Where this process reaches S3 and DynamoDB, once a store that needs them is open (None: it needs neither)."""
    return _aws


def close_store() -> None:
    """Close the store (the local gateway calls this on shutdown)."""
    global _store
    with _lock:
        if _store is not None:
            _store.close()
            atexit.unregister(_store.close)
            _store = None
