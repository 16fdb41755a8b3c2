"""Where a process reaches S3 and DynamoDB: `connect`, called before a store that needs them opens.

Everything reaches AWS through boto3 with the standard `AWS_ENDPOINT_URL`, so pointing that at LocalStack
(`http://localhost:4566`) or leaving it unset in AWS needs no code change. A local AWS (the embedded moto server or
LocalStack, `TIDEMQ_LOCAL_AWS`) is used only when asked for, and started only by a process that can start one (the
local servers give `connect` a starter from `devtools`; Lambda's code has none): never as a fallback, since a
process that silently fell back to an in-memory moto would report `s3://my-bucket` while its uploads vanish at the
next restart. Inside AWS Lambda asking for one is a start-up error; without one, no endpoint means AWS itself, and
no credentials to reach it is a start-up error too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from shared.settings import InvalidConfiguration, LocalAwsMode

LAMBDA_FUNCTION_VARIABLE = "AWS_LAMBDA_FUNCTION_NAME"  # set by the Lambda runtime in every execution environment


class LocalAws(Protocol):
    """A local AWS this process started: where it listens, what points boto3 at it, and what it is."""

    endpoint: str
    env: dict[str, str]

    @property
    def description(self) -> str: ...

    def stop(self) -> None: ...


LocalAwsStarter = Callable[[LocalAwsMode, Path], LocalAws]
"""Starts the local AWS a mode asks for, its files (if any) under a directory (`devtools.local_aws.start`)."""


@dataclass(frozen=True)
class AwsEndpoint:
    """Where this process reaches S3 and DynamoDB: `url` (None: AWS itself), and the local AWS this process started
    when it is that endpoint (the embedded moto server, or LocalStack)."""

    url: str | None
    embedded: LocalAws | None = None

    def __str__(self) -> str:
        if self.embedded is not None:
            return f"{self.url} ({self.embedded.description})"
        return self.url or "AWS"


def connect(
    mode: LocalAwsMode, home: Path = Path(".tidemq"), start_local: LocalAwsStarter | None = None
) -> AwsEndpoint:
    """Point this process's boto3 where S3 and DynamoDB are, before a store that needs them opens: an
    `AWS_ENDPOINT_URL` that is set (a LocalStack or moto server someone else runs, a test's); else with `mode` moto
    or localstack, that local AWS started now by `start_local` (LocalStack with its files under `home`); else AWS
    itself. Raises InvalidConfiguration for a local AWS inside AWS Lambda or in a process that cannot start one, and
    for AWS itself with no credentials to reach it (rather than failing at the first request, or worse, succeeding
    somewhere else)."""
    if mode is not LocalAwsMode.OFF and os.environ.get(LAMBDA_FUNCTION_VARIABLE):
        raise InvalidConfiguration(
            f"TIDEMQ_LOCAL_AWS={mode} inside AWS Lambda ({LAMBDA_FUNCTION_VARIABLE} is set): a local AWS keeps S3 and "
            "DynamoDB on this machine and is for local runs only; unset TIDEMQ_LOCAL_AWS"
        )
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        return AwsEndpoint(endpoint)
    if mode is not LocalAwsMode.OFF:
        if start_local is None:
            raise InvalidConfiguration(
                f"TIDEMQ_LOCAL_AWS={mode} asks for a local AWS, which only the local servers start (make run, "
                "python -m servers.gateway): set AWS_ENDPOINT_URL to reach one that runs, or unset TIDEMQ_LOCAL_AWS"
            )
        local = start_local(mode, home)
        for name, value in local.env.items():
            if name == "AWS_ENDPOINT_URL" or not os.environ.get(name):
                os.environ[name] = value
        return AwsEndpoint(local.endpoint, local)
    import boto3

    if boto3.Session().get_credentials() is None:
        raise InvalidConfiguration(
            "S3 or DynamoDB is needed (TIDEMQ_TIER=s3 or TIDEMQ_BACKEND=serverless) and no AWS credentials were found: "
            "set AWS_PROFILE or AWS credentials for AWS, AWS_ENDPOINT_URL for LocalStack, or TIDEMQ_LOCAL_AWS=moto "
            "for an in-memory moto server (local runs only)"
        )
    return AwsEndpoint(None)
