"""S3 and DynamoDB are where they were asked for, never a silent in-memory stand-in: the embedded moto server
only with TIDEMQ_LOCAL_AWS=moto (`make run` and the tests ask), never inside AWS Lambda; otherwise an
AWS_ENDPOINT_URL, else AWS itself, and no credentials for it a start-up error that says what to change."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from devtools.local_aws import start as start_local_aws
from functions import store as process_store
from servers.process import running_gateway
from shared.aws import AwsEndpoint, connect
from shared.settings import InvalidConfiguration, LocalAwsMode, get_settings

NO_CREDENTIALS = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "TIDEMQ_LOCAL_AWS",
)


def moto_servers() -> set[int]:
    """This process's children serving moto (`python -m devtools.moto_server PORT`)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rpartition(")")[2].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError):  # gone meanwhile
            continue
        if parent == os.getpid() and b"devtools.moto_server" in command:
            found.add(int(stat.parent.name))
    return found


@pytest.fixture
def nowhere(tmp_path, monkeypatch) -> Path:
    """No AWS endpoint, no credentials of any kind (nor files or instance metadata to find them in), nothing asked
    for; a store under tmp_path wanting S3 (TIDEMQ_TIER=s3). The process store is closed afterwards."""
    for name in (*NO_CREDENTIALS, "AWS_REGION"):  # each restored afterwards, even if the store set it
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("TIDEMQ_TIER", "s3")
    get_settings.cache_clear()
    process_store.allow_local_aws(start_local_aws)  # as the local servers do
    yield tmp_path
    process_store.allow_local_aws(None)
    endpoint = process_store.aws_endpoint()
    process_store.close_store()
    if endpoint is not None and endpoint.embedded is not None:
        endpoint.embedded.stop()
    get_settings.cache_clear()


def test_a_store_opened_in_lambda_mode_without_an_endpoint_starts_no_local_server(nowhere, monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "tidemq-produce")
    before = moto_servers()
    with pytest.raises(InvalidConfiguration, match="no AWS credentials were found"):
        process_store.get_store()  # AWS itself, which these credentials cannot reach: it says so
    assert moto_servers() == before and "AWS_ENDPOINT_URL" not in os.environ

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example")
    endpoint = connect(get_settings().local_aws)  # with credentials: AWS itself, as Lambda would
    assert (endpoint.url, endpoint.embedded, str(endpoint)) == (None, None, "AWS")
    assert moto_servers() == before and "AWS_ENDPOINT_URL" not in os.environ


def test_asking_for_the_embedded_server_inside_lambda_is_a_start_up_error(nowhere, monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "tidemq-produce")
    monkeypatch.setenv("TIDEMQ_LOCAL_AWS", "moto")
    get_settings.cache_clear()
    before = moto_servers()
    with pytest.raises(InvalidConfiguration, match="TIDEMQ_LOCAL_AWS=moto inside AWS Lambda"):
        process_store.get_store()
    assert moto_servers() == before and "AWS_ENDPOINT_URL" not in os.environ


def test_outside_lambda_nothing_asked_for_is_aws_itself_never_the_embedded_server(nowhere):
    before = moto_servers()
    with pytest.raises(InvalidConfiguration, match="TIDEMQ_LOCAL_AWS=moto for an in-memory moto server"):
        process_store.get_store()
    assert moto_servers() == before and "AWS_ENDPOINT_URL" not in os.environ


def test_asked_for_the_embedded_server_starts_and_says_it_is_in_memory(nowhere, monkeypatch):
    monkeypatch.setenv("TIDEMQ_LOCAL_AWS", "moto")
    get_settings.cache_clear()
    before = moto_servers()
    store = process_store.get_store()
    endpoint = process_store.aws_endpoint()
    assert len(moto_servers() - before) == 1 and os.environ["AWS_ENDPOINT_URL"] == endpoint.url
    assert store.tier_medium == "s3://tidemq-tier/tidemq"
    assert str(endpoint) == f"{endpoint.url} (the embedded moto server: in memory, gone when this process stops)"


def test_a_process_that_cannot_start_a_local_aws_says_so_and_starts_none(nowhere, monkeypatch):
    monkeypatch.setenv("TIDEMQ_LOCAL_AWS", "moto")
    get_settings.cache_clear()
    process_store.allow_local_aws(None)  # a handler's process: nothing in it can start one
    before = moto_servers()
    with pytest.raises(InvalidConfiguration, match="asks for a local AWS, which only the local servers start"):
        process_store.get_store()
    assert moto_servers() == before and "AWS_ENDPOINT_URL" not in os.environ


def test_an_endpoint_given_is_used_even_when_the_embedded_server_is_asked_for(nowhere, monkeypatch, local_aws):
    monkeypatch.setenv("AWS_ENDPOINT_URL", local_aws.endpoint)  # e.g. LocalStack's, with make run asking for moto
    before = moto_servers()
    assert connect(LocalAwsMode.MOTO) == AwsEndpoint(local_aws.endpoint) and moto_servers() == before


def test_a_gateway_that_cannot_reach_aws_refuses_to_start_saying_why(nowhere):
    with pytest.raises(RuntimeError) as refused, running_gateway(nowhere / "gateway", TIDEMQ_LOCAL_AWS="off"):
        pass
    log = str(refused.value)
    assert "TideMQ cannot start: S3 or DynamoDB is needed" in log and "Traceback" not in log


def test_a_cancelled_transaction_changes_no_item_it_named(aws_env):
    """The moto server undoes a cancelled TransactWriteItems item by item (devtools/moto_server.py, instead of moto's
    copy of whole tables): what the transaction had already applied before the entry that failed is put back, an
    item it had made is gone again, and nothing else is touched. On LocalStack, the same of the real thing."""
    import boto3

    dynamodb = boto3.client("dynamodb", region_name=os.environ.get("AWS_REGION", "us-east-1"))
    table = f"undo-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    keys = [{"AttributeName": "k", "KeyType": "HASH"}, {"AttributeName": "n", "KeyType": "RANGE"}]
    types = [{"AttributeName": "k", "AttributeType": "S"}, {"AttributeName": "n", "AttributeType": "N"}]
    dynamodb.create_table(TableName=table, KeySchema=keys, AttributeDefinitions=types, BillingMode="PAY_PER_REQUEST")
    dynamodb.get_waiter("table_exists").wait(TableName=table)
    for n in (1, 2, 3):
        dynamodb.put_item(TableName=table, Item={"k": {"S": "q"}, "n": {"N": str(n)}, "v": {"S": f"before {n}"}})

    def key(n: int) -> dict:
        return {"k": {"S": "q"}, "n": {"N": str(n)}}

    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": key(1),
                        "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"S": "after"}},
                    }
                },
                {"Put": {"TableName": table, "Item": {**key(4), "v": {"S": "new"}}}},
                {"Delete": {"TableName": table, "Key": key(2)}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key(3),
                        "ConditionExpression": "v = :no",
                        "ExpressionAttributeValues": {":no": {"S": "something else"}},
                    }
                },
            ]
        )
    items = dynamodb.query(
        TableName=table, KeyConditionExpression="k = :k", ExpressionAttributeValues={":k": {"S": "q"}}
    )["Items"]
    assert {(int(item["n"]["N"]), item["v"]["S"]) for item in items} == {
        (1, "before 1"),
        (2, "before 2"),
        (3, "before 3"),
    }
    dynamodb.delete_table(TableName=table)
