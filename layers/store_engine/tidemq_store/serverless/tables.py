"""The serverless backend's DynamoDB tables (pynamodb), named `<dynamodb_prefix>-<table>`.

topics   kind="topic" (hash) | name (range)        -> the TopicConfig as JSON
         one partition, so a page of topics is one ordered Query; each topic is one item, so
         creating or reading one costs the same with a million as with ten
groups   kind="group" (hash) | name (range)        -> the GroupConfig as JSON
offsets  "topic@group" (hash) | queue (range)      -> committed offset
queues   "topic|queue" (hash)                       -> next_offset (the counter), min_offset
batches  "topic|queue" (hash) | first_offset (range)
         -> count, file, position, length, store_timestamp, last_store_timestamp:
            one item per produce batch: where its records are on the shared file system
"""

from __future__ import annotations

import os

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.connection import Connection
from pynamodb.models import Model


def _meta(table: str, prefix: str, host: str | None, region: str):
    return type("Meta", (), {"table_name": f"{prefix}-{table}", "host": host, "region": region,
                             "billing_mode": "PAY_PER_REQUEST"})  # fmt: skip


class Tables:
    """The models bound to one prefix and endpoint (`AWS_ENDPOINT_URL`, else AWS)."""

    def __init__(self, prefix: str) -> None:
        host = os.environ.get("AWS_ENDPOINT_URL") or None
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        self.connection = Connection(region=region, host=host)

        class Topics(Model):
            Meta = _meta("topics", prefix, host, region)
            kind = UnicodeAttribute(hash_key=True)
            name = UnicodeAttribute(range_key=True)
            config = UnicodeAttribute()

        class Groups(Model):
            Meta = _meta("groups", prefix, host, region)
            kind = UnicodeAttribute(hash_key=True)
            name = UnicodeAttribute(range_key=True)
            config = UnicodeAttribute()

        class Offsets(Model):
            Meta = _meta("offsets", prefix, host, region)
            key = UnicodeAttribute(hash_key=True)
            queue = NumberAttribute(range_key=True)
            offset = NumberAttribute()

        class Queues(Model):
            Meta = _meta("queues", prefix, host, region)
            key = UnicodeAttribute(hash_key=True)
            next_offset = NumberAttribute(default=0)
            min_offset = NumberAttribute(default=0)

        class Batches(Model):
            Meta = _meta("batches", prefix, host, region)
            key = UnicodeAttribute(hash_key=True)
            first_offset = NumberAttribute(range_key=True)
            count = NumberAttribute()
            file = UnicodeAttribute()
            position = NumberAttribute()
            length = NumberAttribute()
            store_timestamp = NumberAttribute()
            keys = UnicodeSetAttribute(null=True)  # the batch's message keys (lookups by key filter on it)

        self.topics, self.groups, self.offsets, self.queues, self.batches = Topics, Groups, Offsets, Queues, Batches

    def create_missing(self) -> None:
        for model in (self.topics, self.groups, self.offsets, self.queues, self.batches):
            if not model.exists():
                model.create_table(wait=True)
