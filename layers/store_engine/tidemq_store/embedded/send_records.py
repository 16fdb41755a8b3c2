"""The records of idempotent sends (tidemq_store/sends.py owns the record and the design) in one of the embedded
store's RocksDB databases, beside what each send stored and written in the same WriteBatch as it: the ConsumeQueue's
(appended batches, consumequeue.py), the timers' (messages sent for later, timers.py) and the transaction log's
(half messages, transactions.py). Two families:

    sends    topic 0x00 idempotency_key                ->  the send's `SentBatch` (sends.py `encode_sent`)
    sent_at  stored_at:u64 topic 0x00 idempotency_key  ->  empty: the sends by age, for their expiry

(big-endian `stored_at`, so the family sorts by age; topic names cannot contain 0x00).
"""

from __future__ import annotations

import struct

from rocksdict import ReadOptions, WriteBatch, WriteOptions

from ..rocks import Families
from ..sends import SentBatch, decode_sent, encode_sent

SEND_FAMILIES = ("sends", "sent_at")
U64_BE = struct.Struct(">Q")


def _name(topic: str, key: str) -> bytes:
    return topic.encode() + b"\x00" + key.encode()


class SendRecords:
    """The `sends` and `sent_at` families of `rocks` (see the module docstring)."""

    def __init__(self, rocks: Families) -> None:
        self._rocks = rocks  # its families, not views of them: a view held here would keep the database open

    def add(self, batch: WriteBatch, topic: str, key: str, sent: SentBatch) -> None:
        """Add to `batch` the record of the topic's send of `key`."""
        name = _name(topic, key)
        handles = self._rocks.handles
        batch.put(name, encode_sent(sent), handles["sends"])
        batch.put(U64_BE.pack(sent.stored_at) + name, b"", handles["sent_at"])

    def sent(self, topic: str, key: str) -> SentBatch | None:
        """What the topic's send of `key` stored, if its record is still kept."""
        raw = self._rocks.views["sends"].get(_name(topic, key))
        return None if raw is None else decode_sent(raw)

    def forget(self, before_ms: int, options: WriteOptions) -> int:
        """Delete the sends stored before `before_ms` (their window has passed), in one write; how many. A key sent
        again since keeps its newer record."""
        batch = WriteBatch(raw_mode=True)
        sends, handles, aged_count, forgotten = self._rocks.views["sends"], self._rocks.handles, 0, 0
        bounds = ReadOptions()
        bounds.set_iterate_upper_bound(U64_BE.pack(before_ms))
        for aged in list(self._rocks.views["sent_at"].keys(read_opt=bounds)):
            batch.delete(aged, handles["sent_at"])
            aged_count += 1
            current = sends.get(aged[8:])
            if current is not None and decode_sent(current).stored_at == U64_BE.unpack_from(aged)[0]:
                batch.delete(aged[8:], handles["sends"])
                forgotten += 1
        if aged_count:
            self._rocks.db.write(batch, options)
        return forgotten
