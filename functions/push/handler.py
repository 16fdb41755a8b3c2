"""Push function: delivers a topic's new messages to every group pushing from it, until caught up.

Invoked asynchronously (InvocationType=Event) by the produce function with `{"topic": "orders"}` (and by the
admin function, when a subscription is set, with the group too); the event is a `shared.models.PushEvent`.
It makes delivery passes (`functions.logic.push.deliver`) while they make progress. A batch waiting for a
retry is waited for within this invocation; when the wait is longer than its remaining time (after waiting
what it can), and when time runs out mid-delivery, the function invokes itself asynchronously (a
"continuation", one queued per topic at a time) with the pending retries and their due time, so attempts
keep counting across invocations, and returns. Invocations in one execution environment also share the
pending retries in memory, so an invocation caused by a produce does not retry a batch early.

Deploy it with reserved concurrency 1: Lambda then queues concurrent async invocations (one per produce)
instead of running two deliveries of a group at once, which would duplicate messages and reorder commits.
Its timeout should exceed `push_target_timeout_s` by a few seconds: a call is only started when it can end
in time. Waits for retries are billed as Lambda time.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import event_parser

from functions.api.observability import instrumented, logger, metrics
from functions.logic.push import DeliveryReport, dead_letter_topic, deliver
from functions.logic.targets import target_caller
from functions.store import get_store
from shared.models import PendingRetry, PushEvent
from shared.settings import get_settings
from tidemq_store import MessageStore
from tidemq_store.clock import now_ms
from tidemq_store.errors import GroupNotFound, TopicNotFound

from . import trigger

RESERVE_MS = 2000
"""Time kept back at the end of an invocation to hand over to the next one."""

# What invocations in this execution environment share (Lambda runs one at a time in it): the retries pending
# per group, and the topics a continuation is already queued for. A new environment learns the retries from
# the continuation event; an ordinary event that reaches a new environment first may retry a batch early.
_retries: dict[str, dict[int, PendingRetry]] = {}
_continuing: set[str] = set()


def push(store: MessageStore, event: PushEvent, context: Any) -> dict[str, Any]:
    """Deliver `event.topic` to its push groups within this invocation's time; see the module docstring."""
    settings = get_settings()
    deadline_ms = now_ms() + context.get_remaining_time_in_millis() - RESERVE_MS
    call_ms = int(settings.push_target_timeout_s * 1000)

    def can_call() -> bool:  # a target call started now ends before the deadline
        return now_ms() + call_ms < deadline_ms

    if not can_call():  # continuing in a new invocation would never get further: say so instead
        raise RuntimeError(
            f"the push function has {context.get_remaining_time_in_millis()} ms left, too little for "
            f"one target call (TIDEMQ_PUSH_TARGET_TIMEOUT_S) and {RESERVE_MS} ms: raise its timeout"
        )
    if event.continues:
        _continuing.discard(event.topic)
    groups = {event.group} if event.group else set(trigger.subscribers().of(store, event.topic))
    for pending in event.retries:
        known = _retries.setdefault(pending.group, {}).get(pending.queue)
        if known is None or (known.offset, known.attempts) < (pending.offset, pending.attempts):
            _retries[pending.group][pending.queue] = pending
        groups.add(pending.group)
    retries = {group: _retries.setdefault(group, {}) for group in sorted(groups)}
    total = DeliveryReport()
    wait_until = event.not_before_ms
    while True:
        if wait_until is not None and wait_until > now_ms():
            latest_call_ms = deadline_ms - call_ms
            time.sleep(max(0, min(wait_until, latest_call_ms) - now_ms()) / 1000)
            if wait_until > latest_call_ms:  # waited what this invocation can; the next one waits the rest
                return _continue_later(event.topic, retries, wait_until, total)
        progressed, due = False, []
        for group in list(retries):
            report = _deliver_group(store, group, event.topic, retries, can_call, settings.push_target_timeout_s)
            if report is None:
                continue
            _add(total, report)
            if report.interrupted:
                return _continue_later(event.topic, retries, None, total)
            progressed = progressed or report.progressed
            if report.retry_due_ms is not None:
                due.append(report.retry_due_ms)
        if not progressed and not due:
            return _summary(event.topic, total, continued=False)
        wait_until = None if progressed else min(due)


def _deliver_group(
    store: MessageStore, group: str, topic: str, retries: dict[str, dict[int, PendingRetry]], can_call, timeout_s: float
) -> DeliveryReport | None:  # fmt: skip
    """One pass for `group`; None (and the group forgotten) if it no longer pushes from `topic`."""
    try:
        subscription = store.get_group(group).push
        if subscription is None or subscription.topic != topic:
            _forget(group, retries)
            return None
        report = deliver(store, group, subscription, target_caller(subscription.target, timeout_s), retries[group],
                         keep_going=can_call)  # fmt: skip
    except (GroupNotFound, TopicNotFound) as gone:
        logger.info("push delivery of group %s stops: %s", group, gone)
        _forget(group, retries)
        return None
    if report.dead_lettered:
        trigger.notify(store, dead_letter_topic(group))
    return report


def _forget(group: str, retries: dict[str, dict[int, PendingRetry]]) -> None:
    retries.pop(group, None)
    _retries.pop(group, None)


def _add(total: DeliveryReport, report: DeliveryReport) -> None:
    total.delivered += report.delivered
    total.failed_calls += report.failed_calls
    total.dead_lettered += report.dead_lettered
    total.committed += report.committed


def _continue_later(
    topic: str, retries: dict[str, dict[int, PendingRetry]], not_before_ms: int | None, total: DeliveryReport
) -> dict[str, Any]:  # fmt: skip
    """Hand the rest over to a new invocation for the whole topic, unless one is queued already."""
    if topic not in _continuing:
        pending = [retry for queues in retries.values() for retry in queues.values()]
        trigger.invoke_push_function(PushEvent(topic=topic, not_before_ms=not_before_ms, retries=pending,
                                               continues=True))  # fmt: skip
        _continuing.add(topic)
    return _summary(topic, total, continued=True)


def _summary(topic: str, total: DeliveryReport, continued: bool) -> dict[str, Any]:
    for name, value in (("PushDelivered", total.delivered), ("PushFailedCalls", total.failed_calls),
                        ("PushDeadLettered", total.dead_lettered)):  # fmt: skip
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    return {"topic": topic, "delivered": total.delivered, "failed_calls": total.failed_calls,
            "dead_lettered": total.dead_lettered, "continued": continued}  # fmt: skip


@event_parser(model=PushEvent)
def _handle(event: PushEvent, context: Any) -> dict[str, Any]:
    return push(get_store(), event, context)


lambda_handler = instrumented(_handle, count="PushInvocations")
