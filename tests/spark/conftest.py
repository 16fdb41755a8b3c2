"""One Spark session (local[2], real PySpark on this machine's Java) shared by the Spark tests, reaching the
session's moto server: its environment is set before the JVM starts, so every Python worker inherits it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from shared.local_aws import LocalAws


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
