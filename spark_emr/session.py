"""The Spark session a job runs in."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable

from pyspark.sql import SparkSession


def spark_session(app: str) -> SparkSession:
    """The session of job `app`: the master `spark-submit` gives (`--master`); run in a process of its own (a test),
    `TIDEMQ_SPARK_MASTER`, else `local[2]`. Python workers run
    this interpreter, so they import what the driver imports (the engine, boto3)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(f"tidemq-{app}").config("spark.ui.enabled", "false")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit, whose --master (EMR's, say) must stand
        builder = builder.master(os.environ.get("TIDEMQ_SPARK_MASTER", "local[2]"))
    return builder.getOrCreate()


def run_job(app: str, run: Callable[[SparkSession, argparse.Namespace], dict], args: argparse.Namespace) -> None:
    """A job's entry point: run it in its session, then print its summary as one JSON line on stdout."""
    spark = spark_session(app)
    try:
        print(json.dumps(run(spark, args)), flush=True)
    finally:
        spark.stop()


def dry_run(job: str, would: Iterable[str], summary: dict, began: float) -> dict:
    """A dry run's end: each thing the job would do on stderr, then its summary."""
    for line in would:
        print(f"{job}: would {line}", file=sys.stderr)
    return summary | {"dry_run": True, "seconds": round(time.monotonic() - began, 3)}
