"""`tidemq spark ...`: the Spark jobs over the cold tier, run here or on EMR Serverless, through
`python -m spark_emr` with this interpreter (the jobs are server-side code: the CLI runs them, never imports them)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import click

DELEGATE = "spark_emr"


def delegate(*arguments: str) -> int:
    """Run `python -m spark_emr ARGUMENTS` with this interpreter; its exit code."""
    if importlib.util.find_spec(DELEGATE) is None:
        raise click.ClickException(f"the Spark jobs ({DELEGATE}) are not installed beside this tidemq")
    return subprocess.call([sys.executable, "-m", DELEGATE, *arguments])


@click.group()
def spark() -> None:
    """Run the Spark jobs over the cold tier: here (spark-submit on local[2]) or on EMR Serverless."""


@spark.command("list")
def list_jobs() -> int:
    """List the jobs."""
    return delegate("list")


@spark.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--emr",
    is_flag=True,
    help="Start an EMR Serverless job run of the uploaded package and follow it to its end (exit 0 on SUCCESS). "
    "Needs TIDEMQ_EMR_APPLICATION_ID, TIDEMQ_EMR_ROLE_ARN and TIDEMQ_EMR_PACKAGE_URI (make spark-package, then "
    "python -m spark_emr upload).",
)
@click.option("--master", help="Spark master of a run here [default: local[2]].")
@click.argument("job")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def run(emr: bool, master: str | None, job: str, arguments: tuple[str, ...]) -> int:
    """Run JOB with its ARGUMENTS: spark-submit here, or on EMR Serverless with --emr. `tidemq spark run JOB --help`
    lists a job's arguments. S3, DynamoDB and EMR Serverless are reached as AWS_ENDPOINT_URL says (AWS when unset).
    The exit code is the run's."""
    if emr and master:
        raise click.UsageError("--master is for a run here; an EMR run uses its application")
    where = ["--emr"] if emr else ["--master", master] if master else []
    return delegate("run", *where, job, *arguments)
