"""`TransactionLog`: transactional messages (RocketMQ's half messages), the one API every backend serves
(embedded: embedded/transactions.py, RocksDB; serverless: serverless/transactions.py, DynamoDB).

A producer sends a **half message** to a TRANSACTION topic (`prepare`): it is stored, durably, and no consumer sees
it. The producer runs its local transaction, then ends the half message (`end`): a **commit** makes it visible,
once, in the queue it was sent to, with the message id the half message was given; a **rollback** means it is never
visible. A half message not ended within the transaction timeout is **checked back** with its producer group: every
check interval the broker opens a check (`open_check`), which a producer of the group takes (`claim`: it long-polls
for them, so the broker never calls out to an address) and answers with commit, rollback or unknown (`note`); after
the most checks without an answer that ends it, it is rolled back. Every transaction keeps its outcome (how and when
it ended, and by whom: the producer, a check, the check limit) for an operator to list.

What the log holds of a transaction (`Transaction`):

    msg_id        the half message's id, which its committed message keeps
    state         prepared -> committed | rolled_back; an ended transaction never changes again
    check_at_ms   prepared: when the next check is due (the first at prepared_ms + the timeout, then every interval)
    checks        checks opened so far; `claimed` the last one a producer took (checks > claimed: one is open)
    ended_*       when and by what it ended; `offset`: a committed message's offset in its queue

The protocol. Every change is one conditional, atomic write of the transaction's state, whichever process makes it
(RocketMQ #9431: a proxy that keeps transaction state to itself loses a commit sent through another proxy; here any
gateway or Lambda invocation ends any transaction, the state being in the shared store):
- `end` is conditional on the state being prepared: of a commit and a rollback racing, or of a producer's commit
  and the check limit's rollback, one wins and the other finds the transaction ended. An end that finds it ended
  the same way succeeds and changes nothing (a retried request); the other way it is a TransactionConflict.
- a commit makes the message visible in the same atomic write that records the commit (serverless: one DynamoDB
  transaction sequences the half message's record into its queue and sets the state; embedded: see below), so a
  committed message is visible from the moment its commit is answered, and never twice.
- `open_check` is conditional on the check count read (and the state prepared): of two processes that found a
  check due, one opens it; `claim` is conditional on the check still being open, so each check goes to one producer.
  A producer that took a check and died leaves it unanswered: the next check comes an interval later.
- No check is opened before the timeout: `check_at_ms` starts at `prepared_ms` + the timeout, both from the
  one clock reading `prepare` stamps the half message with (a time set before it, by the caller, would be a few
  ms short under load), and only grows.

Why it is crash-safe: the half message and the transaction's state are written before `prepare` returns
(embedded: one RocksDB write batch, its WAL fsync'd as the store's metadata is; serverless: the half message's record
appended and fsync'd to the writer's segment file, then the transaction's item put), and every later change is one
atomic write, as durable. A crash between the half message's append and its item (serverless) leaves bytes nothing
points to, which maintenance deletes with their file: that half message was never acknowledged, so no producer
holds its id. A decision answered is written; one whose answer was lost is found written by the retry, which
succeeds the same way. The embedded engine cannot record a commit and append to its commit log in one write: it
records the decision first (with where the queue ended then), appends the message, then records it done; after a
crash in between, opening the log looks for the message in its queue from that offset on (by its id) and appends
it only if it is not there, before any request is served: once, either way.

Where the half message is:
- serverless: appended to the writer's segment file as any batch is, with its real topic and queue, and not
  sequenced; a commit sequences that very record (its id names its file and place), so the committed message is
  the half message, moved nowhere. A segment file is deleted once nothing references it and it is idle for
  `efs_segment_grace_s`; so a half message older than half of that is no longer committed (it is rolled back,
  "expired"): its file could be gone. The check limit ends every transaction long before (6 s + 15 x 30 s).
- embedded: in the log's RocksDB until it ends, as the record its commit appends (its properties naming the id it
  was given: `record.MESSAGE_ID`, as RocketMQ keeps UNIQ_KEY when it moves a half message to its topic). Its id
  is the log's own (`TX_ID_BASE` plus a counter): no commit-log position, so `message_by_id` asks the log.

Compared with RocketMQ (the half message in RMQ_SYS_TRANS_HALF_TOPIC, each decision an op message in
RMQ_SYS_TRANS_OP_HALF_TOPIC, and TransactionalMessageCheckService matching the two topics to find half messages
without a decision, writing a half message again for each check): here a transaction is one record whose state is
changed in place under a condition, so finding the undecided ones is an index lookup, not a match of two logs, and
no message is written again for a check.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum

from tidemq_protocol.errors import TransactionConflict
from tidemq_protocol.message import Message, StoredMessage

from ..model import Page, PutResult
from ..sends import SendKey, SentBatch

OUTCOME_RETENTION_MS = 72 * 3_600_000
"""How long an ended transaction's outcome is kept (RocketMQ's commit-log retention, 72 h): a retried end finds it
for that long; the operator's listing shows it."""


class TransactionState(StrEnum):
    PREPARED = "prepared"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"


@dataclass(frozen=True, slots=True)
class Transaction:
    """One transaction as the log holds it (see the module docstring)."""

    msg_id: str
    topic: str
    queue: int
    producer_group: str
    state: TransactionState
    prepared_ms: int
    check_at_ms: int
    checks: int = 0
    claimed: int = 0
    answer: str | None = None
    ended_ms: int | None = None
    ended_by: str | None = None
    offset: int | None = None

    @property
    def ended(self) -> bool:
        return self.state is not TransactionState.PREPARED

    @property
    def committed(self) -> bool:
        return self.state is TransactionState.COMMITTED


def listing_key(transaction: Transaction) -> str:
    """Where a transaction is in its topic's listing (newest first), as a page's `next_after` names it."""
    return f"{transaction.prepared_ms:013d}.{transaction.msg_id}"


def ended_as_asked(transaction: Transaction, commit: bool, checks: int | None) -> bool:
    """Whether an end (a commit if `commit`, else a rollback; with `checks`, only after that many checks) of
    `transaction` as read finds it ended that way already: it then changes nothing. False if it is prepared (and,
    `checks` given, has had that many); TransactionConflict if it ended the other way, or had other checks."""
    if transaction.ended:
        if transaction.committed == commit:
            return True
        asked, was = ("commit", "rolled back") if commit else ("roll back", "committed")
        raise TransactionConflict(
            f"transaction {transaction.msg_id} cannot {asked}: it was {was} ({transaction.ended_by})"
        )
    if checks is not None and transaction.checks != checks:
        raise TransactionConflict(f"transaction {transaction.msg_id} had {transaction.checks} checks, not {checks}")
    return False


class TransactionLog(ABC):
    """The transactions of a store's TRANSACTION topics (see the module docstring)."""

    @abstractmethod
    def prepare(
        self, topic: str, message: Message, producer_group: str, timeout_ms: int, send: SendKey | None = None
    ) -> Transaction:
        """Store `message` as a half message of `topic` (MessageTypeMismatch unless the topic is TRANSACTION; the
        message is checked as a put checks it), its first check due `timeout_ms` after its `prepared_ms` (0: due at
        once; `check_at_ms` = `prepared_ms` + `timeout_ms`, the one stamp the log reads). With `send` (its idempotency
        key; the digest is made here, tidemq_store/sends.py), once: the key's record is written with the
        transaction, and a half message the topic prepared under the key within the window is answered with its
        transaction as it is now, preparing nothing (SendConflict if it held another message)."""

    @abstractmethod
    def get(self, topic: str, msg_id: str) -> Transaction:
        """The transaction of `topic` whose half message is `msg_id` (TransactionNotFound if none)."""

    @abstractmethod
    def half_message(self, transaction: Transaction) -> StoredMessage:
        """A prepared transaction's half message, as a check shows it to its producer (queue offset 0: it has none
        yet). MessageNotFound once it has ended."""

    @abstractmethod
    def end(self, topic: str, msg_id: str, commit: bool, ended_by: str, checks: int | None = None) -> Transaction:
        """Commit or roll back (see the module docstring); with `checks`, only if that many checks were opened.
        TransactionNotFound, or TransactionConflict if it ended the other way (or, `checks` given, changed)."""

    @abstractmethod
    def note(self, topic: str, msg_id: str, answer: str) -> Transaction:
        """Record a producer's answer that ends nothing (unknown) on a prepared transaction; an ended one is left
        as it is. Returns the transaction."""

    @abstractmethod
    def due(
        self, now_ms: int, limit: int, topic: str | None = None, producer_group: str | None = None
    ) -> list[Transaction]:
        """Prepared transactions whose next check is due at `now_ms` (of `topic` and `producer_group` if given),
        earliest first, at most `limit`."""

    @abstractmethod
    def open_check(self, transaction: Transaction, next_check_ms: int, claim: bool) -> Transaction | None:
        """Open check `transaction.checks + 1` (due next at `next_check_ms`), taken at once by the caller if `claim`;
        None, changing nothing, if the transaction is no longer as read (ended, or the check opened already)."""

    @abstractmethod
    def claim(self, topic: str, producer_group: str, limit: int) -> list[Transaction]:
        """Take up to `limit` open checks of the group's transactions of `topic`: each is taken by one caller."""

    @abstractmethod
    def list(self, topic: str, state: TransactionState | None, after: str | None, limit: int) -> Page[Transaction]:
        """The topic's transactions (in `state` only, if given), newest first, from after `after` (a page's
        `next_after`)."""

    @abstractmethod
    def forget_topic(self, topic: str) -> None:
        """Delete the topic's transactions (topic deletion): its half messages are never committed."""

    def prune(self, now_ms: int) -> int:
        """Delete outcomes older than OUTCOME_RETENTION_MS; how many (a backend whose store expires them itself: 0)."""
        return 0

    def close(self) -> None:  # noqa: B027 (a log with nothing to release keeps the default)
        """Release what the log holds open."""


def half_sent(send: SendKey, transaction: Transaction) -> SentBatch:
    """The record of the half message `transaction` prepared under `send` (sends.py): its one result names the
    transaction (no offset: a half message is on no queue)."""
    result = PutResult(transaction.msg_id, transaction.queue, -1, transaction.prepared_ms)
    return SentBatch(send.digest, transaction.prepared_ms, 0, (result,))
