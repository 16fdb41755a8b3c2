"""`python -m spark_emr run --emr` against moto's EMR Serverless API over HTTP: a job run of the uploaded package
(its entry point, the code zip on the Python path, the environment archive as the Python) followed to its end.
moto ends every run in SUCCESS at once; a run cancelled before it is followed stands for one that does not end
well."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.spark.conftest import EMR_SETTINGS, aws_client, spark_emr, without_emr_settings

pytestmark = pytest.mark.moto  # LocalStack's free edition has no EMR Serverless

EXPORT = ["export", "--bucket", "tidemq-tier", "--topic", "orders", "--output", "s3://analytics/orders/"]


def started_run(stderr: str) -> str:
    return re.search(r"as job run (\S+) of application", stderr).group(1)


def test_a_run_on_emr_starts_the_uploaded_job_with_its_code_and_environment_and_follows_it_to_success(
    emr_env, emr_package, local_aws
):
    done = spark_emr("run", "--emr", *EXPORT, env=emr_env)
    assert done.returncode == 0, done.stderr
    run_id = started_run(done.stderr)
    assert f"emr: job run {run_id} SUCCESS" in done.stderr

    application_id, package = emr_env["TIDEMQ_EMR_APPLICATION_ID"], emr_env["TIDEMQ_EMR_PACKAGE_URI"]
    run = aws_client(local_aws, "emr-serverless").get_job_run(applicationId=application_id, jobRunId=run_id)["jobRun"]
    assert run["executionRole"] == emr_env["TIDEMQ_EMR_ROLE_ARN"]
    submit = run["jobDriver"]["sparkSubmit"]
    assert (submit["entryPoint"], submit["entryPointArguments"]) == (f"{package}/jobs/export.py", EXPORT[1:])
    words = shlex.split(submit["sparkSubmitParameters"])
    assert set(words[::2]) == {"--conf"}
    conf = dict(pair.split("=", 1) for pair in words[1::2])
    assert conf["spark.submit.pyFiles"] == f"{package}/tidemq-spark-code.zip"
    assert conf["spark.archives"] == f"{package}/tidemq-spark-env.tar.gz#environment"
    for variable in ("emr-serverless.driverEnv.PYSPARK_PYTHON", "executorEnv.PYSPARK_PYTHON"):
        assert conf[f"spark.{variable}"] == "./environment/bin/python"

    s3, bucket = aws_client(local_aws, "s3"), package.removeprefix("s3://").split("/")[0]
    for name in ("manifest.json", "jobs/export.py", "tidemq-spark-code.zip", "tidemq-spark-env.tar.gz"):
        uploaded = s3.head_object(Bucket=bucket, Key=f"spark/{name}")
        assert uploaded["ContentLength"] == (emr_package / name).stat().st_size


def test_a_run_that_ends_otherwise_than_in_success_ends_the_command_with_its_state_and_exit_code_1(emr_env, local_aws):
    started = spark_emr("run", "--emr", *EXPORT, env=emr_env)
    run_id = started_run(started.stderr)
    emr = aws_client(local_aws, "emr-serverless")
    emr.cancel_job_run(applicationId=emr_env["TIDEMQ_EMR_APPLICATION_ID"], jobRunId=run_id)

    followed = spark_emr("follow", run_id, env=emr_env)
    assert followed.returncode == 1
    assert followed.stderr.splitlines()[-1].startswith(f"emr: job run {run_id} ended CANCELLED")


def test_a_run_on_emr_without_its_settings_fails_with_one_line_naming_them():
    done = spark_emr("run", "--emr", *EXPORT, env=without_emr_settings())
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert all(name in line for name in EMR_SETTINGS)


def test_a_run_on_emr_without_an_uploaded_package_says_so_and_starts_nothing(emr_env, local_aws):
    emr, application_id = aws_client(local_aws, "emr-serverless"), emr_env["TIDEMQ_EMR_APPLICATION_ID"]
    runs_before = len(emr.list_job_runs(applicationId=application_id)["jobRuns"])
    elsewhere = emr_env | {"TIDEMQ_EMR_PACKAGE_URI": emr_env["TIDEMQ_EMR_PACKAGE_URI"] + "-never-uploaded"}
    done = spark_emr("run", "--emr", *EXPORT, env=elsewhere)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"emr: no package at {elsewhere['TIDEMQ_EMR_PACKAGE_URI']}/manifest.json")
    assert len(emr.list_job_runs(applicationId=application_id)["jobRuns"]) == runs_before
