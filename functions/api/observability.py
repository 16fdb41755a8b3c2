"""Logger, Metrics (CloudWatch EMF) and Tracer for every function, configured in one place.

Powertools reads its usual variables (POWERTOOLS_SERVICE_NAME, POWERTOOLS_LOG_LEVEL,
POWERTOOLS_METRICS_NAMESPACE, POWERTOOLS_METRICS_DISABLED, POWERTOOLS_TRACE_DISABLED); the
defaults below name the service and namespace.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "tidemq")

logger = Logger(service=SERVICE)
metrics = Metrics(service=SERVICE, namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "TideMQ"))
tracer = Tracer(service=SERVICE)

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def lambda_entry(resolve: Handler) -> Handler:
    """Wrap a function's resolver as its Lambda entry point, with context logging, metrics and tracing."""

    def counted(event: dict[str, Any], context: Any) -> dict[str, Any]:
        metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
        return resolve(event, context)

    def uncounted(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            return resolve(event, context)
        finally:
            metrics.clear_metrics()  # Powertools never flushes disabled metrics: they would pile up

    handler = uncounted if is_metrics_disabled() else metrics.log_metrics(counted)
    return logger.inject_lambda_context(
        tracer.capture_lambda_handler(handler, capture_response=False), clear_state=True
    )
