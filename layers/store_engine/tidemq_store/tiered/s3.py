"""The S3 client the tier uses: boto3, with the endpoint from the standard `AWS_ENDPOINT_URL`.

So the same code talks to AWS, LocalStack (`AWS_ENDPOINT_URL=http://localhost:4566`) or a moto server.
botocore retries every call itself ("standard" mode: 5xx, 503 SlowDown, throttling, connection errors
and timeouts, with exponential backoff and jitter) before the uploader's own retry loop sees an error.
"""

from __future__ import annotations

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from ..aws import aws_region

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 8},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=32,
    # Every record carries its own CRC32C, checked on every read: botocore's CRC32 of whole bodies on
    # top of that would only spend CPU (it was a tenth of a cold read's).
    request_checksum_calculation="when_required",
    response_checksum_validation="when_required",
)


def s3_client():
    """A boto3 S3 client (region from the environment, else us-east-1)."""
    return boto3.session.Session().client("s3", region_name=aws_region(), config=CLIENT_CONFIG)


def ensure_bucket(client, bucket: str) -> None:
    """Create `bucket` unless it exists."""
    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
        client.create_bucket(Bucket=bucket)
