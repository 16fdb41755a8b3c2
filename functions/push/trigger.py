"""Setting push delivery going: what a produce (or a change of subscription) calls, event-driven, never polled.

`TIDEMQ_PUSH_MODE=local`: the process's push worker (started by the local gateway) wakes the groups; with no
worker running the call does nothing, and the worker catches up when it starts. `lambda`: the push function
(`TIDEMQ_PUSH_FUNCTION`) is invoked asynchronously (InvocationType=Event) with a `shared.models.PushEvent`.
Either way only when some group pushes from the topic (`subscribers` answers without a store read on most
calls). A failed invoke is logged, never failed back to the producer: its messages are stored, and the next
produce of the topic delivers them.
"""

from __future__ import annotations

import threading
from functools import cache

from functions.api.observability import logger
from functions.logic.targets import lambda_client
from shared.models import PushEvent
from shared.settings import PushMode, get_settings
from tidemq_store import MessageStore
from tidemq_store.clock import now_ms

from .subscribers import Subscribers
from .worker import PushWorker

_lock = threading.Lock()
_worker: PushWorker | None = None


@cache
def subscribers() -> Subscribers:
    """This process's knowledge of who pushes from which topic."""
    return Subscribers(get_settings().push_subscribers_ttl_s)


def start_worker(store: MessageStore) -> PushWorker:
    """Start this process's local push worker (and its catch-up); the local gateway calls this at startup."""
    global _worker
    settings = get_settings()
    with _lock:
        if _worker is None:
            worker = PushWorker(store, subscribers(), settings.push_threads, settings.push_target_timeout_s)
            _worker = worker.start()
        return _worker


def stop_worker() -> None:
    """Stop the local push worker, if one runs (before the store closes)."""
    global _worker
    with _lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.close()


def notify(store: MessageStore, topic: str) -> None:
    """`topic` has new messages: have them pushed to the groups pushing from it."""
    groups = subscribers().of(store, topic)
    if not groups:
        return
    if get_settings().push_mode is PushMode.LAMBDA:
        invoke_push_function(PushEvent(topic=topic))
    elif _worker is not None:
        for group in groups:
            _worker.wake(group)


def subscription_changed(store: MessageStore, group: str, topic: str | None) -> None:
    """`group` now pushes from `topic` (None: no longer pushes): forget the cached subscribers and deliver
    what the group has waiting. In Lambda mode once more after the subscribers' TTL too, when every warm
    produce function has seen the change (until then one may store a message without invoking us)."""
    subscribers().invalidate()
    if topic is None:
        return
    if get_settings().push_mode is PushMode.LAMBDA:
        invoke_push_function(PushEvent(topic=topic, group=group))
        settled = now_ms() + int(get_settings().push_subscribers_ttl_s * 1000)
        invoke_push_function(PushEvent(topic=topic, group=group, not_before_ms=settled))
    elif _worker is not None:
        _worker.wake(group)


def invoke_push_function(event: PushEvent) -> None:
    """Invoke the push function asynchronously with `event` (Lambda queues it and retries on throttling)."""
    function = get_settings().push_function
    try:
        lambda_client().invoke(FunctionName=function, InvocationType="Event",
                                Payload=event.model_dump_json(exclude_defaults=True).encode())  # fmt: skip
    except Exception:  # the produce succeeded; the next one of this topic delivers what this one would have
        logger.exception("could not invoke the push function %s for topic %s", function, event.topic)
