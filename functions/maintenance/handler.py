"""Maintenance function: the scheduled work of the serverless backend, invoked by EventBridge schedules.

    every minute   the schedule's own event (any EventBridge "Scheduled Event"): a maintenance run, which
                   uploads every queue with new messages to the cold tier, moves the hot boundary and deletes
                   files nothing references (tidemq_store.serverless.maintenance); when nothing was produced
                   since the last run it returns at once, without a request to DynamoDB or S3. Its metric
                   TierUploadLagSeconds is the age of the oldest message it found not yet uploaded
    every hour     the constant input {"job": "retention"}: topic retention
    every minute   the constant input {"job": "timers"}: every DELAY topic's due timer messages put on their topic
                   (tidemq_store/serverless/timers.py; a consumer reading a DELAY topic moves them sooner). Its
                   metric TimerMessagesMoved counts them
    every minute   the constant input {"job": "transactions"}: transactional messages' check-backs opened when due,
                   rolled back at the check limit, old outcomes pruned (functions/logic/transactions.py `sweep`)
    every minute   the constant input {"job": "console"}: a sample of the console's rolling series (topics, groups,
                   messages stored and consumed, lag: functions/logic/console_series.py)

The embedded engine does the first two, and moves its due timers, in its own threads (there a run reports
`skipped`); the local servers run the transactions and console jobs on timers for either backend.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import event_parser
from pydantic import BaseModel, ConfigDict

from functions.logic import console_series, transactions
from functions.observability import instrumented, logger, metrics
from functions.push.trigger import watch_moved_timers
from functions.store import get_store
from shared.settings import get_settings

watch_moved_timers()  # the timers job moves due timers


class MaintenanceEvent(BaseModel):
    """A schedule's event: EventBridge's own (its fields are ignored), or a constant input naming the job."""

    model_config = ConfigDict(extra="ignore")

    job: Literal["upload", "retention", "timers", "transactions", "console"] = "upload"


@event_parser(model=MaintenanceEvent)
def maintain(event: MaintenanceEvent, context: Any) -> dict[str, Any]:
    store = get_store()
    if event.job == "transactions":
        swept = transactions.sweep(store, get_settings())
        metrics.add_metric(name="TransactionChecksOpened", unit=MetricUnit.Count, value=swept.checks_opened)
        metrics.add_metric(name="TransactionsRolledBackAtCheckLimit", unit=MetricUnit.Count, value=swept.rolled_back)
        result = {"job": "transactions", **dataclasses.asdict(swept)}
    elif event.job == "retention":
        cleaned = store.clean_expired()
        metrics.add_metric(name="MessagesExpired", unit=MetricUnit.Count, value=cleaned.messages_expired)
        result = {
            "job": "retention",
            "segments_deleted": cleaned.segments_deleted,
            "messages_expired": cleaned.messages_expired,
        }
    elif event.job == "console":
        sample = console_series.record_sample(store)
        result = {"job": "console", **dataclasses.asdict(sample)}
    elif event.job == "timers":
        moved = store.timers.move_due()  # each topic's push delivery is set going as they move (functions.store)
        metrics.add_metric(name="TimerMessagesMoved", unit=MetricUnit.Count, value=sum(moved.values()))
        result = {"job": "timers", "moved": sum(moved.values()), "topics": len(moved)}
    else:
        report = store.maintain()
        metrics.add_metric(name="MessagesUploaded", unit=MetricUnit.Count, value=report.messages_uploaded)
        metrics.add_metric(name="SegmentFilesDeleted", unit=MetricUnit.Count, value=report.files_deleted)
        metrics.add_metric(name="MaintenanceFailures", unit=MetricUnit.Count, value=len(report.failed))
        metrics.add_metric(name="TierUploadLagSeconds", unit=MetricUnit.Seconds, value=report.upload_lag_seconds)
        result = {
            "job": "upload",
            "skipped": report.skipped,
            "queues": report.queues,
            "messages_uploaded": report.messages_uploaded,
            "files_deleted": report.files_deleted,
            "failed": list(report.failed),
            "upload_lag_seconds": report.upload_lag_seconds,
        }
    if result.get("failed"):
        logger.warning("maintenance left queues for the next run", extra=result)
    elif any(result.get(name) for name in ("queues", "files_deleted", "messages_expired", "rolled_back", "moved")):
        logger.info("maintenance done", extra=result)
    return result


lambda_handler = instrumented(maintain, count="MaintenanceRuns")
