"""Logger, Metrics (CloudWatch EMF) and Tracer for every function, configured in one place.

Powertools reads its usual variables (POWERTOOLS_SERVICE_NAME, POWERTOOLS_LOG_LEVEL,
POWERTOOLS_METRICS_NAMESPACE, POWERTOOLS_METRICS_DISABLED, POWERTOOLS_TRACE_DISABLED); the
defaults below name the service and namespace.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "tidemq")

logger = Logger(service=SERVICE)
metrics = Metrics(service=SERVICE, namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "TideMQ"))
tracer = Tracer(service=SERVICE)
