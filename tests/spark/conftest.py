"""One Spark session (local[2], real PySpark on this machine's Java) shared by the Spark tests, reaching the
session's moto server: its environment is set before the JVM starts, so every Python worker inherits it. One EMR
package, built for this machine's platform and Python, shared by the packaging and `--emr` tests."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from devtools.moto_server import LocalAws

EMR_ROLE = "arn:aws:iam::123456789012:role/tidemq-spark"  # moto's account
EMR_SETTINGS = ("TIDEMQ_EMR_APPLICATION_ID", "TIDEMQ_EMR_ROLE_ARN", "TIDEMQ_EMR_PACKAGE_URI")


@pytest.fixture(scope="session")
def spark(local_aws: LocalAws) -> Iterator:
    from spark_emr.session import spark_session

    saved = {name: os.environ.get(name) for name in local_aws.env}
    os.environ.update(local_aws.env)
    session = spark_session("tests")
    yield session
    session.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def serverless_backend(tmp_path, open_test_store, aws_env):
    """A serverless store with an S3 tier of its own, and the arguments that name them to a job."""
    prefix, bucket = f"j{uuid.uuid4().hex[:8]}", f"tier-{uuid.uuid4().hex[:12]}"
    store = open_test_store(
        backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=prefix, tier="s3", tier_bucket=bucket
    )
    return store, ["--dynamodb-prefix", prefix, "--bucket", bucket]


def spark_emr(*arguments: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m spark_emr ARGUMENTS`, run to its end."""
    command = [sys.executable, "-m", "spark_emr", *map(str, arguments)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def emr_package(tmp_path_factory) -> Path:
    """The EMR package as `make spark-package` builds it, for this machine's architecture and Python."""
    output = tmp_path_factory.mktemp("emr-package")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    built = spark_emr("package", "--output", output, "--platform", platform.machine(), "--python-version", python)
    assert built.returncode == 0, built.stderr
    return output


def aws_client(local_aws: LocalAws, service: str):
    """A boto3 client of `service` on the moto server."""
    credentials = {name.lower(): local_aws.env[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    return boto3.client(
        service, endpoint_url=local_aws.endpoint, region_name=local_aws.env["AWS_REGION"], **credentials
    )


def without_emr_settings() -> dict[str, str]:
    """This process's environment without any TIDEMQ_EMR_* setting."""
    return {name: value for name, value in os.environ.items() if not name.startswith("TIDEMQ_EMR_")}


@pytest.fixture(scope="session")
def emr_env(local_aws: LocalAws, emr_package: Path) -> dict[str, str]:
    """An EMR Serverless application on the moto server and the package uploaded for it (`python -m spark_emr
    upload`): the environment a `--emr` command then runs with."""
    application = aws_client(local_aws, "emr-serverless").create_application(
        name="tidemq-spark", releaseLabel="emr-7.5.0", type="SPARK", architecture="X86_64"
    )
    bucket = f"spark-{uuid.uuid4().hex[:12]}"
    aws_client(local_aws, "s3").create_bucket(Bucket=bucket)
    env = without_emr_settings() | local_aws.env
    env |= dict(zip(EMR_SETTINGS, (application["applicationId"], EMR_ROLE, f"s3://{bucket}/spark"), strict=True))
    uploaded = spark_emr("upload", "--package", emr_package, env=env)
    assert uploaded.returncode == 0, uploaded.stderr
    return env
