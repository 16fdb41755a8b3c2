"""One Spark session (local[2], real PySpark on this machine's Java) shared by the Spark tests, reaching the
session's moto server: its environment is set before the JVM starts, so every Python worker inherits it."""

from __future__ import annotations

import os
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
