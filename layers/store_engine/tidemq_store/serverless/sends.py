"""The serverless backend's idempotent sends (the design and the record: tidemq_store/sends.py): a batch with an
idempotency key is sequenced by one DynamoDB transaction that also writes the key's `sends` item, on condition that
none younger than the window holds it. The batch gets its offsets exactly when its key is recorded, whatever
crashes when; of two racing sends of a key one transaction wins, and the other answers from the winner's item.

A send of a key already held appends its records first (they lie in the writer's segment file, referenced by
nothing, until maintenance deletes the file) and costs two requests more than the first send's: the failed
transaction and the read of the item. A keyed send is a transaction even to one queue (a BatchGetItem and a
TransactWriteItems, where a send without a key makes one UpdateItem).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from pynamodb.exceptions import DoesNotExist
from pynamodb.transactions import TransactWrite

from tidemq_protocol import clock
from tidemq_protocol.errors import StoreUnavailable

from ..batch import ValidatedBatch
from ..model import PutResult, TopicConfig
from ..sends import SendKey, SentBatch, decode_sent, earlier_results, encode_sent
from .kv.changes import purge_time
from .queue_index import ExtraWrite, ItemChanged
from .tables import Tables

ATTEMPTS = 3
"""Sends of a key whose item expired between the failed transaction and its read: tries before giving up (503)."""

Append = Callable[..., list[PutResult]]
"""`Appender.append`: (topic, batch, also=, store_timestamp=) -> the batch's results."""


def offsets_of(queues: Sequence[int], firsts: dict[int, int]) -> list[int]:
    """Each message's offset when each queue's part of a batch starts at `firsts[queue]` (messages of one queue in
    the batch's order, as `Appender.append` sequences them)."""
    taken: dict[int, int] = {}
    offsets = []
    for queue in queues:
        rank = taken.get(queue, 0)
        taken[queue] = rank + 1
        offsets.append(firsts[queue] + rank)
    return offsets


class SendRecords:
    """The `sends` table's items, for one store (`window_ms`: StoreConfig.send_dedup_window_ms)."""

    def __init__(self, tables: Tables, window_ms: int) -> None:
        self.tables, self.window_ms = tables, window_ms

    def append_once(self, config: TopicConfig, batch: ValidatedBatch, send: SendKey, append: Append) -> list[PutResult]:
        """Append `batch` with its key recorded in the same transaction, or answer as the key's earlier send did."""
        for _ in range(ATTEMPTS):
            stored_at = clock.now_ms()
            record = partial(self._recording, config, send, batch, stored_at)
            try:
                return append(config.name, batch, also=record, store_timestamp=stored_at)
            except ItemChanged:
                sent = self.sent(config.name, send.key)
                earlier = earlier_results(config.name, send, sent, clock.now_ms(), self.window_ms, config.created_at)
                if earlier is not None:
                    return earlier
        raise StoreUnavailable(f"the send of idempotency key {send.key!r} raced its key's expiry: send it again")

    def sent(self, topic: str, key: str) -> SentBatch | None:
        """The record of the topic's send of `key` (strongly consistent), if DynamoDB still holds it."""
        try:
            item = self.tables.sends.get(_item_key(topic, key), consistent_read=True)
        except DoesNotExist:
            return None
        return decode_sent(item.sent)

    def _recording(
        self, config: TopicConfig, send: SendKey, batch: ValidatedBatch, stored_at: int, ids: list[str]
    ) -> ExtraWrite:
        """The write of the key's item with the sequencing of the batch whose messages have the ids `ids`."""
        return partial(self._record, config, send, batch, stored_at, ids)

    def _record(
        self,
        config: TopicConfig,
        send: SendKey,
        batch: ValidatedBatch,
        stored_at: int,
        ids: list[str],
        transaction: TransactWrite,
        firsts: dict[int, int],
    ) -> None:
        """Save the key's item in `transaction` (see `record`)."""
        offsets = offsets_of(batch.queues, firsts)
        results = tuple(
            PutResult(msg_id, queue, offset, stored_at)
            for msg_id, queue, offset in zip(ids, batch.queues, offsets, strict=True)
        )
        self.record(transaction, config, send.key, SentBatch(send.digest, stored_at, 0, results))

    def record(self, transaction: TransactWrite, config: TopicConfig, key: str, sent: SentBatch) -> None:
        """Save the item of the topic's send of `key` in `transaction`, unless an item younger than the window (and
        the topic) holds it: an update (an upsert), not a put, so that pynamodb sends it after the transaction's
        puts and deletions, in the order made (a failed condition is told apart by its place: queue_index
        `conditions.failed_beyond`)."""
        sends = self.tables.sends
        actions = [
            sends.sent.set(encode_sent(sent)),
            sends.stored_at.set(sent.stored_at),
            sends.purge_at.set(purge_time(sent.stored_at + self.window_ms)),
        ]
        forgotten_before = max(sent.stored_at - self.window_ms, config.created_at)
        condition = sends.key.does_not_exist() | (sends.stored_at < forgotten_before)
        transaction.update(sends(_item_key(config.name, key)), actions, condition=condition)

    def earlier(self, config: TopicConfig, send: SendKey) -> list[PutResult]:
        """The results of the topic's earlier send of `send`'s key, whose item failed a transaction's condition
        (StoreUnavailable if it expired meanwhile: the send is made again)."""
        sent = self.sent(config.name, send.key)
        earlier = earlier_results(config.name, send, sent, clock.now_ms(), self.window_ms, config.created_at)
        if earlier is None:
            raise StoreUnavailable(f"the send of idempotency key {send.key!r} raced its key's expiry: send it again")
        return earlier


def _item_key(topic: str, key: str) -> str:
    return f"{topic}|{key}"
