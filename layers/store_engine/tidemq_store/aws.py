"""Where every AWS client of TideMQ points: the region from the environment (`AWS_REGION`, else
`AWS_DEFAULT_REGION`, else us-east-1); the endpoint comes from boto3's own `AWS_ENDPOINT_URL`, so the same
code talks to AWS, LocalStack or the embedded moto server."""

from __future__ import annotations

import os

DEFAULT_REGION = "us-east-1"


def aws_region() -> str:
    """The AWS region clients are made for."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
