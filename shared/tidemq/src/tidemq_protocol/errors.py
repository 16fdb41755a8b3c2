"""The errors client and server share: every error that crosses the wire, by the name its JSON body carries.

Every error a caller can cause is a `ClientError` subclass with a message that says what was wrong; the HTTP layer
maps each class to a status code in one place (functions/api/errors.py), and the SDK rebuilds the same class from
the body's `error` name (tidemq/errors.py), so callers catch the same classes in process or over HTTP.
`StoreFailed` and `StoreUnavailable` are outages the store declared itself (503); anything else that escapes the
server is a bug or an outage. `CorruptStore` is data that failed a check of its format (a record's CRC, a size).
"""

from __future__ import annotations

from typing import NamedTuple


class TideMQError(Exception):
    """Base of every error the store engine raises on purpose."""


class ClientError(TideMQError):
    """The request was wrong; nothing was changed."""


class InvalidArgument(ClientError, ValueError):
    """A value is malformed or outside what the store accepts (a ValueError, so pydantic reports it
    as a validation error of the field it came from)."""


class InvalidName(InvalidArgument):
    """A topic or group name breaks RocketMQ's naming rule."""


class MessageTypeMismatch(ClientError):
    """A message does not fit its topic's message type (RocketMQ 5's proxy check): a message group on a topic
    that is not FIFO, or none on a FIFO topic, or a FIFO message sent to a queue not its group's. The message says
    which and names the topic's type; nothing of the batch was stored. (HTTP: 409, the request conflicts with the
    topic as it is: the same message fits a topic of the other type.)"""


class NotADeadLetter(ClientError):
    """A message named for a dead-letter resend is not one of the group's dead letters (no message has the id, or
    it is on another topic). (HTTP: 409, the request conflicts with what the group's dead letters hold.)"""


class MessageTooLarge(ClientError):
    """One message, or a whole batch, is over the configured size limit."""


class RequestTooLarge(MessageTooLarge):
    """A request body is over the size the API reads (`TIDEMQ_MAX_REQUEST_BYTES`), whatever it holds: none of it
    was acted on. A MessageTooLarge, as a batch too large for the request is too large for a put."""


class InvalidBatch(ClientError):
    """A batch is empty or has more messages than allowed."""


class TopicNotFound(ClientError):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class TopicExists(ClientError):
    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} already exists")
        self.topic = topic


class GroupNotFound(ClientError):
    def __init__(self, group: str) -> None:
        super().__init__(f"consumer group {group!r} does not exist")
        self.group = group


class GroupExists(ClientError):
    def __init__(self, group: str) -> None:
        super().__init__(f"consumer group {group!r} already exists")
        self.group = group


class UserNotFound(ClientError):
    def __init__(self, user: str) -> None:
        super().__init__(f"user {user!r} does not exist")
        self.user = user


class UserExists(ClientError):
    def __init__(self, user: str) -> None:
        super().__init__(f"user {user!r} already exists")
        self.user = user


class PolicyConflict(ClientError):
    """A policy change the user's stored policies do not allow: a grant to a super user (policies do not apply to
    it) or past the most entries a user may have, or a revoke of an entry it does not have."""


class Unauthenticated(ClientError):
    """The request does not prove who sent it: no credentials, an unknown user, a bad signature, a timestamp
    too old or too new, or a replay. The message says which, never what the secret should have been."""


class AccessDenied(ClientError):
    """The caller is known, and its policies do not allow this action on this resource."""


class QueueOutOfRange(ClientError):
    def __init__(self, topic: str, queue: int, queue_count: int) -> None:
        super().__init__(f"queue {queue} is out of range for topic {topic!r}: valid queues are 0..{queue_count - 1}")
        self.topic, self.queue, self.queue_count = topic, queue, queue_count


class QueuesCannotShrink(ClientError):
    """A topic's queue count can grow, never shrink (its queues hold messages and groups' offsets)."""

    def __init__(self, topic: str, queues: int, asked: int) -> None:
        super().__init__(f"topic {topic!r} has {queues} queues; queues can grow, not shrink (asked for {asked})")
        self.topic, self.queues, self.asked = topic, queues, asked


class OffsetOutOfRange(ClientError):
    """An offset outside [min_offset, max_offset] of a queue; carries the current range."""

    def __init__(self, topic: str, queue: int, offset: int, min_offset: int, max_offset: int) -> None:
        super().__init__(
            f"offset {offset} is out of range for {topic}:{queue}: valid offsets are {min_offset}..{max_offset}"
        )
        self.topic, self.queue, self.offset = topic, queue, offset
        self.min_offset, self.max_offset = min_offset, max_offset


class OffsetConflict(ClientError):
    """A compare-and-set commit (`MessageStore.commit_offsets(..., expected=...)`) found the group's committed
    offset on a queue moved from what the caller expected (a reset, or another deliverer's commit); nothing was
    committed. `actual` is the offset committed now (None: none)."""

    def __init__(self, group: str, topic: str, queue: int, expected: int | None, actual: int | None) -> None:
        def said(offset: int | None) -> str:
            return "none" if offset is None else str(offset)

        super().__init__(
            f"consumer group {group!r} has committed offset {said(actual)} on {topic}:{queue}, "
            f"not the {said(expected)} expected: it was moved meanwhile (a reset or another commit)"
        )
        self.group, self.topic, self.queue = group, topic, queue
        self.expected, self.actual = expected, actual


class MessagePlace(NamedTuple):
    """Where a message was: its topic, queue and offset."""

    topic: str
    queue: int
    offset: int


class MessageNotFound(ClientError):
    """No such message. `gone_from`: where it was, when the store still knows (its queue's retention passed it while
    its bytes remained: a message's trace is found by it, functions/logic/trace.py); never sent over the wire."""

    def __init__(self, what: str, gone_from: MessagePlace | None = None) -> None:
        super().__init__(f"no message {what}")
        self.gone_from = gone_from


class NoPushSubscription(ClientError):
    """The consumer group pulls: it has no push subscription (none was set, or it was cleared)."""

    def __init__(self, group: str) -> None:
        super().__init__(f"consumer group {group!r} has no push subscription: it pulls")
        self.group = group


class InvalidReceiptHandle(ClientError):
    """A receipt handle that names no current delivery: malformed, forged, or of a delivery the message has had
    since (delivered again, or its invisible time changed) (RocketMQ: INVALID_RECEIPT_HANDLE; HTTP: 409, the
    request conflicts with what the group holds now). Nothing was changed."""


class MessageDeadLettered(InvalidReceiptHandle):
    """A receipt handle of a message that went to the group's dead letters (`%DLQ%<group>`) without being acked:
    its last delivery's invisible time ended, or its consumer forwarded it there. It is no longer the group's to
    ack, hold or give back, and the work it stood for is not settled: the message waits among the dead letters, to
    be resent or dropped. (RocketMQ: INVALID_RECEIPT_HANDLE, as its proxy answers an expired handle; HTTP: 409,
    and an ack's `status` `dead_lettered`.) An InvalidReceiptHandle, as the handle names no current delivery;
    catch this class first to tell the two apart. Nothing was changed."""


class StoreUnavailable(TideMQError):
    """The store could not take this request now, and nothing was changed (e.g. the shared directory failed a
    write or an fsync: the serverless backend leaves that file and writes the next batch to a new one); the
    request can be sent again."""


class DependencyUnavailable(StoreUnavailable):
    """A service the store relies on (DynamoDB, S3, the disk under it) failed, throttled or did not answer, and went
    on doing so through the store's own retries: the request can be sent again once it recovers (`retry_after_s`).
    Unlike other StoreUnavailable answers, the request may have taken effect before the failure (an answer lost on
    the way back): a produce sent again with its idempotency key is stored once (the SDK's are), and commits, acks
    and releases are safe to repeat. `dependency` names the service: "dynamodb", "s3" or "disk"."""

    def __init__(self, dependency: str, reason: str, retry_after_s: int = 1) -> None:
        super().__init__(f"{dependency} is failing ({reason}); send the request again shortly")
        self.dependency, self.reason, self.retry_after_s = dependency, reason, retry_after_s


class Overloaded(StoreUnavailable):
    """This process already serves as many requests of one kind as it may at once (the local gateway's long
    polls, `TIDEMQ_GATEWAY_LONG_POLLS`); nothing was changed, and the request can be sent again shortly."""


class StoreFailed(TideMQError):
    """The store stopped taking writes because going on would be unsafe (a failed fsync: the kernel may have
    dropped the data it could not write, and a later fsync would report success anyway, PostgreSQL's "fsyncgate").
    What was acknowledged before is safe; restarting the process recovers from the log. `reason` says what
    failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the store takes no more writes: {reason}; restart the process to recover")
        self.reason = reason


class CorruptStore(TideMQError):
    """Data on disk failed a check that recovery cannot repair (e.g. a bad record inside a sealed segment)."""


# ---- key-value namespaces (kv/) ------------------------------------------------------------------


class NamespaceNotFound(ClientError):
    def __init__(self, namespace: str) -> None:
        super().__init__(f"KV namespace {namespace!r} does not exist")
        self.namespace = namespace


class NamespaceExists(ClientError):
    def __init__(self, namespace: str) -> None:
        super().__init__(f"KV namespace {namespace!r} already exists")
        self.namespace = namespace


class NamespaceNotEmpty(ClientError):
    """An import goes into an empty namespace only."""

    def __init__(self, namespace: str) -> None:
        super().__init__(f"KV namespace {namespace!r} is not empty: a snapshot is imported into an empty one")
        self.namespace = namespace


class KeyNotFound(ClientError):
    def __init__(self, namespace: str, key: str) -> None:
        super().__init__(f"no key {key!r} in KV namespace {namespace!r}")
        self.namespace, self.key = namespace, key


class VersionMismatch(ClientError):
    """A conditional write (create-only, or compare-and-set on a version) found the key otherwise; nothing was
    written. `current` is the key's version now (None: the key does not exist)."""

    def __init__(self, namespace: str, key: str, expected: int | None, current: int | None) -> None:
        wanted = "absent" if expected is None else f"at version {expected}"
        now = "does not exist" if current is None else f"is at version {current}"
        super().__init__(f"key {key!r} of KV namespace {namespace!r} {now}, not {wanted}")
        self.namespace, self.key, self.expected, self.current = namespace, key, expected, current


class RevisionCompacted(ClientError):
    """A watch asked for changes from a revision older than what the namespace retains: read the keys again
    (their versions say where they are) and watch from the revision that read returned."""

    def __init__(self, namespace: str, revision: int, oldest: int) -> None:
        super().__init__(
            f"KV namespace {namespace!r} retains changes from revision {oldest} on, not {revision}: read the keys "
            f"again and watch from the revision that read returns"
        )
        self.namespace, self.revision, self.oldest = namespace, revision, oldest


# ---- the BrokerContainer (servers/container) and master/slave replication ------------------------


class BrokerNotFound(ClientError):
    """The container holds no broker of this name."""

    def __init__(self, broker: str) -> None:
        super().__init__(f"this container holds no broker {broker!r}")
        self.broker = broker


class BrokerExists(ClientError):
    """The container already holds a broker of this name, or one with this store directory."""


class BrokerReadOnly(ClientError):
    """The broker is a slave: it serves reads, and takes writes only once promoted to master."""

    def __init__(self, broker: str) -> None:
        super().__init__(
            f"broker {broker!r} is a slave: it serves reads only; send writes to its master, or promote it "
            "(brokerRole=SYNC_MASTER or ASYNC_MASTER)"
        )
        self.broker = broker


class ReplicaDiverged(ClientError):
    """A slave asked for the master's commit log from a position the master's log cannot continue from (the slave
    is ahead of the master, or not at the start of a batch): the two logs are no longer one."""


class DiskQuotaExceeded(ClientError):
    """The broker is past its disk quota's clean-up threshold and holds nothing it may remove (no cold tier keeps a
    copy of its oldest segments): it takes no new messages until space is freed (RIP-31's logical disk space)."""


# ---- delay and timer messages (tidemq_protocol.timer) ----------------------------------------------


class TimerNotFound(ClientError):
    """A recall names no timer message of the topic: the handle is not one this broker gave, is for another topic,
    or its timer was delivered or recalled so long ago that its outcome is no longer kept. Nothing was changed.
    (HTTP: 404.)"""


class TimerDelivered(ClientError):
    """A recall came too late: the timer message is delivered already (RocketMQ 5.3's RecallMessage refuses it so).
    Nothing was changed. (HTTP: 409, the request conflicts with what the topic holds now.)"""


class InvalidFilterExpression(InvalidArgument):
    """A subscription's filter expression that does not parse, or means nothing (RocketMQ's
    ILLEGAL_FILTER_EXPRESSION), refused where the subscription is made, never at read time. `position` is the
    0-based index of the character in the expression where it goes wrong (HTTP: 400, `position` in the body)."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


class SendConflict(ClientError):
    """A send carried an idempotency key (an `Idempotency-Key`, a RocketMQ message id) that a send of other
    messages to the topic stored within the deduplication window: nothing was stored. (HTTP: 409, the request
    conflicts with what the key names; gRPC: ILLEGAL_MESSAGE_ID.)"""

    def __init__(self, topic: str, key: str) -> None:
        super().__init__(
            f"idempotency key {key!r} of topic {topic!r} was sent with other messages within the deduplication"
            " window: send new messages with a new key"
        )
        self.topic, self.key = topic, key


# ---- transactional messages (tidemq_store/transactions) ------------------------------------------


class TransactionNotFound(ClientError):
    """No transaction of the topic has this half message id (never sent, of another topic, or ended so long ago that
    its outcome is no longer kept)."""

    def __init__(self, topic: str, msg_id: str) -> None:
        super().__init__(f"topic {topic!r} has no transaction with half message {msg_id!r}")
        self.topic, self.msg_id = topic, msg_id


class TransactionConflict(ClientError):
    """The transaction ended the other way: a commit after a rollback (or a rollback after a commit), or a commit of a
    half message rolled back by its check-backs. Nothing was changed. (HTTP: 409, the request conflicts with the
    transaction's outcome.)"""
