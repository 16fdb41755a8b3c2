"""The serverless backend's DynamoDB tables (pynamodb), named `<dynamodb_prefix>-<table>`.

topics   kind="topic" (hash) | name (range)     -> config: the TopicConfig as JSON
         one partition, so a page of topics is one ordered Query; each topic is one item, so creating
         or reading one costs one request with a million topics as with ten
groups   kind="group" (hash) | name (range)     -> config: the GroupConfig as JSON
users    kind="user" (hash) | name (range)      -> config: the UserRecord as JSON (acl.py; its secret sealed)
offsets  topic (hash) | "group/queue" (range)   -> group, queue, offset: a group's committed offset; by topic
         so deleting a topic finds its offsets with one Query, and the index `by_group` (group | topic) lists
         a group's topics
queues   "topic|queue" (hash)                   -> the queue's sequencer (queue_index.py): next_offset,
         indexed, pending (the newest batch entries), min_offset, hot_offset; `dirty` while it holds
         messages not yet in the cold tier (the sparse index `dirty` lists just those queues); `uploading`
         while a maintenance run holds the queue
batches  "topic|queue" (hash) | first_offset (range)
         -> count, file, position, length, store_timestamp, keys: one item per batch below the queue's
            `indexed` (queue_index.py); the index `by_file` (file | position) says which batches a
            segment file still holds
kv_namespaces  kind="namespace" (hash) | name (range)
         -> config: the NamespaceConfig as JSON, revision: the namespace's last write (kv/); `busy`,
            `busy_token`, `busy_since` while a restore or a deletion holds it (no write lands meanwhile)
kv_entries     namespace (hash) | key (range)
         -> value, version, expires_at_ms: a key as it is now; `purge_at` (DynamoDB TTL, epoch s) once it
            expires, so expired keys are removed too (they read as absent from `expires_at_ms` on)
kv_changes     namespace (hash) | revision (range)
         -> previous, kind, key, value, version, expires_at_ms: the change that made the revision, for
            watches; `purge_at` (DynamoDB TTL, epoch s): the namespace's history_ms after the change; `writer`: the
            token of the write that made it (absent for a restore's)
pop_ledger     "group#topic" (hash) | slot (range)
         -> a pop group's ledger of a topic's queues (serverless/pop.py): slot "queue" (10 digits) holds the
            queue's cursor (and group, topic: the sparse indexes `by_group` (group | topic) and `by_topic`
            (topic | group) list a group's or a topic's ledgers), slot "queue/offset" (20 digits) an entry:
            attempt, nonce, visible_at_ms, and message_group in a FIFO receive's entries (absent otherwise), slot
            "marks/queue/slot" a dead-letter mark: dead_lettered, the offset it marks
timers         topic (hash) | id (range)
         -> file, position, length, scheduled_ms: a DELAY topic's message not yet due (serverless/timers.py), its
            record on the shared directory; ids start with their due time, so the due ones are a range of the topic's.
            The index `by_file` (file | id) says which segment files pending timers still hold, `by_id` (id) finds
            one by its id alone
timer_outcomes id (hash)
         -> topic, outcome, at_ms, location: what became of a timer no longer pending (delivered, where; recalled;
            dropped); `purge_at` (DynamoDB TTL, epoch s): TIDEMQ_TIMER_OUTCOME_RETENTION_MS past its due time
transactions   msg_id (hash)                    -> a transaction (serverless/transactions.py): topic, queue,
            producer_group, state, prepared_ms, check_at, checks, claimed, answer, ended_ms, ended_by, offset,
            and where its half message is (file, position, length, has_keys); the sparse indexes `due` (due="p"
            while prepared | check_at) and `open` (open_for "topic|group" while a check is open | msg_id) find
            checks to open and to take, `by_topic` (topic | listed) lists a topic's; `purge_at` (DynamoDB TTL,
            epoch s): an outcome is kept for transactions.api.OUTCOME_RETENTION_MS
sends          "topic|idempotency_key" (hash)
         -> sent (sends.py `encode_sent`: digest, results), stored_at: an idempotent send, written in the transaction
            that sequences its batch (serverless/sends.py); `purge_at` (DynamoDB TTL, epoch s): its window's end

A TTLAttribute names the table's DynamoDB TTL attribute: pynamodb enables TTL on it when it makes the table.
"""

from __future__ import annotations

import os
import threading

import botocore.session
from pynamodb.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    ListAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.connection import Connection
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, KeysOnlyProjection, Projection
from pynamodb.models import Model
from pynamodb.signals import pre_dynamodb_send

from ..aws import aws_region
from ..faults import CONNECT_TIMEOUT_S, RETRIES
from ..health import PROBE_TIMEOUT_S

_session: botocore.session.Session | None = None  # the process's one, made on first use
_SESSION_LOCK = threading.Lock()

DIRTY = "dirty"  # the one value of `queues.dirty`: the sparse index holds only queues that have it


READ_TIMEOUT_S = 3
"""An attempt that has no answer this long is given up (DynamoDB answers in milliseconds): with faults.RETRIES, a
call that gets no answer at all fails within about 10 s, so a caller gets a 503 rather than waiting on (segments.py
relies on a put finishing within a minute)."""
ATTEMPTS = RETRIES["total_max_attempts"] - 1  # pynamodb counts the retries


def _meta(table: str, prefix: str, host: str | None, region: str):
    return type(
        "Meta",
        (),
        {
            "table_name": f"{prefix}-{table}",
            "host": host,
            "region": region,
            "billing_mode": "PAY_PER_REQUEST",
            "connect_timeout_seconds": CONNECT_TIMEOUT_S,
            "read_timeout_seconds": READ_TIMEOUT_S,
            "max_retry_attempts": ATTEMPTS,
        },
    )


CONFIG_TABLES = ("topics", "groups", "users")


def _configs(table: str, prefix: str, host: str | None, region: str) -> type[Model]:
    """A table of configs (topics, groups, users): kind (hash) | name (range) -> config, the whole config as JSON."""

    class Configs(Model):
        Meta = _meta(table, prefix, host, region)
        kind = UnicodeAttribute(hash_key=True)
        name = UnicodeAttribute(range_key=True)
        config = UnicodeAttribute()

    return Configs


def _index(name: str, projection: Projection | None = None):
    projection = KeysOnlyProjection() if projection is None else projection
    return type("Meta", (), {"index_name": name, "projection": projection, "billing_mode": "PAY_PER_REQUEST"})


class Tables:
    """The models bound to one prefix and endpoint (`AWS_ENDPOINT_URL`, else AWS)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.requests = 0
        """DynamoDB requests this process has made to these tables (benchmarks and tests read it)."""
        pre_dynamodb_send.connect(self._count)
        host = os.environ.get("AWS_ENDPOINT_URL") or None
        region = aws_region()

        class OffsetsByGroup(GlobalSecondaryIndex):
            Meta = _index("by_group")
            group = UnicodeAttribute(hash_key=True)
            topic = UnicodeAttribute(range_key=True)

        class Offsets(Model):
            Meta = _meta("offsets", prefix, host, region)
            topic = UnicodeAttribute(hash_key=True)
            slot = UnicodeAttribute(range_key=True)
            group = UnicodeAttribute()
            queue = NumberAttribute()
            offset = NumberAttribute()
            by_group = OffsetsByGroup()

        class DirtyQueues(GlobalSecondaryIndex):
            Meta = _index("dirty")
            dirty = UnicodeAttribute(hash_key=True)

        class Queues(Model):
            Meta = _meta("queues", prefix, host, region)
            key = UnicodeAttribute(hash_key=True)
            next_offset = NumberAttribute(default=0)
            indexed = NumberAttribute(default=0)
            pending = ListAttribute(of=UnicodeAttribute, default=list)
            min_offset = NumberAttribute(default=0)
            hot_offset = NumberAttribute(default=0)
            dirty = UnicodeAttribute(null=True)
            uploading = NumberAttribute(null=True)  # the maintenance lease: held until this time (epoch s)
            by_dirty = DirtyQueues()

        class BatchesByFile(GlobalSecondaryIndex):
            Meta = _index("by_file")
            file = UnicodeAttribute(hash_key=True)
            position = NumberAttribute(range_key=True)

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
            by_file = BatchesByFile()

        class KvNamespaces(Model):
            Meta = _meta("kv_namespaces", prefix, host, region)
            kind = UnicodeAttribute(hash_key=True)
            name = UnicodeAttribute(range_key=True)
            config = UnicodeAttribute()
            revision = NumberAttribute(default=0)
            busy = UnicodeAttribute(null=True)  # "restoring" | "deleting": what holds the namespace
            busy_token = UnicodeAttribute(null=True)  # who holds it (its conditional writes name it)
            busy_since = NumberAttribute(null=True)  # since when (ms): a hold much older lost its holder

        class KvEntries(Model):
            Meta = _meta("kv_entries", prefix, host, region)
            namespace = UnicodeAttribute(hash_key=True)
            key = UnicodeAttribute(range_key=True)
            value = BinaryAttribute(legacy_encoding=False)
            version = NumberAttribute()
            expires_at_ms = NumberAttribute(null=True)
            purge_at = TTLAttribute(null=True)

        class KvChanges(Model):
            Meta = _meta("kv_changes", prefix, host, region)
            namespace = UnicodeAttribute(hash_key=True)
            revision = NumberAttribute(range_key=True)
            previous = NumberAttribute()
            kind = UnicodeAttribute()
            key = UnicodeAttribute()
            value = BinaryAttribute(legacy_encoding=False, null=True)  # a delete has none
            version = NumberAttribute()
            expires_at_ms = NumberAttribute(null=True)
            purge_at = TTLAttribute()
            writer = UnicodeAttribute(null=True)  # the write's own token (kv/keys.py: a lost answer knows its own)

        class PopLedgersByGroup(GlobalSecondaryIndex):
            Meta = _index("by_group")
            group = UnicodeAttribute(hash_key=True)
            topic = UnicodeAttribute(range_key=True)

        class PopLedgersByTopic(GlobalSecondaryIndex):
            Meta = _index("by_topic")
            topic = UnicodeAttribute(hash_key=True)
            group = UnicodeAttribute(range_key=True)

        class PopLedger(Model):
            Meta = _meta("pop_ledger", prefix, host, region)
            ledger = UnicodeAttribute(hash_key=True)  # "group#topic"
            slot = UnicodeAttribute(range_key=True)  # "queue" (the cursor) | "queue/offset" (an entry)
            cursor = NumberAttribute(null=True)
            group = UnicodeAttribute(null=True)  # cursor items only: the sparse indexes list ledgers, not entries
            topic = UnicodeAttribute(null=True)
            attempt = NumberAttribute(null=True)
            nonce = NumberAttribute(null=True)
            visible_at_ms = NumberAttribute(null=True)
            message_group = UnicodeAttribute(null=True)  # a FIFO entry's (not `group`: the indexes' key)
            dead_lettered = NumberAttribute(null=True)  # a dead-letter mark's: the offset it marks (serverless/pop.py)
            by_group = PopLedgersByGroup()
            by_topic = PopLedgersByTopic()

        class TimersByFile(GlobalSecondaryIndex):
            Meta = _index("by_file")
            file = UnicodeAttribute(hash_key=True)
            id = UnicodeAttribute(range_key=True)

        class TimersById(GlobalSecondaryIndex):
            Meta = _index("by_id")
            id = UnicodeAttribute(hash_key=True)

        class Timers(Model):
            Meta = _meta("timers", prefix, host, region)
            topic = UnicodeAttribute(hash_key=True)
            id = UnicodeAttribute(range_key=True)
            file = UnicodeAttribute()
            position = NumberAttribute()
            length = NumberAttribute()
            scheduled_ms = NumberAttribute()
            by_file = TimersByFile()
            by_id = TimersById()

        class TimerOutcomes(Model):
            Meta = _meta("timer_outcomes", prefix, host, region)
            id = UnicodeAttribute(hash_key=True)
            topic = UnicodeAttribute()
            outcome = NumberAttribute()
            at_ms = NumberAttribute()
            location = UnicodeAttribute(null=True)  # a delivered one's message id where it is
            purge_at = TTLAttribute()

        class TransactionsDue(GlobalSecondaryIndex):
            Meta = _index("due", AllProjection())
            due = UnicodeAttribute(hash_key=True)
            check_at = NumberAttribute(range_key=True)

        class TransactionsOpen(GlobalSecondaryIndex):
            Meta = _index("open", AllProjection())
            open_for = UnicodeAttribute(hash_key=True)
            msg_id = UnicodeAttribute(range_key=True)

        class TransactionsByTopic(GlobalSecondaryIndex):
            Meta = _index("by_topic", AllProjection())
            topic = UnicodeAttribute(hash_key=True)
            listed = UnicodeAttribute(range_key=True)

        class Transactions(Model):
            Meta = _meta("transactions", prefix, host, region)
            msg_id = UnicodeAttribute(hash_key=True)
            topic = UnicodeAttribute()
            queue = NumberAttribute()
            producer_group = UnicodeAttribute()
            state = UnicodeAttribute()
            prepared_ms = NumberAttribute()
            check_at = NumberAttribute()
            checks = NumberAttribute(default=0)
            claimed = NumberAttribute(default=0)
            answer = UnicodeAttribute(null=True)
            ended_ms = NumberAttribute(null=True)
            ended_by = UnicodeAttribute(null=True)
            offset = NumberAttribute(null=True)
            file = UnicodeAttribute()
            position = NumberAttribute()
            length = NumberAttribute()
            has_keys = BooleanAttribute(default=False)
            listed = UnicodeAttribute()  # transactions.api.listing_key
            due = UnicodeAttribute(null=True)  # "p" while prepared: the sparse index `due`
            open_for = UnicodeAttribute(null=True)  # "topic|group" while a check is open: the sparse index `open`
            purge_at = TTLAttribute(null=True)
            by_due = TransactionsDue()
            by_open = TransactionsOpen()
            by_topic = TransactionsByTopic()

        class Sends(Model):
            Meta = _meta("sends", prefix, host, region)
            key = UnicodeAttribute(hash_key=True)
            sent = BinaryAttribute(legacy_encoding=False)
            stored_at = NumberAttribute()
            purge_at = TTLAttribute()

        self.topics, self.groups, self.users = (_configs(table, prefix, host, region) for table in CONFIG_TABLES)
        self.offsets, self.queues, self.batches = Offsets, Queues, Batches
        self.kv_namespaces, self.kv_entries, self.kv_changes = KvNamespaces, KvEntries, KvChanges
        self.pop_ledger = PopLedger
        self.timers, self.timer_outcomes = Timers, TimerOutcomes
        self.transactions = Transactions
        self.sends = Sends
        self.connection = Connection(
            region=region,
            host=host,
            connect_timeout_seconds=CONNECT_TIMEOUT_S,
            read_timeout_seconds=READ_TIMEOUT_S,
            max_retry_attempts=ATTEMPTS,
        )
        """For transactions (queue_index.py), which span tables' items."""
        self._prober = Connection(
            region=region,
            host=host,
            connect_timeout_seconds=PROBE_TIMEOUT_S,
            read_timeout_seconds=PROBE_TIMEOUT_S,
            max_retry_attempts=0,
        )
        self._share_one_session()

    def models(self) -> tuple[type[Model], ...]:
        messages = (self.topics, self.groups, self.users, self.offsets, self.queues, self.batches)
        kv = (self.kv_namespaces, self.kv_entries, self.kv_changes)
        later = (self.pop_ledger, self.timers, self.timer_outcomes, self.transactions, self.sends)
        return (*messages, *kv, *later)

    def _share_one_session(self) -> None:
        """Make every table's client now, from the process's one botocore session. pynamodb would make a session a
        table, each parsing DynamoDB's service model again: 14 tables took 1.8 s of CPU, most of a store's start
        (a Lambda's cold start). A client, once made, serves every thread."""
        global _session
        with _SESSION_LOCK:  # botocore makes clients of one session one at a time
            _session = _session or botocore.session.get_session()
            connections = [model._get_connection().connection for model in self.models()]
            for connection in (*connections, self.connection, self._prober):
                connection._local.session = _session  # pynamodb's session of this thread, until the client is made
                connection.client  # noqa: B018 (made now)

    def probe(self) -> str:
        """One strongly consistent GetItem of a topic nobody can name, on a connection of its own that gives up
        within health.PROBE_TIMEOUT_S and never retries (what `GET /health` asks)."""
        key = {"kind": {"S": "probe"}, "name": {"S": " "}}
        self._prober.client.get_item(TableName=self.topics.Meta.table_name, Key=key, ConsistentRead=True)
        return "answered"

    def _count(self, _sender, *, table_name: str | None = None, **_) -> None:
        if table_name is None or table_name.startswith(f"{self.prefix}-"):  # None: a transaction, over tables
            self.requests += 1

    def create_missing(self) -> None:
        for model in self.models():
            if not model.exists():
                model.create_table(wait=True)
