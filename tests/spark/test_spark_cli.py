"""`tidemq spark`, the installed console script, handing the Spark jobs to `python -m spark_emr`: the jobs as their
directory holds them, a run here through spark-submit, a run on EMR Serverless (moto) followed to its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import EMR_SETTINGS, without_emr_settings

TIDEMQ = Path(sys.executable).parent / "tidemq"
JOBS = Path(__file__).parents[2] / "spark_emr" / "jobs"
RETENTION = ["retention", "--dynamodb-prefix", "tidemq", "--bucket", "tidemq-tier"]


def tidemq_spark(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(TIDEMQ), "spark", *arguments]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_spark_list_names_every_job_in_the_jobs_directory():
    done = tidemq_spark("list")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == sorted(path.stem for path in JOBS.glob("*.py") if not path.stem.startswith("_"))


def test_spark_run_hands_the_job_its_own_arguments_through_spark_submit():
    done = tidemq_spark("run", "export", "--help")
    assert done.returncode == 0, done.stderr
    assert "--output" in done.stdout and "Parquet" in done.stdout  # the export job's own help


@pytest.mark.moto  # LocalStack's free edition has no EMR Serverless
def test_spark_run_emr_starts_a_job_run_and_follows_it_to_success(emr_env):
    done = tidemq_spark("run", "--emr", *RETENTION, env=emr_env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].endswith("SUCCESS")


def test_spark_run_emr_without_its_settings_exits_2_naming_them():
    done = tidemq_spark("run", "--emr", *RETENTION, env=without_emr_settings())
    assert done.returncode == 2
    assert all(name in done.stderr for name in EMR_SETTINGS)


def test_spark_run_help_documents_emr_and_its_settings():
    done = tidemq_spark("run", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "--emr" in text and all(name in text for name in EMR_SETTINGS)
