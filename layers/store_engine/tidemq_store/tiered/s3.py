"""The S3 medium of the cold tier: segments as objects, written once each, through a boto3 client.

A segment is the object `s3://<bucket>/<prefix>/<topic>/<queue>/<kind>/<base:020d>` (segment.py). S3 objects
cannot be appended to, so a segment takes one `commit` and is sealed from then on (`S3Driver.appendable` is False).

The client's endpoint comes from the standard `AWS_ENDPOINT_URL`, so the same code talks to AWS, LocalStack
(`AWS_ENDPOINT_URL=http://localhost:4566`) or a moto server. botocore retries every call itself ("standard"
mode: 5xx, 503 SlowDown, throttling, connection errors and timeouts, with exponential backoff and jitter) before
the uploader's own retry loop sees an error, and a reader's caller a 503 (faults.py).
"""

from __future__ import annotations

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from tidemq_protocol.errors import CorruptStore

from ..aws import aws_region
from ..faults import CONNECT_TIMEOUT_S, RETRIES
from ..health import PROBE_TIMEOUT_S
from .segment import FileSegment, SegmentGone, StoredObject, TierDriver, segment_name

CLIENT_CONFIG = Config(
    retries=RETRIES,  # faults.py: what is retried, and what the caller gets then
    connect_timeout=CONNECT_TIMEOUT_S,
    read_timeout=10,  # no byte of an answer for this long: the attempt is given up
    max_pool_connections=32,
    # Every record carries its own CRC32C, checked on every read: botocore's CRC32 of whole bodies on
    # top of that would only spend CPU (it was a tenth of a cold read's).
    request_checksum_calculation="when_required",
    response_checksum_validation="when_required",
)


PROBE_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1},
    connect_timeout=PROBE_TIMEOUT_S,
    read_timeout=PROBE_TIMEOUT_S,
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


def _missing(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound")


class S3Segment(FileSegment):
    def __init__(self, driver: S3Driver, key: str, base: int, size: int) -> None:
        super().__init__(base, size, sealed=size > 0)
        self.driver, self.key = driver, key

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def _write(self, data: bytes) -> None:
        if self.size:
            raise CorruptStore(f"s3 segment {self.key} is already written")
        self.driver.client.put_object(Bucket=self.driver.bucket, Key=self.key, Body=data)

    def commit(self) -> None:
        super().commit()
        if self.size:
            self.sealed = True

    def _read(self, offset: int, length: int) -> bytes:
        try:
            reply = self.driver.client.get_object(
                Bucket=self.driver.bucket, Key=self.key, Range=f"bytes={offset}-{offset + length - 1}"
            )
        except ClientError as error:
            if _missing(error):
                raise SegmentGone(f"tier object s3://{self.driver.bucket}/{self.key} is gone") from None
            raise
        return reply["Body"].read()

    def truncate(self, size: int) -> None:
        if size != self.size:
            raise CorruptStore(f"s3 segment {self.key} is {self.size} bytes; an object cannot be cut to {size}")

    def delete(self) -> None:
        self.driver.client.delete_object(Bucket=self.driver.bucket, Key=self.key)


class S3Driver(TierDriver):
    """Segments as objects in `bucket` under `prefix`; `client` is a boto3 S3 client (`s3_client`)."""

    appendable = False
    kind = "s3"

    def __init__(self, client, bucket: str, prefix: str) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix.strip("/")
        self._prober = None

    def probe(self) -> str:
        """One HeadBucket, on a client of its own that gives up within health.PROBE_TIMEOUT_S and never retries."""
        if self._prober is None:
            self._prober = boto3.session.Session().client("s3", region_name=aws_region(), config=PROBE_CONFIG)
        self._prober.head_bucket(Bucket=self.bucket)
        return "answered"

    def _key(self, path: str) -> str:
        return f"{self.prefix}/{path}/" if self.prefix else f"{path}/"

    def _list(self, prefix: str, delimiter: str | None = None):
        paginator = self.client.get_paginator("list_objects_v2")
        arguments = {"Bucket": self.bucket, "Prefix": prefix}
        if delimiter:
            arguments["Delimiter"] = delimiter
        yield from paginator.paginate(**arguments)

    def segments(self, path: str) -> list[FileSegment]:
        prefix = self._key(path)
        found = []
        for page in self._list(prefix):
            for item in page.get("Contents", ()):
                name = item["Key"][len(prefix) :]
                if name.isdigit():
                    found.append(S3Segment(self, item["Key"], int(name), item["Size"]))
        return sorted(found, key=lambda segment: segment.base)

    def create(self, path: str, base: int, name: str | None = None) -> FileSegment:
        return S3Segment(self, self._key(path) + (name or segment_name(base)), base, 0)

    def segment(self, path: str, name: str, base: int, size: int) -> FileSegment:
        return S3Segment(self, self._key(path) + name, base, size)

    def _full(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def create_object(self, key: str, data: bytes) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data, IfNoneMatch="*")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
                return False  # the object exists
            raise
        return True

    def read_object(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"].read()
        except ClientError as error:
            if _missing(error):
                return None
            raise

    def read_range(self, key: str, start: int, length: int) -> bytes | None:
        try:
            reply = self.client.get_object(
                Bucket=self.bucket, Key=self._full(key), Range=f"bytes={start}-{start + length - 1}"
            )
        except ClientError as error:
            if _missing(error):
                return None
            raise
        return reply["Body"].read()

    def objects(self, prefix: str) -> list[StoredObject]:
        root = len(self._full(""))
        return [
            StoredObject(item["Key"][root:], item["Size"], item["LastModified"].timestamp())
            for page in self._list(self._full(prefix))
            for item in page.get("Contents", ())
        ]

    def first_object_after(self, prefix: str, after: str) -> StoredObject | None:
        root = len(self._full(""))
        reply = self.client.list_objects_v2(
            Bucket=self.bucket, Prefix=self._full(prefix), StartAfter=self._full(after), MaxKeys=1
        )
        items = reply.get("Contents", ())
        if not items:
            return None
        return StoredObject(items[0]["Key"][root:], items[0]["Size"], items[0]["LastModified"].timestamp())

    def delete_object(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._full(key))

    def queues(self) -> list[tuple[str, int]]:
        root = f"{self.prefix}/" if self.prefix else ""
        found = []
        for page in self._list(root, "/"):
            for topic_prefix in page.get("CommonPrefixes", ()):
                for queue_page in self._list(topic_prefix["Prefix"], "/"):
                    for queue_prefix in queue_page.get("CommonPrefixes", ()):
                        topic, queue = queue_prefix["Prefix"][len(root) :].rstrip("/").rsplit("/", 1)
                        if queue.isdigit():
                            found.append((topic, int(queue)))
        return sorted(found)

    def delete_topic(self, topic: str) -> None:
        keys = [item["Key"] for page in self._list(self._key(topic)) for item in page.get("Contents", ())]
        for first in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[first : first + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"
