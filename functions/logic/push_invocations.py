"""Push delivery within invocations of bounded time (the push Lambda function's), going on across them.

An invocation delivers one topic to the groups pushing from it: it makes delivery passes (`push.deliver`)
while they make progress, and waits for a batch's retry when it is due within the invocation's time. When the
wait is longer (after waiting what it can), and when time runs out mid-delivery, it hands the rest over to a
new invocation: a continuation, a `PushEvent` saying when to start. Sending it (an asynchronous invoke) is the
caller's; one is queued per topic at a time. The retries themselves (each batch's failed calls and when the next
is due) are in the store (push_retries.py), so any invocation, in any execution environment, counts on from them
and never retries a batch early.

`PushEnvironment` holds what the invocations of one execution environment share, as they run there one at a
time: the topics a continuation is queued for.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from functions.observability import logger
from tidemq_protocol.api.push import PushEvent
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import GroupNotFound, TopicNotFound
from tidemq_protocol.retry import RetryPolicy
from tidemq_store import MessageStore

from .groups import retry_policy
from .notifier import PushNotifier
from .push import DeliveryReport, deliver
from .targets import TargetRules, target_caller


@dataclass(frozen=True, slots=True)
class InvocationTime:
    """The time an invocation has for delivering: until `deadline_ms`, with target calls of at most
    `target_timeout_s` each, so a call is only started when it can end by then."""

    deadline_ms: int
    target_timeout_s: float

    @property
    def call_ms(self) -> int:
        return int(self.target_timeout_s * 1000)

    @property
    def latest_call_ms(self) -> int:
        """The last moment a target call can start."""
        return self.deadline_ms - self.call_ms

    def can_call(self) -> bool:
        """A target call started now ends before the deadline."""
        return now_ms() < self.latest_call_ms


@dataclass(slots=True)
class TopicDelivery:
    """What an invocation did for its topic: the work of its passes, and whether it handed the rest over
    (`continued`); `continuation` is the event to send for that, None when one is queued already."""

    report: DeliveryReport = field(default_factory=DeliveryReport)
    continued: bool = False
    continuation: PushEvent | None = None


class PushEnvironment:
    """What the push invocations of one execution environment share, and their delivery of a topic; see the
    module docstring."""

    def __init__(self) -> None:
        self.continuing: set[str] = set()  # topics a continuation is queued for

    def begin(self, event: PushEvent, groups: Iterable[str]) -> list[str]:
        """An invocation with `event` begins: the continuation it may be is no longer queued. The groups it
        delivers: `groups` (a continuation names none: the caller gives every group pushing from its topic)."""
        if event.continues:
            self.continuing.discard(event.topic)
        return sorted(set(groups))

    def continue_later(self, topic: str, not_before_ms: int | None) -> PushEvent | None:
        """The continuation that delivers the rest of `topic` (from `not_before_ms`, if given); None if one is
        queued already. Either way one is queued from now on."""
        if topic in self.continuing:
            return None
        self.continuing.add(topic)
        return PushEvent(topic=topic, not_before_ms=not_before_ms, continues=True)

    def deliver(
        self,
        store: MessageStore,
        event: PushEvent,
        groups: Iterable[str],
        time_left: InvocationTime,
        notifier: PushNotifier,
        rules: TargetRules,
        retry: RetryPolicy,
    ) -> TopicDelivery:
        """Deliver `event.topic` to `groups` (those pushing from it, or the one the event names) within
        `time_left`, to targets as `rules` allow them, retrying as each group's policy says (`retry` gives what a
        group leaves unset); `notifier` is told of dead letters. Waits here (sleeping) for a retry due in time;
        see the module docstring."""
        delivering = self.begin(event, groups)
        done = TopicDelivery()
        wait_until = event.not_before_ms
        while True:
            if wait_until is not None and wait_until > now_ms():
                time.sleep(max(0, min(wait_until, time_left.latest_call_ms) - now_ms()) / 1000)
                if wait_until > time_left.latest_call_ms:  # waited what this invocation can; the next waits the rest
                    return self._hand_over(event.topic, wait_until, done)
            progressed, due = False, []
            for group in list(delivering):
                report = self._pass(store, group, event.topic, time_left, notifier, rules, retry)
                if report is None:
                    delivering.remove(group)
                    continue
                done.report.add(report)
                if report.interrupted:
                    return self._hand_over(event.topic, None, done)
                progressed = progressed or report.progressed
                if report.retry_due_ms is not None:
                    due.append(report.retry_due_ms)
            if not progressed and not due:
                return done
            wait_until = None if progressed else min(due)

    def _pass(
        self,
        store: MessageStore,
        group: str,
        topic: str,
        time_left: InvocationTime,
        notifier: PushNotifier,
        rules: TargetRules,
        retry: RetryPolicy,
    ) -> DeliveryReport | None:
        """One pass for `group`; None if it no longer pushes from `topic`."""
        try:
            config = store.get_group(group)
            subscription = config.push
            if subscription is None or subscription.topic != topic:
                return None
            target = target_caller(subscription, rules)
            policy = retry_policy(config, retry)
            return deliver(store, group, subscription, policy, target, notifier, keep_going=time_left.can_call)
        except (GroupNotFound, TopicNotFound) as gone:
            logger.info("push delivery of group %s stops: %s", group, gone)
            return None

    def _hand_over(self, topic: str, not_before_ms: int | None, done: TopicDelivery) -> TopicDelivery:
        done.continued = True
        done.continuation = self.continue_later(topic, not_before_ms)
        return done
