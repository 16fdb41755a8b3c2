"""The maintenance schedule inside the local gateway (`make run` with TIDEMQ_BACKEND=serverless): a timer that
invokes the maintenance function's handler as EventBridge would, with the same events, in the same process.

    every `maintenance_interval_s`  the scheduled event (events/maintenance_scheduled.json)
    every `clean_interval_s`        {"job": "retention"} (events/maintenance_retention.json)
    every `timer_job_interval_s`    {"job": "timers"} (events/maintenance_timers.json), serverless only: the
                                    embedded engine moves its due timers in its own thread
    every min(transaction timeout, check interval)
                                    {"job": "transactions"} (events/maintenance_transactions.json), with either
                                    backend: the embedded engine has no thread of its own for check-backs
    every `console_sample_interval_s`
                                    {"job": "console"} (events/maintenance_console.json), with either backend: the
                                    console's rolling series (when the console is on)

A run that finds nothing new costs a directory scan (handler.py), so the timer firing is no load at rest.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .handler import lambda_handler

log = logging.getLogger("tidemq.maintenance")


def scheduled_event() -> dict:
    """An EventBridge "Scheduled Event", as a rate(1 minute) rule sends it."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "local",
        "resources": ["arn:aws:events:local:000000000000:rule/tidemq-maintenance"],
        "detail": {},
    }


class LocalSchedule:
    """Runs the maintenance handler on its schedules in a daemon thread until `stop`; `context` makes the
    Lambda context object of each invocation (the local gateway's LocalContext)."""

    def __init__(
        self,
        upload_every_s: float | None,
        retention_every_s: float | None,
        context: Callable[[str], Any],
        transactions_every_s: float | None = None,
        timers_every_s: float | None = None,
        console_every_s: float | None = None,
    ) -> None:
        """Each job runs every so many seconds; None: never (the embedded engine uploads and cleans itself)."""
        self.context = context
        jobs = [
            (upload_every_s, scheduled_event),
            (retention_every_s, lambda: {"job": "retention"}),
            (transactions_every_s, lambda: {"job": "transactions"}),
            (timers_every_s, lambda: {"job": "timers"}),
            (console_every_s, lambda: {"job": "console"}),
        ]
        self.jobs = [(every, event) for every, event in jobs if every is not None]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="maintenance-schedule", daemon=True)

    def start(self) -> LocalSchedule:
        self._thread.start()
        return self

    def _run(self) -> None:
        due = [time.monotonic() + every for every, _ in self.jobs]
        while not self._stop.wait(max(0.0, min(due) - time.monotonic())):
            for index, (every, event) in enumerate(self.jobs):
                if time.monotonic() >= due[index]:
                    due[index] = time.monotonic() + every
                    try:
                        lambda_handler(event(), self.context("tidemq-maintenance"))
                    except Exception:  # as a failed Lambda invocation: logged, and the next run retries
                        log.exception("scheduled maintenance failed")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
