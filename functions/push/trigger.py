"""Setting push delivery going: this process's `PushNotifier` (`push_notifier`), which the handlers give the
produce and subscription logic. Event-driven, never polled; which one depends on the process:

- the local gateway (`TIDEMQ_PUSH_MODE=local`) starts the local push worker (`start_worker`), which is then the
  notifier: it wakes the groups pushing from the topic;
- with `TIDEMQ_PUSH_MODE=lambda`, a `PushFunctionNotifier`: it invokes the push function
  (`TIDEMQ_PUSH_FUNCTION`) asynchronously (InvocationType=Event) with a `tidemq_protocol.api.push.PushEvent`;
- a process in local mode with no worker running gets `NO_DELIVERY`, which does nothing: the worker catches
  up when it starts.

Either way only when some group pushes from the topic (`subscribers` answers without a store read on most
calls). A failed invoke is logged, never failed back to the producer: its messages are stored, and the next
produce of the topic delivers them.
"""

from __future__ import annotations

import threading
from functools import cache

from functions import store as store_module
from functions.logic.notifier import PushNotifier
from functions.logic.targets import TargetRules, lambda_client
from functions.observability import logger
from functions.store import get_store
from shared.settings import PushMode, get_settings
from tidemq_protocol.api.push import PushEvent
from tidemq_protocol.clock import now_ms
from tidemq_store import MessageStore

from .subscribers import Subscribers
from .worker import PushWorker

_lock = threading.Lock()
_worker: PushWorker | None = None


@cache
def subscribers() -> Subscribers:
    """This process's knowledge of who pushes from which topic."""
    return Subscribers(get_settings().push_subscribers_ttl_s)


def start_worker(store: MessageStore) -> PushWorker:
    """Start this process's local push worker, which becomes its notifier, and catch up on every push group
    as the store has them now; the local gateway calls this at startup."""
    global _worker
    settings = get_settings()
    with _lock:
        if _worker is None:
            subscribers().invalidate()  # a listing from before the start may be stale: nothing told it since
            worker = PushWorker(
                store, subscribers(), settings.push_threads, TargetRules.of(settings), settings.retry_policy
            )
            _worker = worker.start()
        return _worker


def stop_worker() -> None:
    """Stop the local push worker, if one runs (before the store closes)."""
    global _worker
    with _lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.close()


_watching = False


def watch_moved_timers() -> None:
    """Have this process set push delivery going whenever it puts due timer messages on their topic (tidemq_store/
    timer: the embedded mover, or a serverless move by a consumer's read or the maintenance job), as a produce does.
    The handlers whose process can move timers call it once, at import."""
    global _watching
    with _lock:
        if _watching:
            return
        _watching = True
    store_module.when_opened(lambda store: store.timers.add_moved_listener(_timers_moved))


def _timers_moved(topic: str, count: int) -> None:
    push_notifier().messages_stored(topic)


def push_notifier() -> PushNotifier:
    """This process's notifier, for the handlers to give the logic; see the module docstring."""
    if get_settings().push_mode is PushMode.LAMBDA:
        return PushFunctionNotifier(get_store(), subscribers())
    return _worker or NO_DELIVERY


class NoDelivery:
    """The notifier of a process that sets no delivery going: it is told, and does nothing."""

    def messages_stored(self, topic: str) -> None:
        pass

    def subscription_changed(self, group: str, topic: str | None) -> None:
        pass


NO_DELIVERY = NoDelivery()


class PushFunctionNotifier:
    """Sets push delivery going in AWS: invokes the push function asynchronously (`invoke_push_function`)."""

    def __init__(self, store: MessageStore, subscribers: Subscribers) -> None:
        self.store = store
        self.subscribers = subscribers

    def messages_stored(self, topic: str) -> None:
        """Invoke the push function for `topic`, if some group pushes from it."""
        if self.subscribers.of(self.store, topic):
            invoke_push_function(PushEvent(topic=topic))

    def subscription_changed(self, group: str, topic: str | None) -> None:
        """Forget the cached subscribers; if `group` now pushes from `topic`, invoke the push function to
        deliver what the group has waiting, now and once more after the subscribers' TTL, when every warm
        produce function has seen the change (until then one may store a message without invoking us)."""
        self.subscribers.invalidate()
        if topic is None:
            return
        invoke_push_function(PushEvent(topic=topic, group=group))
        settled = now_ms() + int(self.subscribers.ttl_s * 1000)
        invoke_push_function(PushEvent(topic=topic, group=group, not_before_ms=settled))


def invoke_push_function(event: PushEvent) -> None:
    """Invoke the push function asynchronously with `event` (Lambda queues it and retries on throttling)."""
    function = get_settings().push_function
    try:
        lambda_client().invoke(
            FunctionName=function, InvocationType="Event", Payload=event.model_dump_json(exclude_defaults=True).encode()
        )
    except Exception:  # the produce succeeded; the next one of this topic delivers what this one would have
        logger.exception("could not invoke the push function %s for topic %s", function, event.topic)
