"""Logger, Metrics (CloudWatch EMF) and Tracer for every function, configured in one place.

Powertools reads its usual variables (POWERTOOLS_SERVICE_NAME, POWERTOOLS_LOG_LEVEL,
POWERTOOLS_METRICS_NAMESPACE, POWERTOOLS_METRICS_DISABLED, POWERTOOLS_TRACE_DISABLED); the
defaults below name the service and namespace.

Each invocation's Lambda context (request id, function name, ...) goes on the log lines of that invocation alone.
Powertools' `inject_lambda_context` appends it to the logger's keys process-wide, which in the local gateway (many
requests at once, in handler threads) put one request's id on another's lines and on the push worker's; here the
keys live in the request's own context (a ContextVar: each gateway call runs in a copy, a thread started meanwhile
in an empty one), so background work logs none. Nothing logs an event or a message body
(POWERTOOLS_LOGGER_LOG_EVENT is not honoured): a body is other people's data.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.lambda_context import build_lambda_context_model
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "tidemq")
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "TideMQ")

logger = Logger(service=SERVICE)
metrics = Metrics(service=SERVICE, namespace=NAMESPACE)
tracer = Tracer(service=SERVICE)

Handler = Callable[[dict[str, Any], Any], Any]
_invocations = itertools.count()  # the process's first invocation is its cold start


def instrumented(handler: Handler, count: str | None = None) -> Handler:
    """A Lambda entry point around `handler`: its context in its own log lines, metrics flushed per invocation
    (`count`: a metric counting invocations), tracing. With metrics disabled (locally) they are cleared
    instead: Powertools never flushes disabled metrics, so they would pile up."""

    def counted(event: dict[str, Any], context: Any) -> Any:
        if count:
            metrics.add_metric(name=count, unit=MetricUnit.Count, value=1)
        return handler(event, context)

    def uncounted(event: dict[str, Any], context: Any) -> Any:
        try:
            return handler(event, context)
        finally:
            metrics.clear_metrics()

    entry = uncounted if is_metrics_disabled() else metrics.log_metrics(counted)
    # Disabled (outside Lambda, or POWERTOOLS_TRACE_DISABLED), Powertools still opens a dummy X-Ray subsegment per
    # call, with random ids from the OS: a system call that gives up the GIL, a wait for it under load.
    traced = entry if tracer.disabled else tracer.capture_lambda_handler(entry, capture_response=False)

    def with_context(event: dict[str, Any], context: Any) -> Any:
        keys = build_lambda_context_model(context).__dict__
        logger.thread_safe_append_keys(cold_start=next(_invocations) == 0, **keys)
        try:
            return traced(event, context)
        finally:
            logger.thread_safe_clear_keys()

    return with_context


@contextmanager
def metrics_of_one_call() -> Iterator[None]:
    """Around a route function called outside any Lambda entry point (the long-running servers' lean dispatch,
    servers/lean.py): the metrics it adds flushed as it ends, or cleared with metrics disabled (else they would
    pile up, as `instrumented` says)."""
    try:
        yield
    finally:
        if is_metrics_disabled():
            metrics.clear_metrics()
        else:
            metrics.flush_metrics()


def flush_background_metrics(**counts: int) -> None:
    """Emit counts of work done outside any invocation (the local push worker's threads) as one EMF line
    of their own, so they never mix into a request's metrics; zero counts are left out."""
    given = {name: value for name, value in counts.items() if value}
    if not given or is_metrics_disabled():
        return
    background = EphemeralMetrics(service=SERVICE, namespace=NAMESPACE)
    for name, value in given.items():
        background.add_metric(name=name, unit=MetricUnit.Count, value=value)
    background.flush_metrics()
