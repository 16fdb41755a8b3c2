"""`MessageStore`: the storage API of RIP-20, the only way compute reaches storage.

Handlers and logic call these methods and nothing below them, so a backend (the embedded
CommitLog + RocksDB engine, or the serverless EFS + DynamoDB one) can change without touching compute.

Semantics every backend keeps:
- `put` is all-or-nothing, whatever queues the batch's messages go to: a batch is validated whole before
  anything is written, and after a crash at any moment its messages are either all stored (each at its
  offset) or none is. An acknowledged batch is always stored; one whose put failed or never returned may be,
  wholly (so a producer that sends it again can store it twice: at least once). The embedded engine writes a
  batch as one append that recovery keeps or drops whole; the serverless backend sequences a batch spread
  over several queues with one DynamoDB transaction. Both are shown by crash tests that SIGKILL writers of
  such batches (tests/integration/test_crash.py, test_serverless.py). A producer that names its sends
  (`SendKey`, sends.py) stores each once: a send of a key stored already within the window is answered as the
  first was.
- Queue offsets are dense and ordered; a queue holds [min_offset, max_offset).
- Errors are `tidemq_store.errors` classes; a `ClientError` means nothing was changed.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tidemq_protocol.errors import QueuesCannotShrink
from tidemq_protocol.filter import MessageFilter
from tidemq_protocol.message import Message, StoredMessage
from tidemq_protocol.timer import parse_recall_handle

from .acl import UserRecord
from .errors import StoreClosed
from .health import DependencyHealth, Probe, probe_all
from .kv.api import KeyValueStore
from .model import (
    GetResult,
    GroupConfig,
    Page,
    PutResult,
    QueueOffsets,
    RecordBatch,
    TierQueueStatus,
    TopicConfig,
    validated,
)
from .pop.api import PopLedger
from .reads import QueueRead, ReadRequest
from .sends import SendKey
from .timer.api import Recalled, TimerStore
from .transactions.api import TransactionLog

UNSET = object()


def updated_topic(
    current: TopicConfig, retention_ms: int | object | None, queues: int | None, attributes: Mapping[str, str] | None
) -> TopicConfig:
    """The config `MessageStore.update_topic` makes of `current`: each change given (UNSET retention, None queues or
    attributes: unchanged) applied and checked. Queues never shrink (QueuesCannotShrink)."""
    changes: dict[str, object] = {}
    if retention_ms is not UNSET:
        changes["retention_ms"] = retention_ms
    if queues is not None:
        if queues < current.queues:
            raise QueuesCannotShrink(current.name, current.queues, queues)
        changes["queues"] = queues
    if attributes is not None:
        changes["attributes"] = dict(attributes)
    return validated(TopicConfig, {**current.model_dump(), **changes})


@dataclass(slots=True, frozen=True)
class CleanReport:
    """What one retention pass removed."""

    segments_deleted: int
    messages_expired: int


@dataclass(slots=True, frozen=True)
class MaintenanceReport:
    """What one scheduled maintenance run did (`skipped`: nothing was new, and it made no request).
    `upload_lag_seconds`: the age of the oldest message the run found not yet in the cold tier (0: none)."""

    skipped: bool
    queues: int = 0
    messages_uploaded: int = 0
    files_deleted: int = 0
    failed: tuple[str, ...] = ()
    upload_lag_seconds: float = 0.0


_OPENING = threading.Lock()  # a store's KV namespaces and pop ledger are opened once


class MessageStore(ABC):
    """Topics, groups, consumer offsets and messages, with their lifecycle."""

    # ---- topics ----------------------------------------------------------------------------------

    @abstractmethod
    def create_topic(self, config: TopicConfig) -> TopicConfig:
        """Create a topic (raises TopicExists); returns it with `created_at` set."""

    @abstractmethod
    def get_topic(self, name: str) -> TopicConfig:
        """The topic's config, or TopicNotFound."""

    def cached_topic(self, name: str) -> TopicConfig:
        """The topic's config for the data path (reads, pop), as `cached_group` is the group's."""
        return self.get_topic(name)

    @abstractmethod
    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        """Topics in name order, starting after `after`: at most `limit`, and at most `max_page_bytes` of them past
        the first; the page's `next_after` is where the next one starts (None: nothing follows). A topic deleted
        while the listing runs is listed as it was or left out, never the cause of an error, and no topic is
        listed on two pages."""

    @abstractmethod
    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        """Change retention, attributes, or grow the queue count (queues never shrink)."""

    @abstractmethod
    def delete_topic(self, name: str) -> None:
        """Delete a topic, its queues and every group's offsets on it."""

    # ---- groups and consumer offsets -------------------------------------------------------------

    @abstractmethod
    def create_group(self, config: GroupConfig) -> GroupConfig: ...

    @abstractmethod
    def get_group(self, name: str) -> GroupConfig: ...

    def cached_group(self, name: str) -> GroupConfig:
        """The group's config for the data path (pop), which a backend whose lookups cost a request answers from
        a short-lived cache (serverless: `metadata.CONFIG_CACHE_S`); `get_group` is always fresh. GroupNotFound if
        there is none."""
        return self.get_group(name)

    @abstractmethod
    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        """Groups in name order, paged as `list_topics` pages topics."""

    @abstractmethod
    def update_group(self, config: GroupConfig) -> GroupConfig:
        """Replace an existing group's config (GroupNotFound if there is none); `created_at` is kept."""

    @abstractmethod
    def delete_group(self, name: str) -> None:
        """Delete a group with its committed offsets. Serialized with `update_group` and `commit_offsets`: once
        this returns, neither brings the group or its offsets back (they raise GroupNotFound)."""

    @abstractmethod
    def commit_offsets(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        """Record the group's next offset to consume for each queue (0 <= offset <= max_offset).

        With `expected`, a compare-and-set: the commit is made only if the group's committed offset on each
        queue of `expected` is still the value given there (None: never committed); otherwise OffsetConflict
        (carrying the offset committed now) and nothing changes. Push delivery commits this way, so a reset
        made while it delivered is not undone."""

    @abstractmethod
    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        """The group's committed offset per queue of `topic` (queues never committed are absent)."""

    @abstractmethod
    def group_topics(self, group: str) -> list[str]:
        """Topics the group has committed offsets on."""

    # ---- users (acl.py: RocketMQ ACL 2.0) ----------------------------------------------------------

    @abstractmethod
    def create_user(self, user: UserRecord) -> UserRecord:
        """Store a new user (UserExists if the name is taken); returns it with `created_at` set."""

    @abstractmethod
    def get_user(self, name: str) -> UserRecord:
        """The user's record, or UserNotFound."""

    @abstractmethod
    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        """Users in name order, paged as `list_topics` pages topics."""

    @abstractmethod
    def update_user(self, user: UserRecord) -> UserRecord:
        """Replace an existing user's record (UserNotFound if there is none); `created_at` is kept."""

    @abstractmethod
    def delete_user(self, name: str) -> None:
        """Delete a user (UserNotFound if there is none)."""

    # ---- messages --------------------------------------------------------------------------------

    @abstractmethod
    def put(self, topic: str, messages: Sequence[Message], send: SendKey | None = None) -> list[PutResult]:
        """Store a batch, all or nothing (see above); return when it is acknowledged (durable under SYNC).
        `StoreFailed` once the store takes no more writes. With `send` (its key), a batch the topic stored under the
        key within the deduplication window is answered with its first results and not stored again (sends.py)."""

    @abstractmethod
    def put_records(
        self, topic: str, records: bytes, default_queue: int = 0, send: SendKey | None = None
    ) -> list[PutResult]:
        """Store a batch a producer encoded as version 2 records (`record.encode_record`), as `put` does: the
        records are checked (`batch.validate_records`: each CRC32C, the topic, queues, properties and limits) and
        appended as they came, with the broker's fields written; a record asking for `record.ANY_QUEUE` goes to
        `default_queue`; `send` as `put` takes it."""

    def get(
        self,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int = 32,
        max_bytes: int = 4 * 1024 * 1024,
        message_filter: str | MessageFilter | None = None,
    ) -> GetResult:
        """Read up to `max_messages`/`max_bytes` from `offset` of the messages `message_filter` selects (a tag or
        SQL92 filter, a tag expression, or None: every message); raises OffsetOutOfRange outside
        [min_offset, max_offset]. At `max_offset` the result is empty; `next_offset` is past every message the
        read examined, selected or not."""
        read = ReadRequest(topic, queue, offset, max_messages, max_bytes, message_filter)
        return self.read_queue(read).get_result()

    def read_records(
        self,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int = 1000,
        max_bytes: int = 4 * 1024 * 1024,
        message_filter: str | MessageFilter | None = None,
    ) -> RecordBatch:
        """Like `get`, but the records as stored, undecoded: what bulk consumers are sent."""
        read = ReadRequest(topic, queue, offset, max_messages, max_bytes, message_filter)
        return self.read_queue(read).record_batch()

    @abstractmethod
    def read_queue(self, request: ReadRequest) -> QueueRead:
        """Check a read (the topic, the queue, the limits, the offset) and choose what it returns: what `get` decodes
        and `read_records` sends (reads.py)."""

    def wait_for_messages(self, topic: str, queue: int, offset: int, timeout_s: float) -> bool:
        """Block until the queue holds a readable message at `offset` or the timeout passes (long
        polling); True if one arrived. Backends that learn of new messages override this poll."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.queue_offsets(topic)[queue].max_offset > offset:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(0.05, remaining))

    @abstractmethod
    def queue_offsets(self, topic: str) -> list[QueueOffsets]:
        """[min_offset, max_offset) of every queue of the topic."""

    @abstractmethod
    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        """The first offset stored at or after `timestamp_ms` (max_offset if none)."""

    @abstractmethod
    def message_by_id(self, msg_id: str) -> StoredMessage:
        """The message with this id, or MessageNotFound."""

    @abstractmethod
    def messages_by_key(self, topic: str, key: str, limit: int = 32) -> list[StoredMessage]:
        """The most recent `limit` messages of `topic` carrying `key`, oldest first."""

    # ---- cold tier ---------------------------------------------------------------------------------

    tier_medium: str | None = None
    """Where the cold tier is (e.g. `s3://bucket/prefix`), None without one."""

    def tier_status(self, topic: str) -> list[TierQueueStatus]:
        """Per queue: the hot minimum, the cold range (None: nothing in a cold tier) and the upload lag."""
        return [
            TierQueueStatus(q.queue, q.min_offset, None, None, q.max_offset, 0, 0.0) for q in self.queue_offsets(topic)
        ]

    def upload_now(self, topic: str | None = None) -> int:
        """Upload what waits for the cold tier now (of `topic`, or all); return how many messages went.
        Without a cold tier there is nothing to upload: 0."""
        if topic is not None:
            self.get_topic(topic)
        return 0

    # ---- KV namespaces (kv/) -----------------------------------------------------------------------

    _kv: KeyValueStore | None = None

    @property
    def kv(self) -> KeyValueStore:
        """The store's KV namespaces (kv/api.py), opened (and on the embedded engine recovered) at first use."""
        if self._kv is None:
            with _OPENING:
                if self._kv is None:
                    self._kv = self.open_kv()
        return self._kv

    def open_kv(self) -> KeyValueStore:
        """The backend's KeyValueStore over this store."""
        raise NotImplementedError(f"{type(self).__name__} has no KV namespaces")

    def close_kv(self) -> None:
        """Close the KV namespaces if they were opened (each backend's `close` calls this first)."""
        if self._kv is not None:
            self._kv.close()
            self._kv = None

    # ---- pop consumption (pop/) -------------------------------------------------------------------

    _pop_ledger: PopLedger | None = None

    @property
    def pop_ledger(self) -> PopLedger:
        """The pop groups' ledgers (pop/api.py), opened at first use."""
        if self._pop_ledger is None:
            with _OPENING:
                if self._pop_ledger is None:
                    self._pop_ledger = self.open_pop_ledger()
        return self._pop_ledger

    def open_pop_ledger(self) -> PopLedger:
        """The backend's PopLedger."""
        raise NotImplementedError(f"{type(self).__name__} has no pop ledger")

    def close_pop_ledger(self) -> None:
        """Close the pop ledger if it was opened (each backend's `close` calls this first)."""
        if self._pop_ledger is not None:
            self._pop_ledger.close()
            self._pop_ledger = None

    # ---- delay and timer messages (timer/) ----------------------------------------------------------

    _timers: TimerStore | None = None

    @property
    def timers(self) -> TimerStore:
        """The store's timer messages (timer/api.py): a DELAY topic's messages sent for later, until they are due."""
        if self._timers is None:
            with _OPENING:
                if self._timers is None:
                    self._timers = self.open_timers()
        return self._timers

    def open_timers(self) -> TimerStore:
        """The backend's TimerStore."""
        raise NotImplementedError(f"{type(self).__name__} has no timer messages")

    def recall(self, topic: str, handle: str) -> Recalled:
        """Recall the timer message of `topic` that `handle` names (a put's `recall_handle`) before it is due, so that
        it is never delivered (RocketMQ 5.3's RecallMessage): TimerDelivered if it was delivered already,
        TimerNotFound if the handle names none of the topic's; a recall sent again answers as the first did."""
        self.get_topic(topic)
        return self.timers.recall(topic, parse_recall_handle(handle, topic))

    # ---- transactional messages (transactions/) ---------------------------------------------------

    _transactions: TransactionLog | None = None
    _transactions_closed = False

    @property
    def transactions(self) -> TransactionLog:
        """The transactions of the store's TRANSACTION topics (transactions/api.py), opened (and on the embedded
        engine recovered) at first use; StoreClosed once closed (a timer racing the close never opens it again)."""
        if self._transactions is None:
            with _OPENING:
                if self._transactions_closed:
                    raise StoreClosed("the store is closed")
                if self._transactions is None:
                    self._transactions = self.open_transactions()
        return self._transactions

    def open_transactions(self) -> TransactionLog:
        """The backend's TransactionLog."""
        raise NotImplementedError(f"{type(self).__name__} has no transaction log")

    def close_transactions(self) -> None:
        """Close the transaction log if it was opened (each backend's `close` calls this first)."""
        with _OPENING:
            self._transactions_closed = True
            if self._transactions is not None:
                self._transactions.close()
                self._transactions = None

    # ---- lifecycle -------------------------------------------------------------------------------

    def check_health(self) -> None:  # noqa: B027 (a backend that cannot fail this way keeps the default)
        """Raise `StoreFailed` if the store has stopped taking writes; cheap."""

    def probes(self) -> list[Probe]:
        """A probe of each service the store relies on (health.py): its disk, DynamoDB, its cold tier."""
        return []

    def health(self) -> list[DependencyHealth]:
        """Each service the store relies on, as probed lately (health.py: a second or two at most): what
        `GET /health` reports. Raises nothing: what fails is the answer."""
        return probe_all(self.probes())

    def maintain(self) -> MaintenanceReport:
        """One scheduled maintenance run: the periodic work a backend leaves to a scheduler (the serverless
        backend's upload to the cold tier and clean-up of the shared directory). The embedded engine does
        its periodic work in its own threads: nothing to do."""
        return MaintenanceReport(skipped=True)

    @abstractmethod
    def flush(self) -> None:
        """Make everything acknowledged so far durable, indexes included."""

    @abstractmethod
    def recover(self) -> None:
        """Bring indexes back in line with the log after a restart (called when the store opens)."""

    @abstractmethod
    def clean_expired(self, now_ms: int | None = None) -> CleanReport:
        """Apply retention: expire messages past their topic's retention and delete dead data."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release everything; the store cannot be used afterwards."""

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
