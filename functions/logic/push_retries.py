"""A push group's pending retries, durable on both backends: for each queue whose head batch failed, how many calls
of it failed and when the next one is due, so that a restart (of the local gateway, or a new Lambda execution
environment) goes on counting where the last one stopped instead of counting the batch's attempts anew.

Where they are kept: in the store's pop ledger (tidemq_store/pop/api.py), the group's ledger of the topic it pushes,
one entry per queue waiting to retry:

    offset          the head batch's first offset (the group's committed offset when it failed)
    attempt         the calls of that batch that failed so far
    visible_at_ms   when the next call is due (the group's backoff after that many failures)
    nonce           names this record: each write gives a new one, and a clear deletes the entry only if it still
                    has the nonce read

Why there, and not a table of their own: the ledger already is a durable, atomic, per-(group, topic, queue) record
of "delivered n times, next due then" on both backends (RocksDB with its WAL; DynamoDB with conditional writes), with
a format owned by its backends; it is deleted with the group or the topic; and a push group's ledger of its push
topic is otherwise empty, since a group that pushes a topic may not pop it (functions/logic/pop.py refuses it). So
this adds no table, no column family and no format, and it costs nothing while delivery succeeds: a queue's ledger
is read once per pass, only for a queue with messages to deliver, and written only when a call fails or a retried
batch is done. The ledger's cursor is not used (it stays 0, so each write of an entry is unconditional): a group is
delivered by one deliverer at a time (the local worker runs a group on one thread; the push function runs with
reserved concurrency 1).

A subscription cleared, or moved to another topic, forgets the retries of the topic it pushed (`forget`), so that
popping that topic later does not take them for deliveries. A group that popped a topic before it pushes it may
have left pop entries in that ledger: they are stale records to push delivery, cleared as such.

Crash safety: a failure is recorded before delivery moves on, so a crash after it retries with the count it had; a
batch done is committed (its offset moves) before its record is cleared, and a record whose offset is no longer the
group's committed offset (done, reset, retention) is stale: the next pass clears it and starts that batch at 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq_store.pop.api import Claim, Entry, PopLedger, Receipt, Settlement
from tidemq_store.pop.receive import new_nonce

WRITE_TRIES = 3
"""Writes of a record tried before giving up on it (each lost only to a concurrent deliverer's)."""


@dataclass(frozen=True, slots=True)
class PendingRetry:
    """A queue waiting to call its head batch again: `attempts` calls failed; the next is due at `due_ms`."""

    queue: int
    offset: int
    attempts: int
    due_ms: int
    nonce: int


class PushRetries:
    """The pending retries of one group's push delivery from one topic (see the module docstring)."""

    def __init__(self, ledger: PopLedger, group: str, topic: str) -> None:
        self.ledger, self.group, self.topic = ledger, group, topic

    def pending(self, queue: int) -> PendingRetry | None:
        """The queue's pending retry as stored, if any."""
        entries = self.ledger.read(self.group, self.topic, queue).entries
        if not entries:
            return None
        entry = entries[0]
        return PendingRetry(queue, entry.offset, entry.attempt, entry.visible_at_ms, entry.nonce)

    def record(self, queue: int, offset: int, attempts: int, due_ms: int) -> PendingRetry:
        """Store that the batch at `offset` failed `attempts` calls, the next due at `due_ms` (replacing what the
        queue had); the record as stored."""
        entry = Entry(offset, attempts, new_nonce(), due_ms)
        for _ in range(WRITE_TRIES):
            ledger = self.ledger.read(self.group, self.topic, queue)
            stale = tuple(e for e in ledger.entries if e.offset != offset)
            claim = Claim(ledger.cursor, ledger.cursor, (entry,), {e.offset: e.nonce for e in ledger.entries}, stale)
            if self.ledger.claim(self.group, self.topic, queue, claim):
                break
        return PendingRetry(queue, offset, attempts, due_ms, entry.nonce)

    def forget(self, queues: int) -> None:
        """Delete the pending retries of queues 0..`queues`-1 (the subscription is cleared or moved)."""
        for queue in range(queues):
            for entry in self.ledger.read(self.group, self.topic, queue).entries:
                self.clear(PendingRetry(queue, entry.offset, entry.attempt, entry.visible_at_ms, entry.nonce))

    def clear(self, pending: PendingRetry) -> None:
        """Delete the record (if it is still the one read: a record written since stays)."""
        receipt = Receipt(pending.queue, pending.offset, pending.nonce)
        self.ledger.settle(self.group, self.topic, [Settlement(receipt)])
