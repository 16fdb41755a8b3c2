"""The serverless backend's pop ledger (pop/api.py has the protocol): the `pop_ledger` table (tables.py).

A pop group's ledger of a topic is one item collection, partition `group#topic` (names cannot hold '#',
tidemq_protocol/names.py), and each queue of it a run of sort keys there:

    slot "qqqqqqqqqq"                         ->  cursor, group, topic               (the cursor)
    slot "qqqqqqqqqq/oooooooooooooooooooo"    ->  attempt, nonce, visible_at_ms      (an entry)
                                                  [message_group: a FIFO entry's; absent in others and older ones]
    slot "marks/qqqqqqqqqq/ssss"              ->  dead_lettered: an offset           (a dead-letter mark)

queue and offset zero-padded (10 and 20 digits), so a queue's entries sort by offset after its cursor and one
Query (strongly consistent, `begins_with` the queue's slot) reads its whole ledger, and never its dead-letter marks
(pop/api.py: the mark of offset o in slot o % MARK_SLOTS, 4 digits), whose slots begin otherwise; a ledger written
before there were marks has none, and an older version never reads them. Only cursor items carry group and topic:
the sparse indexes `by_group` and `by_topic` list ledgers (one row per queue that has a cursor), not entries or
marks, and a cursor item's later writes leave them unchanged, so they cost no index writes.

- A **claim** is one TransactWriteItems: the cursor item put on condition that its cursor is still the one read
  (or, read as 0, that it has none or 0), each entry below that cursor put or deleted on condition that its nonce
  is the one the claim replaces (none: that it does not exist), entries from the cursor on put unconditionally.
  A ConditionalCheckFailed cancels it whole: False, nothing changed. A claim may put at most
  MOST_DELIVERED entries, delivered and waiting (DynamoDB's 100 items a transaction, less the cursor:
  receives ask for 32 by default, a FIFO claim writes at most 64): more is refused with InvalidArgument.
  Dropped entries past what fits in that transaction are deleted after it, each on its nonce (a crash between
  leaves entries whose message is gone, which the next receive drops again: a state the protocol already has).
- A **settle** is one TransactWriteItems of conditional deletes (acks, dead-letterings) and puts (changes), each
  on the nonce its receipt names, and a dead-lettering's mark put after them (unconditional: its entry's
  condition decides), for up to 100 items. When conditions fail, the cancellation reasons say which (the
  settlements' items come first, in their order); one BatchGetItem (strongly consistent) of those entries, their
  marks and their queues' cursors classifies them (no entry and the offset marked: DEAD_LETTERED; no entry and
  the offset below the cursor: ALREADY_ACKED for an ack; else STALE) and the rest go again in one more
  transaction. DynamoDB refuses two operations on one item in a transaction, so each transaction settles an
  entry, and puts a mark slot, once: a later settlement of an entry settled DONE in this call names a nonce now
  gone (DEAD_LETTERED if it was dead-lettered, else ALREADY_ACKED for an ack, else STALE: its entry was below its
  cursor), and one after a refused settlement waits for the next transaction, as the RocksDB ledger evaluates
  them in order.
- **forget_group / forget_topic**: the ledgers from the index (one Query), each ledger's items (one Query each,
  keys only) deleted with BatchWriteItem (25 a request). The indexes are eventually consistent: a group's
  first claim made within a second or so of its deletion may outlive it (as the committed offsets do,
  offsets.py).

Why it is crash-safe: every change is one transaction, durable when answered and all or nothing, so a crash
leaves each claim and settlement either written or not (the cleanup of dropped entries above aside, which
leaves only a state a receive cleans up). Why it is concurrency-safe: every write carries the condition that
makes it the protocol's (the cursor it read, the nonce it names), and DynamoDB checks a transaction's
conditions and writes it atomically against every other write (a concurrent transaction on the same items is
cancelled: TransactionConflict, tried again after a jittered backoff), so no lock is needed between processes.
Cost: a receive from one queue is a Query and a transaction; an ack of any number up to 100 is one transaction.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Sequence

from pynamodb.exceptions import PynamoDBException, TransactWriteError
from pynamodb.transactions import TransactWrite

from tidemq_protocol.errors import InvalidArgument

from ..pop.api import MARK_SLOTS, Claim, Entry, PopLedger, QueueLedger, Settled, Settlement
from .conditions import raced
from .queue_index import BACKOFF_S, MAX_BACKOFF_S
from .tables import Tables

log = logging.getLogger("tidemq.serverless")
TRANSACTION_ITEMS = 100  # DynamoDB's limit on a TransactWriteItems
MOST_DELIVERED = TRANSACTION_ITEMS - 1  # a claim's entries besides its cursor item
CONFLICT_ATTEMPTS = 8  # tries of a transaction cancelled only by concurrent transactions on its items
CONDITION_FAILED = "ConditionalCheckFailed"
BATCH_GET_KEYS = 100


def ledger_key(group: str, topic: str) -> str:
    return f"{group}#{topic}"


def cursor_slot(queue: int) -> str:
    return f"{queue:010d}"


def entry_slot(queue: int, offset: int) -> str:
    return f"{queue:010d}/{offset:020d}"


def mark_slot(queue: int, offset: int) -> str:
    return f"marks/{queue:010d}/{offset % MARK_SLOTS:04d}"


class DynamoDbPopLedger(PopLedger):
    """Pop ledgers in DynamoDB, shared by any number of processes (see the module docstring)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self._items = tables.pop_ledger

    def read(self, group: str, topic: str, queue: int) -> QueueLedger:
        items = self._items
        found = items.query(ledger_key(group, topic), items.slot.startswith(cursor_slot(queue)), consistent_read=True)
        cursor, entries = 0, []
        for item in found:
            if item.cursor is not None:
                cursor = int(item.cursor)
            else:
                entries.append(
                    Entry(
                        int(item.slot[11:]),
                        int(item.attempt),
                        int(item.nonce),
                        int(item.visible_at_ms),
                        item.message_group,
                    )
                )
        return QueueLedger(cursor, tuple(entries))

    # ---- claims ----------------------------------------------------------------------------------

    def claim(self, group: str, topic: str, queue: int, claim: Claim) -> bool:
        writes: dict[int, Entry | None] = {entry.offset: entry for entry in (*claim.delivered, *claim.waiting)}
        writes |= {entry.offset: None for entry in claim.dropped}  # as a batch applies them: the delete last
        delivered = {offset: entry for offset, entry in writes.items() if entry is not None}
        if len(delivered) > MOST_DELIVERED:
            raise InvalidArgument(f"a pop receive puts at most {MOST_DELIVERED} entries, not {len(delivered)}")
        dropped = [offset for offset, entry in writes.items() if entry is None]
        fits = MOST_DELIVERED - len(delivered)
        key, items = ledger_key(group, topic), self._items
        cursor = items.cursor == claim.cursor
        if claim.cursor == 0:  # read as 0: no cursor item yet, or one a claim that moved nothing wrote
            cursor = items.cursor.does_not_exist() | cursor
        for attempt in itertools.count():
            try:
                with TransactWrite(connection=self.tables.connection) as transaction:
                    mark = items(key, cursor_slot(queue), cursor=claim.new_cursor, group=group, topic=topic)
                    transaction.save(mark, condition=cursor)
                    for entry in delivered.values():
                        transaction.save(self._entry_item(key, queue, entry), condition=self._held(claim, entry.offset))
                    for offset in dropped[:fits]:
                        transaction.delete(items(key, entry_slot(queue, offset)), self._held(claim, offset))
                break
            except TransactWriteError as error:
                if _failed_conditions(error):
                    return False
                self._back_off(error, attempt)
        self._drop_after(key, queue, claim, dropped[fits:])
        return True

    def _held(self, claim: Claim, offset: int):
        """The condition on an entry a claim writes: below its cursor, that it has the nonce the claim replaces
        (none: that it does not exist); from the cursor on, none."""
        if offset >= claim.cursor:
            return None
        nonce = (claim.replaced or {}).get(offset)
        return self._items.slot.does_not_exist() if nonce is None else self._items.nonce == nonce

    def _drop_after(self, key: str, queue: int, claim: Claim, offsets: list[int]) -> None:
        """Delete the dropped entries the claim's transaction had no room for (see the module docstring)."""
        for start in range(0, len(offsets), TRANSACTION_ITEMS):
            try:
                with TransactWrite(connection=self.tables.connection) as transaction:
                    for offset in offsets[start : start + TRANSACTION_ITEMS]:
                        condition = self._held(claim, offset)
                        transaction.delete(self._items(key, entry_slot(queue, offset)), condition)
            except PynamoDBException as error:  # a state receives clean up: their entries are dropped again
                log.info("dropped pop entries of %s queue %d left for the next receive: %s", key, queue, error)

    # ---- settlements -----------------------------------------------------------------------------

    def settle(self, group: str, topic: str, settlements: Sequence[Settlement]) -> list[Settled]:
        key = ledger_key(group, topic)
        outcomes: list[Settled | None] = [None] * len(settlements)
        settled: dict[tuple[int, int], bool] = {}  # settled in this call, and whether dead-lettered
        for attempt in itertools.count():
            for index, settlement in enumerate(settlements):
                receipt = settlement.receipt
                if outcomes[index] is None and (receipt.queue, receipt.offset) in settled:
                    outcomes[index] = _settled_before(settlement, settled[receipt.queue, receipt.offset])
            batch = _next_transaction(settlements, outcomes)
            if not batch:
                return outcomes  # type: ignore[return-value] (every one has its outcome)
            sent = sorted(batch, key=lambda i: settlements[i].then is not None)  # acks first, as _settle sends them
            try:
                self._settle(key, [settlements[i] for i in sent])
            except TransactWriteError as error:
                failed = [i for i, code in zip(sent, _reasons(error), strict=False) if code == CONDITION_FAILED]
                if not failed:
                    self._back_off(error, attempt)
                    continue
                refused = self._refused(key, [settlements[i] for i in failed])
                for index, outcome in zip(failed, refused, strict=True):
                    outcomes[index] = outcome
                continue
            for index in batch:
                outcomes[index] = Settled.DONE
                receipt = settlements[index].receipt
                settled[receipt.queue, receipt.offset] = settlements[index].dead_lettered
        raise AssertionError("unreachable")

    def _settle(self, key: str, settlements: list[Settlement]) -> None:
        """One transaction: acks and dead-letterings first, then changes, then the dead-letterings' marks (the order
        pynamodb sends them in: deletes, then puts in the order saved, so the cancellation reasons of the
        settlements come first, in `settlements`' order)."""
        items = self._items
        with TransactWrite(connection=self.tables.connection) as transaction:
            for receipt, then, _ in settlements:
                named = items.nonce == receipt.nonce
                if then is None:
                    transaction.delete(items(key, entry_slot(receipt.queue, receipt.offset)), named)
                else:
                    entry = Entry(receipt.offset, then.attempt, then.nonce, then.visible_at_ms, then.group)
                    transaction.save(self._entry_item(key, receipt.queue, entry), condition=named)
            for receipt, _, dead_lettered in settlements:
                if dead_lettered:
                    slot = mark_slot(receipt.queue, receipt.offset)
                    transaction.save(items(key, slot, dead_lettered=receipt.offset))

    def _refused(self, key: str, settlements: list[Settlement]) -> list[Settled]:
        """What became of settlements whose condition failed: their entries, their marks and their queues' cursors
        as they are now, read with BatchGetItem (see the module docstring)."""
        receipts = [settlement.receipt for settlement in settlements]
        keys = sorted(
            {entry_slot(r.queue, r.offset) for r in receipts}
            | {mark_slot(r.queue, r.offset) for r in receipts}
            | {cursor_slot(r.queue) for r in receipts}
        )
        found = {}
        for start in range(0, len(keys), BATCH_GET_KEYS):
            chunk = [(key, slot) for slot in keys[start : start + BATCH_GET_KEYS]]
            found |= {item.slot: item for item in self._items.batch_get(chunk, consistent_read=True)}
        outcomes = []
        for settlement in settlements:
            receipt = settlement.receipt
            cursor, mark = found.get(cursor_slot(receipt.queue)), found.get(mark_slot(receipt.queue, receipt.offset))
            if entry_slot(receipt.queue, receipt.offset) in found:
                outcomes.append(Settled.STALE)
            elif mark is not None and mark.dead_lettered == receipt.offset:
                outcomes.append(Settled.DEAD_LETTERED)
            else:
                below = cursor is not None and receipt.offset < int(cursor.cursor)
                outcomes.append(_settled_before(settlement, False) if below else Settled.STALE)
        return outcomes

    def was_dead_lettered(self, group: str, topic: str, queue: int, offset: int) -> bool:
        try:
            mark = self._items.get(ledger_key(group, topic), mark_slot(queue, offset), consistent_read=True)
        except self._items.DoesNotExist:
            return False
        return mark.dead_lettered == offset

    # ---- deletion --------------------------------------------------------------------------------

    def forget_group(self, group: str) -> None:
        self._forget({item.ledger for item in self._items.by_group.query(group)})

    def forget_topic(self, topic: str) -> None:
        self._forget({item.ledger for item in self._items.by_topic.query(topic)})

    def _forget(self, ledgers: set[str]) -> None:
        items = self._items
        with items.batch_write() as writer:
            for ledger in sorted(ledgers):
                for item in items.query(ledger, consistent_read=True, attributes_to_get=["ledger", "slot"]):
                    writer.delete(item)

    # ---- helpers ---------------------------------------------------------------------------------

    def _entry_item(self, key: str, queue: int, entry: Entry):
        slot = entry_slot(queue, entry.offset)
        return self._items(
            key,
            slot,
            attempt=entry.attempt,
            nonce=entry.nonce,
            visible_at_ms=entry.visible_at_ms,
            message_group=entry.group,
        )

    def _back_off(self, error: TransactWriteError, attempt: int) -> None:
        """A transaction cancelled by concurrent transactions on its items waits, more each time, to go again;
        any other failure is raised."""
        if not raced(error) or attempt >= CONFLICT_ATTEMPTS:
            raise error
        time.sleep(random.uniform(0, min(MAX_BACKOFF_S, BACKOFF_S * 2**attempt)))


def _reasons(error: TransactWriteError) -> list[str | None]:
    return [reason.code if reason else None for reason in error.cancellation_reasons or []]


def _failed_conditions(error: TransactWriteError) -> bool:
    return CONDITION_FAILED in _reasons(error)


def _settled_before(settlement: Settlement, dead_lettered: bool) -> Settled:
    """What a settlement is whose entry is gone and below its cursor, settled before (`dead_lettered`: by a
    dead-lettering, so marked): an ack's is ALREADY_ACKED, unless the message was dead-lettered; anything else
    names no delivery."""
    if dead_lettered:
        return Settled.DEAD_LETTERED
    ack = settlement.then is None and not settlement.dead_lettered
    return Settled.ALREADY_ACKED if ack else Settled.STALE


def _next_transaction(settlements: Sequence[Settlement], outcomes: list[Settled | None]) -> list[int]:
    """The settlements to send next: the first one not yet settled of each entry (DynamoDB takes one operation on
    an item a transaction, an entry's or a mark slot's), up to TRANSACTION_ITEMS items (a dead-lettering is two)."""
    batch, items, slots = [], 0, set()
    for index, (receipt, _, dead_lettered) in enumerate(settlements):
        if outcomes[index] is not None:
            continue
        taken = {entry_slot(receipt.queue, receipt.offset)}
        if dead_lettered:
            taken.add(mark_slot(receipt.queue, receipt.offset))
        if not taken & slots:
            if items + len(taken) > TRANSACTION_ITEMS:
                break
            batch.append(index)
            items += len(taken)
        slots |= taken  # a later settlement of its entry waits for it, even if it waits itself
    return batch


__all__ = ["DynamoDbPopLedger"]
