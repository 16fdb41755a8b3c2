"""The serverless backend's transaction log (transactions/api.py has the protocol and why it is crash-safe): one
`transactions` item per transaction (tables.py), every change one conditional DynamoDB write, so any process (a
Lambda invocation, a gateway) ends any transaction.

- prepare: the half message is appended to this process's segment file as a batch of one record, with its topic
  and queue, fsync'd (segments.py) and not sequenced; then its item is put (condition: no item has the id). The
  record's place is its id, as any message's. A half message with an idempotency key (sends.py) is put with its
  key's `sends` item in one TransactWriteItems, on condition that no item younger than the window holds the key
  (kept apart from puts' keys, `half_key`); of two racing sends one wins, the other answers the winner's
  transaction (its record in the segment file is referenced by nothing).
- commit: one TransactWriteItems sequences that record into its queue (queue_index.py, `sequence(..., also=)`) and
  sets the item committed with the offset it got, on condition that it is still prepared and younger than half of
  `efs_segment_grace_s` (its file cannot be gone). A commit that loses a race reads the item again: ended the same
  way, it succeeds; the other way, TransactionConflict. A half message too old to commit is rolled back instead
  ("expired").
- rollback, check and claim: one UpdateItem each, on condition of the state read (prepared; the check count; the
  check still open).

The sparse index `due` (due="p" while prepared, by check_at) finds the checks to open, `open` (open_for "topic|group"
while a check waits for its producer) the checks a producer takes; both are eventually consistent, and every write
that acts on what they show is conditional, so a stale entry only costs a failed condition. An ended transaction's
item stays for OUTCOME_RETENTION_MS, then DynamoDB's TTL deletes it (`purge_at`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynamodb.exceptions import DoesNotExist, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import MessageNotFound, QueueOutOfRange, TransactionNotFound
from tidemq_protocol.message import Message, StoredMessage
from tidemq_protocol.record import decode_message, message_id

from ..batch import validate_batch
from ..model import Page
from ..sends import SendKey, batch_digest, half_key
from ..transactions.api import (
    OUTCOME_RETENTION_MS,
    Transaction,
    TransactionLog,
    TransactionState,
    ended_as_asked,
    half_sent,
    listing_key,
)
from .conditions import is_conditional, is_conditional_transaction
from .kv.changes import purge_time
from .queue_index import BatchRef, ItemChanged
from .segments import physical_offset, read_segment

if TYPE_CHECKING:
    from .store import ServerlessMessageStore

DUE = "p"  # the one value of `due`: the sparse index holds prepared transactions only
PAGE = 100


def _open_for(topic: str, producer_group: str) -> str:
    return f"{topic}|{producer_group}"


def _transaction(item) -> Transaction:
    return Transaction(
        item.msg_id,
        item.topic,
        int(item.queue),
        item.producer_group,
        TransactionState(item.state),
        int(item.prepared_ms),
        int(item.check_at),
        int(item.checks),
        int(item.claimed),
        item.answer,
        None if item.ended_ms is None else int(item.ended_ms),
        item.ended_by,
        None if item.offset is None else int(item.offset),
    )


class DynamoDbTransactionLog(TransactionLog):
    """Transactions in the `transactions` table (see the module docstring), over the store whose segment files and
    queues hold their messages."""

    def __init__(self, store: ServerlessMessageStore) -> None:
        self.store = store
        self.items = store.tables.transactions
        self.max_age_ms = int(store.config.efs_segment_grace_s * 1000 / 2)

    def prepare(
        self, topic: str, message: Message, producer_group: str, timeout_ms: int, send: SendKey | None = None
    ) -> Transaction:
        metadata, items = self.store.metadata, self.items
        config = metadata.cached_topic(topic)
        try:
            batch = validate_batch(self.store.config, config, [message], half=True)
        except QueueOutOfRange:
            config = metadata.cached_topic(topic, fresh=True)
            batch = validate_batch(self.store.config, config, [message], half=True)
        prepared = now_ms()
        appended = self.store.writer.append(lambda start: batch.stamped([0], start, prepared))
        size = batch.sizes[0]
        msg_id = message_id(physical_offset(appended.file, appended.position), size)
        transaction = Transaction(
            msg_id, topic, message.queue, producer_group, TransactionState.PREPARED, prepared, prepared + timeout_ms
        )
        item = items(
            msg_id,
            topic=topic,
            queue=message.queue,
            producer_group=producer_group,
            state=transaction.state.value,
            prepared_ms=prepared,
            check_at=transaction.check_at_ms,
            checks=0,
            claimed=0,
            file=appended.file,
            position=appended.position,
            length=size,
            has_keys=bool(batch.keys[0]),
            listed=listing_key(transaction),
            due=DUE,
        )
        if send is None:
            item.save(condition=items.msg_id.does_not_exist())
            return transaction
        half = half_key(SendKey(send.key, batch_digest(batch)))
        sends = self.store.appender.sends
        try:
            with TransactWrite(connection=self.store.tables.connection) as write:
                write.save(item, condition=items.msg_id.does_not_exist())
                sends.record(write, config, half.key, half_sent(half, transaction))
        except TransactWriteError as error:
            if not is_conditional_transaction(error):
                raise
            return self.get(topic, sends.earlier(config, half)[0].msg_id)  # the key is held
        return transaction

    def _item(self, topic: str, msg_id: str):
        try:
            item = self.items.get(msg_id, consistent_read=True)
        except DoesNotExist:
            raise TransactionNotFound(topic, msg_id) from None
        if item.topic != topic:
            raise TransactionNotFound(topic, msg_id)
        return item

    def get(self, topic: str, msg_id: str) -> Transaction:
        return _transaction(self._item(topic, msg_id))

    def half_message(self, transaction: Transaction) -> StoredMessage:
        item = self._item(transaction.topic, transaction.msg_id)
        if item.state != TransactionState.PREPARED:
            raise MessageNotFound(f"with id {transaction.msg_id}: its transaction has ended")
        return decode_message(read_segment(self.store.segments, item.file, int(item.position), int(item.length)))

    def end(self, topic: str, msg_id: str, commit: bool, ended_by: str, checks: int | None = None) -> Transaction:
        while True:
            item = self._item(topic, msg_id)
            transaction = _transaction(item)
            if ended_as_asked(transaction, commit, checks):
                return transaction
            now = now_ms()
            if commit and transaction.prepared_ms < now - self.max_age_ms:
                self._roll_back(item, "expired: too old to commit (efs_segment_grace_s / 2)", now, checks)
                continue
            try:
                if commit:
                    self._commit(item, ended_by, now)
                else:
                    self._roll_back(item, ended_by, now, checks)
            except ItemChanged:
                continue
            return _transaction(self._item(topic, msg_id))

    def _ending(self, state: TransactionState, ended_by: str, now: int) -> list:
        items = self.items
        return [
            items.state.set(state.value),
            items.ended_ms.set(now),
            items.ended_by.set(ended_by),
            items.due.remove(),
            items.open_for.remove(),
            items.purge_at.set(purge_time(now + OUTCOME_RETENTION_MS)),
        ]

    def _still(self, item, checks: int | None):
        condition = self.items.state == TransactionState.PREPARED.value
        return condition if checks is None else condition & (self.items.checks == checks)

    def _roll_back(self, item, ended_by: str, now: int, checks: int | None) -> None:
        try:
            item.update(
                actions=self._ending(TransactionState.ROLLED_BACK, ended_by, now), condition=self._still(item, checks)
            )
        except UpdateError as error:
            if is_conditional(error):
                raise ItemChanged() from None
            raise

    def _commit(self, item, ended_by: str, now: int) -> None:
        """Sequence the half message's record into its queue and record the commit, in one transaction."""
        items, queue = self.items, int(item.queue)
        ref = BatchRef(0, 1, item.file, int(item.position), int(item.length), now, bool(item.has_keys))
        young = items.prepared_ms >= now - self.max_age_ms

        def record_commit(transaction: TransactWrite, firsts: dict[int, int]) -> None:
            actions = [*self._ending(TransactionState.COMMITTED, ended_by, now), items.offset.set(firsts[queue])]
            transaction.update(items(item.msg_id), actions, condition=self._still(item, None) & young)

        self.store.appender.sequence(item.topic, {queue: ref}, record_commit)

    def note(self, topic: str, msg_id: str, answer: str) -> Transaction:
        item = self._item(topic, msg_id)
        try:
            item.update(actions=[self.items.answer.set(answer)], condition=self._still(item, None))
        except UpdateError as error:
            if not is_conditional(error):
                raise
        return _transaction(self._item(topic, msg_id))

    def due(
        self, now_ms: int, limit: int, topic: str | None = None, producer_group: str | None = None
    ) -> list[Transaction]:
        items = self.items
        condition = None
        if topic is not None:
            condition = items.topic == topic
        if producer_group is not None:
            group = items.producer_group == producer_group
            condition = group if condition is None else condition & group
        found = items.by_due.query(DUE, items.check_at <= now_ms, filter_condition=condition, page_size=PAGE)
        taken = []
        for item in found:
            taken.append(_transaction(item))
            if len(taken) == limit:
                break
        return taken

    def open_check(self, transaction: Transaction, next_check_ms: int, claim: bool) -> Transaction | None:
        items, checks = self.items, transaction.checks + 1
        actions = [items.checks.set(checks), items.check_at.set(next_check_ms)]
        if claim:
            actions += [items.claimed.set(checks), items.open_for.remove()]
        else:
            actions.append(items.open_for.set(_open_for(transaction.topic, transaction.producer_group)))
        item = items(transaction.msg_id)
        try:
            item.update(
                actions=actions,
                condition=(items.state == TransactionState.PREPARED.value) & (items.checks == transaction.checks),
            )
        except UpdateError as error:
            if is_conditional(error):
                return None
            raise
        return _transaction(item)

    def claim(self, topic: str, producer_group: str, limit: int) -> list[Transaction]:
        items, taken = self.items, []
        for found in items.by_open.query(_open_for(topic, producer_group), page_size=PAGE):
            item = items(found.msg_id)
            try:
                item.update(
                    actions=[items.claimed.set(int(found.checks)), items.open_for.remove()],
                    condition=(items.state == TransactionState.PREPARED.value)
                    & (items.checks == int(found.checks))
                    & items.open_for.exists(),
                )
            except UpdateError as error:
                if is_conditional(error):
                    continue
                raise
            taken.append(_transaction(item))
            if len(taken) == limit:
                break
        return taken

    def list(self, topic: str, state: TransactionState | None, after: str | None, limit: int) -> Page[Transaction]:
        items = self.items
        condition = None if state is None else items.state == state.value
        span = None if after is None else items.listed < after
        found: list[Transaction] = []
        query = items.by_topic.query(topic, span, filter_condition=condition, scan_index_forward=False, page_size=PAGE)
        for item in query:
            if len(found) == limit:
                return Page(found, listing_key(found[-1]))
            found.append(_transaction(item))
        return Page(found, None)

    def forget_topic(self, topic: str) -> None:
        items = self.items
        doomed = [found.msg_id for found in items.by_topic.query(topic, page_size=PAGE)]
        with items.batch_write() as writer:
            for msg_id in doomed:
                writer.delete(items(msg_id))
