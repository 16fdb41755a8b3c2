"""Least privilege, written down once: what each principal (a function, the Spark jobs) does to each table and
bucket, and the IAM statements that allow exactly that.

Table access follows what the store engine calls for each use (tidemq_store/serverless/store.py, queue_index.py,
maintenance.py): opening a store describes every table (`Tables.create_missing`); a read is GetItem, BatchGetItem
or Query, a write PutItem, UpdateItem, DeleteItem or BatchWriteItem (TransactWriteItems is authorized per item,
with ConditionCheckItem for its conditions). Each statement names the table's ARN and each of its indexes' ARNs,
never `*`. Bucket access is object actions under the tier's prefix (object keys are not known in advance) and
ListBucket on the bucket (listing segments; the store's HeadBucket at start needs it too).
"""

from __future__ import annotations

from enum import Enum

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from .storage import Storage, TableRef


class TableUse(Enum):
    """What a principal does with one table."""

    OPEN = ("dynamodb:DescribeTable",)
    READ = (*OPEN, "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem")
    WRITE = (*READ, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")


class BucketUse(Enum):
    """What a principal does with objects under a prefix of a bucket."""

    LIST = ()
    READ = ("s3:GetObject",)
    WRITE = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")
    PUT = ("s3:PutObject",)


OPEN, READ, WRITE = TableUse.OPEN, TableUse.READ, TableUse.WRITE

# Per function, the tables it touches beyond opening them all (every store opens them all).
FUNCTION_TABLES: dict[str, dict[str, TableUse]] = {
    # produce: the topic (cached), who pushes from it (groups), the caller (users); sequencing and indexing a
    # batch write the queue's item and the batch items; transactional messages: a half message's item, its commit
    # (a transaction over it and the queue's item), check-backs opened and taken (conditional updates, the indexes)
    "produce": {
        "topics": READ,
        "groups": READ,
        "users": READ,
        "queues": WRITE,
        "batches": WRITE,
        # a DELAY topic's messages sent for later, and recalls of them (serverless/timers.py: transactions)
        "timers": WRITE,
        "timer_outcomes": WRITE,
        "transactions": WRITE,
        "sends": WRITE,  # an idempotent send's key, written in its sequencing transaction and read on a resend
    },
    # consume: the queue's item and batch items, read; long polls BatchGetItem the queues' items; pop consumption's
    # receives and acks read the group (its retry policy) and claim and settle in its ledgers (pop/receive.py:
    # conditional transactions); a message past its last delivery is put to the group's dead letters, which it may
    # create; a read of a DELAY topic moves its due timers (their items deleted, their outcomes written, with the
    # sequencing of their messages)
    "consume": {
        "topics": WRITE,
        "groups": READ,
        "users": READ,
        "queues": WRITE,
        "batches": WRITE,
        "pop_ledger": WRITE,
        "timers": WRITE,
        "timer_outcomes": WRITE,
    },
    # admin: every route of the admin API (topics, groups, users, offsets, tier upload now, transactions listed);
    # deleting a topic or a group deletes its pop ledgers (found through the table's indexes) and a topic's
    # transactions; a dead-letter resend records itself in the group's ledger of its dead letters and puts the
    # messages to their topics; deleting a DELAY topic deletes its pending timers, and a message looked up by a
    # timer id is found through the timers' index or their outcomes
    "admin": {
        **{
            name: WRITE
            for name in ("topics", "groups", "users", "offsets", "queues", "batches", "pop_ledger", "transactions")
        },
        "timers": WRITE,
        "timer_outcomes": READ,
    },
    # kv: the caller (users), and the KV namespaces, their keys and their changes (conditional transactions)
    "kv": {"users": READ, "kv_namespaces": WRITE, "kv_entries": WRITE, "kv_changes": WRITE},
    # push: reads the group and what it delivers, commits offsets (a transaction conditioned on the group's item),
    # keeps each queue's pending retry in the group's pop ledger (functions/logic/push_retries.py), and
    # dead-letters (a put to the DLQ topic, which it may create)
    "push": {
        "topics": WRITE,
        "groups": READ,
        "offsets": WRITE,
        "queues": WRITE,
        "batches": WRITE,
        "pop_ledger": WRITE,
        "timers": WRITE,  # its reads of a DELAY topic move due timers, as consume's do
        "timer_outcomes": WRITE,
    },
    # maintenance: each dirty queue's item (lease, hot boundary), its batch items (indexing, retention), topics'
    # retention; the timers job moves every DELAY topic's due timers, and a segment file a pending timer's record is
    # in stays (the timers' by_file index); transactions: check-backs opened, rollbacks at the check limit
    # (conditional updates, `due` index)
    "maintenance": {
        "topics": READ,
        "queues": WRITE,
        "batches": WRITE,
        "timers": WRITE,
        "timer_outcomes": WRITE,
        "transactions": WRITE,
        # the console job: every topic's queues, every group's committed offsets, one KV key written
        "groups": READ,
        "offsets": READ,
        "kv_namespaces": WRITE,
        "kv_entries": WRITE,
        "kv_changes": WRITE,
    },
    # console: every page reaches the same logic as admin (topics, groups, offsets, dead-letter resends, users and
    # their policies, queries) and the produce path of a resend; its sessions and the overview's series are keys of
    # the KV namespace `tidemq-console` (functions/logic/console_series.py)
    "console": {
        **{
            name: WRITE
            for name in ("topics", "groups", "users", "offsets", "queues", "batches", "pop_ledger", "transactions")
        },
        "timers": WRITE,
        "timer_outcomes": READ,
        "kv_namespaces": WRITE,
        "kv_entries": WRITE,
        "kv_changes": WRITE,
    },
    # the authorizer: the caller's user record
    "authorizer": {"users": READ},
    # bootstrap: lists users, and makes the first (a create-only put)
    "bootstrap": {"users": WRITE},
}
FUNCTION_TIER: dict[str, BucketUse] = {
    "produce": BucketUse.LIST,  # the store checks the bucket at start; a produce reads no segment
    "kv": BucketUse.LIST,  # the same: KV keeps nothing in the bucket
    "consume": BucketUse.READ,
    "admin": BucketUse.WRITE,  # upload now, delete a topic
    "push": BucketUse.READ,
    "maintenance": BucketUse.WRITE,
    "console": BucketUse.WRITE,  # as admin: upload now, delete a topic; browsing reads the cold tier
}
PROXY_SERVES = ("produce", "consume")
"""The functions whose logic the gRPC proxy runs (servers/grpc_proxy/service.py): SendMessage is produce's, the
receives, acks, invisible-time changes and dead-lettering are consume's pop consumption, QueryRoute reads topics."""
PROXY_TABLES: dict[str, TableUse] = {
    table: max((FUNCTION_TABLES[name].get(table, OPEN) for name in PROXY_SERVES), key=list(TableUse).index)
    for table in sorted({table for name in PROXY_SERVES for table in FUNCTION_TABLES[name]})
}
PROXY_TIER = BucketUse.READ  # consume's: a receive reads segments from the cold tier
JOB_TABLES: dict[str, TableUse] = {"topics": READ, "queues": WRITE, "batches": WRITE}
"""The Spark jobs (compaction, retention, migration): topics' attributes, queues' leases and bounds, batch items."""


def table_statements(tables: dict[str, TableRef], uses: dict[str, TableUse]) -> list[iam.PolicyStatement]:
    """Statements for `uses`, and DescribeTable on every other table (a store opens them all)."""
    statements = []
    for use in TableUse:
        names = [name for name in sorted(tables) if uses.get(name, OPEN) is use]
        if names:
            resources = [arn for name in names for arn in tables[name].arns]
            statements.append(iam.PolicyStatement(actions=list(use.value), resources=resources))
    return statements


def shared_directory_statement(storage: Storage) -> iam.PolicyStatement:
    """Mounting and writing the shared directory (EFS) through its access point only. The CDK's own grants allow
    ClientMount on `*` (with a condition); this names the file system instead."""
    on_access_point = {"StringEquals": {"elasticfilesystem:AccessPointArn": storage.access_point.access_point_arn}}
    return iam.PolicyStatement(
        actions=["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
        resources=[storage.file_system.file_system_arn],
        conditions=on_access_point,
    )


def bucket_statements(bucket: s3.IBucket, prefix: str, use: BucketUse) -> list[iam.PolicyStatement]:
    """ListBucket on `bucket` and `use`'s object actions under `prefix`/."""
    statements = [iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn])]
    if use.value:
        statements.append(
            iam.PolicyStatement(actions=list(use.value), resources=[bucket.arn_for_objects(f"{prefix}/*")])
        )
    return statements
