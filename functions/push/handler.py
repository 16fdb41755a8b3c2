"""Push function: delivers a topic's new messages to every group pushing from it, until caught up.

Invoked asynchronously (InvocationType=Event) by the produce function with `{"topic": "orders"}` (and by the
admin function, when a subscription is set, with the group too); the event is a `tidemq_protocol.api.push.PushEvent`.
It delivers with `functions.logic.push_invocations.PushEnvironment`: passes while they make progress, waiting
for a retry within this invocation's time. When the wait is longer (after waiting what it can), and when time
runs out mid-delivery, the logic hands over to a continuation, which this handler sends before it returns: it
invokes itself asynchronously with the time to start (one queued per topic at a time). Attempts keep counting
across invocations and environments because they are in the store (functions/logic/push_retries.py).

Deploy it with reserved concurrency 1: Lambda then queues concurrent async invocations (one per produce)
instead of running two deliveries of a group at once, which would duplicate messages and reorder commits.
Its timeout should exceed `push_target_timeout_s` by a few seconds: a call is only started when it can end
in time. Waits for retries are billed as Lambda time.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import event_parser

from functions.logic.push_invocations import InvocationTime, PushEnvironment, TopicDelivery
from functions.logic.targets import TargetRules
from functions.observability import instrumented, metrics
from functions.store import get_store
from shared.settings import get_settings
from tidemq_protocol.api.push import PushEvent
from tidemq_protocol.clock import now_ms
from tidemq_store import MessageStore

from .trigger import invoke_push_function, push_notifier, subscribers, watch_moved_timers

RESERVE_MS = 2000
"""Time kept back at the end of an invocation to hand over to the next one."""

# One per execution environment, Lambda's idiom for state kept between invocations: Lambda runs them one at a
# time in it and keeps this module loaded, so they share the queued continuations.
environment = PushEnvironment()


def push(store: MessageStore, event: PushEvent, context: Any) -> dict[str, Any]:
    """Deliver `event.topic` to its push groups within this invocation's time; see the module docstring."""
    remaining_ms = context.get_remaining_time_in_millis()
    time_left = InvocationTime(now_ms() + remaining_ms - RESERVE_MS, get_settings().push_target_timeout_s)
    if not time_left.can_call():  # continuing in a new invocation would never get further: say so instead
        raise RuntimeError(
            f"the push function has {remaining_ms} ms left, too little for "
            f"one target call (TIDEMQ_PUSH_TARGET_TIMEOUT_S) and {RESERVE_MS} ms: raise its timeout"
        )
    groups = [event.group] if event.group else subscribers().of(store, event.topic)
    settings = get_settings()
    done = environment.deliver(
        store, event, groups, time_left, push_notifier(), TargetRules.of(settings), settings.retry_policy
    )
    if done.continuation is not None:
        invoke_push_function(done.continuation)
    return _summary(event.topic, done)


def _summary(topic: str, done: TopicDelivery) -> dict[str, Any]:
    report = done.report
    for name, value in (
        ("PushDelivered", report.delivered),
        ("PushFailedCalls", report.failed_calls),
        ("PushDeadLettered", report.dead_lettered),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    return {
        "topic": topic,
        "delivered": report.delivered,
        "failed_calls": report.failed_calls,
        "dead_lettered": report.dead_lettered,
        "continued": done.continued,
    }


@event_parser(model=PushEvent)
def _handle(event: PushEvent, context: Any) -> dict[str, Any]:
    return push(get_store(), event, context)


watch_moved_timers()  # a delivery's read of a DELAY topic moves its due timers (serverless)
lambda_handler = instrumented(_handle, count="PushInvocations")
