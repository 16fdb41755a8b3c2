"""The local push worker: push delivery inside the process that serves the API (`make run`), standing in
for the push Lambda function's asynchronous invocations.

Once started, the worker is its process's `PushNotifier` (`functions.logic.notifier`): a produce wakes the
groups pushing from its topic (`messages_stored`), a new subscription its group (`subscription_changed`).
Each woken group gets one delivery run on a thread pool of `push_threads`. A group is delivered by one thread
at a time: a wake during its run makes the run go round once more, so what was produced meanwhile is
delivered too. A batch that must wait for a retry sets a timer for the group (the retry itself, its count and
due time, is in the store: functions/logic/push_retries.py). With nothing produced and no retry due the worker
does nothing at all: its
threads wait on the pool's queue and no timer is set, so it reads nothing from the store.

At start it catches up: every push group is woken once, delivering what was produced while it was down and
setting timers for the retries its groups had pending.

Nothing unexpected stops it: a run that fails (the store unreachable, a bug) is logged with its group and
tried again after `AFTER_ERROR_S`; a group (or its topic) that is gone is logged and waits to be woken; a
run or timer whose thread cannot start is logged, and the group's next wake tries again.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from functions.logic.groups import retry_policy
from functions.logic.push import DeliveryReport, deliver
from functions.logic.targets import TargetRules, target_caller
from functions.observability import flush_background_metrics, logger
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import GroupNotFound, TopicNotFound
from tidemq_protocol.retry import RetryPolicy
from tidemq_store import MessageStore

from .subscribers import Subscribers

AFTER_ERROR_S = 5.0
"""A run that failed unexpectedly (the store unreachable, a bug) is tried again after this long."""


@dataclass
class GroupRun:
    """One push group in the worker: whether a thread delivers it, whether it was woken meanwhile, and the
    timer that wakes it for its next retry."""

    running: bool = False
    again: bool = False
    timer: threading.Timer | None = None
    timer_due_ms: int = 0


class PushWorker:
    """Delivers push groups on a thread pool when woken; see the module docstring."""

    def __init__(
        self, store: MessageStore, subscribers: Subscribers, threads: int, rules: TargetRules, retry: RetryPolicy
    ) -> None:
        """`retry`: the retry policy of a group that sets none (TIDEMQ_MAX_DELIVERY_ATTEMPTS, TIDEMQ_RETRY_BACKOFF)."""
        self.store = store
        self.subscribers = subscribers
        self.rules = rules
        self.retry = retry
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="push")
        self._lock = threading.Lock()
        self._groups: dict[str, GroupRun] = {}
        self._closed = False
        self.runs = 0  # delivery runs made (what tests look at to see an idle worker stay idle)

    def start(self) -> PushWorker:
        """Catch up: wake every push group once."""
        for groups in self.subscribers.by_topic(self.store).values():
            for group in groups:
                self.wake(group)
        return self

    def messages_stored(self, topic: str) -> None:
        """`topic` has new messages: wake the groups pushing from it."""
        for group in self.subscribers.of(self.store, topic):
            self.wake(group)

    def subscription_changed(self, group: str, topic: str | None) -> None:
        """`group` now pushes from `topic` (None: no longer pushes): forget the cached subscribers and, if it
        pushes, deliver what it has waiting."""
        self.subscribers.invalidate()
        if topic is not None:
            self.wake(group)

    def wake(self, group: str) -> None:
        """Deliver `group` now, or once more after the run in progress."""
        with self._lock:
            if self._closed:
                return
            run = self._groups.setdefault(group, GroupRun())
            if run.running:
                run.again = True
                return
            try:  # under the lock, so that close() cannot shut the pool down in between
                self._pool.submit(self._run, group, run)
            except RuntimeError:  # no thread could start for it
                logger.exception("push delivery of group %s could not start; its next wake tries again", group)
                return
            run.running = True

    @property
    def busy(self) -> bool:
        """Some group is being delivered, or waits for a retry timer."""
        with self._lock:
            return any(run.running or (run.timer is not None and run.timer.is_alive()) for run in self._groups.values())

    def close(self) -> None:
        """Stop: no new runs, timers cancelled, runs in progress end after their current call."""
        with self._lock:
            self._closed = True
            for run in self._groups.values():
                if run.timer is not None:
                    run.timer.cancel()
        self._pool.shutdown(wait=True)

    # ---- one group -------------------------------------------------------------------------------

    def _run(self, group: str, run: GroupRun) -> None:
        """Deliver `group` until no wake came during a pass, then set a timer for its next retry, if any.
        Never raises (on the pool an exception would vanish unseen): see the module docstring."""
        while True:
            with self._lock:
                run.again = False
                self.runs += 1
            retry_in_s = self._pass(group, run)
            with self._lock:
                if retry_in_s is not None:
                    self._set_timer(group, run, retry_in_s)
                if not run.again or self._closed:
                    run.running = False
                    return

    def _pass(self, group: str, run: GroupRun) -> float | None:
        """One delivery pass of `group`; the seconds until it should run again (None: when woken)."""
        try:
            report = self._deliver(group, run)
        except (GroupNotFound, TopicNotFound) as gone:
            logger.info("push delivery of group %s stops: %s", group, gone)
            return None
        except Exception:
            logger.exception("push delivery of group %s failed; trying again in %ss", group, AFTER_ERROR_S)
            return AFTER_ERROR_S
        if report is None or report.retry_due_ms is None:
            return None
        return max(0.0, (report.retry_due_ms - now_ms()) / 1000)

    def _deliver(self, group: str, run: GroupRun) -> DeliveryReport | None:
        config = self.store.get_group(group)
        if config.push is None:
            return None
        target = target_caller(config.push, self.rules)
        policy = retry_policy(config, self.retry)
        report = deliver(
            self.store, group, config.push, policy, target, notifier=self, keep_going=lambda: not self._closed
        )
        flush_background_metrics(
            PushDelivered=report.delivered, PushFailedCalls=report.failed_calls, PushDeadLettered=report.dead_lettered
        )
        return report

    def _set_timer(self, group: str, run: GroupRun, delay_s: float) -> None:
        """Wake `group` in `delay_s` (caller holds the lock); an earlier timer already set stays."""
        now = now_ms()
        due_ms = now + int(delay_s * 1000)
        if self._closed or (run.timer is not None and now < run.timer_due_ms <= due_ms):
            return  # a timer that has not fired yet wakes the group soon enough
        if run.timer is not None:
            run.timer.cancel()
        timer = threading.Timer(delay_s, self.wake, (group,))  # wake() logs what fails in it
        timer.daemon = True
        try:
            timer.start()
        except RuntimeError:  # no thread could start for it
            logger.exception("push retry timer of group %s could not start; its next wake tries again", group)
            run.timer = None
            return
        run.timer, run.timer_due_ms = timer, due_ms
