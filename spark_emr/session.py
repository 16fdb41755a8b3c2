"""The Spark session a job runs in."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(app: str) -> SparkSession:
    """The session of job `app`: the master `spark-submit` gives (`--master`), else `local[2]`. Python workers run
    this interpreter, so they import what the driver imports (the engine, boto3)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(f"tidemq-{app}").config("spark.ui.enabled", "false")
    if "spark.master" not in SparkSession.builder._options and not os.environ.get("SPARK_MASTER"):
        builder = builder.master(os.environ.get("TIDEMQ_SPARK_MASTER", "local[2]"))
    return builder.getOrCreate()
