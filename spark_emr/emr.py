"""EMR Serverless job runs of the packaged jobs: start one (`python -m spark_emr run --emr JOB ...`) and follow it
to its end (also `python -m spark_emr follow JOB_RUN_ID`, for a run started elsewhere).

A run executes the job's entry point from the package uploaded to TIDEMQ_EMR_PACKAGE_URI (see package.py), on the
application TIDEMQ_EMR_APPLICATION_ID, as the role TIDEMQ_EMR_ROLE_ARN. Its Spark configuration puts the code zip
on the Python path (`spark.submit.pyFiles`) and unpacks the environment archive as `environment`
(`spark.archives`), whose bin/python the driver and the executors run (PYSPARK_PYTHON). EMR Serverless and S3 are
reached as boto3 reaches them (`AWS_ENDPOINT_URL`: moto or LocalStack here, AWS itself when unset).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from shared.settings import Settings
from tidemq_store.aws import aws_region
from tidemq_store.tiered.s3 import s3_client

from .package import ENVIRONMENT_ALIAS, MANIFEST, PackageUri

FINAL_STATES = frozenset({"SUCCESS", "FAILED", "CANCELLED"})
NOT_FOUND = frozenset({"NoSuchKey", "NoSuchBucket", "404"})


class EmrError(Exception):
    """A job run could not be started or followed; the message is one line saying why."""


class SettingsMissing(EmrError):
    """Settings a job run needs are not set."""


def required(settings: Settings, *fields: str) -> list[str]:
    """The values of settings `fields`, or SettingsMissing naming every variable among them that is not set."""
    if missing := [f"TIDEMQ_{name.upper()}" for name in fields if getattr(settings, name) is None]:
        raise SettingsMissing(f"{', '.join(missing)} not set: EMR Serverless job runs need them (docs/spark.md)")
    return [getattr(settings, name) for name in fields]


def emr_client():
    return boto3.session.Session().client("emr-serverless", region_name=aws_region())


def read_manifest(package: PackageUri) -> dict:
    """The manifest of the package uploaded at `package`."""
    try:
        body = s3_client().get_object(Bucket=package.bucket, Key=package.key(MANIFEST))["Body"].read()
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in NOT_FOUND:
            raise EmrError(
                f"no package at {package.uri(MANIFEST)}: build it (make spark-package) and upload it "
                "(python -m spark_emr upload)"
            ) from None
        raise EmrError(f"could not read {package.uri(MANIFEST)}: {error}") from error
    except BotoCoreError as error:
        raise EmrError(f"could not read {package.uri(MANIFEST)}: {error}") from error
    try:
        return json.loads(body)
    except ValueError as error:
        raise EmrError(f"{package.uri(MANIFEST)} is no package manifest: {error}") from error


def spark_submit_parameters(package: PackageUri, manifest: dict) -> str:
    """The Spark configuration of a run: the code zip and the environment archive of the package."""
    conf = {
        "spark.submit.pyFiles": package.uri(manifest["code"]),
        "spark.archives": f"{package.uri(manifest['environment'])}#{ENVIRONMENT_ALIAS}",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": manifest["python"],
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": manifest["python"],
        "spark.executorEnv.PYSPARK_PYTHON": manifest["python"],
    }
    return " ".join(f"--conf {key}={value}" for key, value in conf.items())


def start_run(settings: Settings, job: str, arguments: Sequence[str]) -> tuple[str, str]:
    """Start a run of `job` with `arguments` as `settings` say; return (application id, job run id)."""
    application_id, role_arn, package_uri = required(settings, "emr_application_id", "emr_role_arn", "emr_package_uri")
    package = PackageUri.parse(package_uri)
    manifest = read_manifest(package)
    entry_point = manifest["entry_points"].get(job)
    if entry_point is None:
        raise EmrError(
            f"job {job!r} is not in the package at {package.uri(MANIFEST)} (built before it existed? make "
            "spark-package, then python -m spark_emr upload)"
        )
    try:
        started = emr_client().start_job_run(
            applicationId=application_id,
            executionRoleArn=role_arn,
            name=f"tidemq-{job}",
            jobDriver={
                "sparkSubmit": {
                    "entryPoint": package.uri(entry_point),
                    "entryPointArguments": list(arguments),
                    "sparkSubmitParameters": spark_submit_parameters(package, manifest),
                }
            },
        )
    except (BotoCoreError, ClientError) as error:
        raise EmrError(f"could not start {job} on application {application_id}: {error}") from error
    return application_id, started["jobRunId"]


def follow(application_id: str, run_id: str, poll_s: float, say: Callable[[str], None]) -> dict:
    """Read the run every `poll_s` seconds until it ends, saying each state it enters; return it as last read."""
    client, state = emr_client(), None
    while True:
        try:
            run = client.get_job_run(applicationId=application_id, jobRunId=run_id)["jobRun"]
        except (BotoCoreError, ClientError) as error:
            raise EmrError(f"could not read job run {run_id} of application {application_id}: {error}") from error
        if run["state"] != state:
            state = run["state"]
            details = run.get("stateDetails")
            say(f"emr: job run {run_id} {state}" + (f": {details}" if details else ""))
        if state in FINAL_STATES:
            return run
        time.sleep(poll_s)
