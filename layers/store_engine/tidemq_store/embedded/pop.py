"""The embedded backend's pop ledger (pop/api.py, which has the protocol): RocksDB with its WAL, `<home>/pop`.

One family, `ledger`, holds each group's ledger of each queue under one prefix, so a queue's ledger is one seek:

    group 0x00 topic 0x00 queue:u32                  ->  cursor:u64                               (the cursor)
    group 0x00 topic 0x00 queue:u32 offset:u64       ->  attempt:u32 nonce:u64 visible_at_ms:u64  (an entry)
                                                         [message_group: UTF-8, the rest of the value]
    group 0x00 topic 0x00 queue:u32 0xff*9 slot:u16  ->  offset:u64                               (a dead-letter mark)

all integers big-endian in keys (so entries sort by offset after their cursor) and little-endian in values. An
entry's message group (FIFO) follows its 20 bytes; an entry written before there were groups is those 20 bytes
alone, and reads as an entry without one. A dead-letter mark (pop/api.py: the mark of `offset`, in slot offset %
MARK_SLOTS) sorts after all its queue's entries (an entry's key is the queue's and 8 bytes), past the end of the
range a read of the queue's ledger scans (the queue's key and 9 bytes 0xff), so a read never steps over one, and a
ledger written before there were marks, which has none, reads as before (as one with marks reads to an older
version, which never sees them); a group's or a topic's deletion deletes its marks with the rest of its prefix.
Names cannot contain 0x00, so the separators are unambiguous. Every claim and settlement is one WriteBatch (a
dead-lettering's deleted entry and its mark in one), synced as the store's flush mode says, made under the lock of
its queue: the conditions are checked and the batch written while no other change to that queue can come between.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from rocksdict import ReadOptions, WriteBatch, WriteOptions

from ..pop.api import MARK_SLOTS, Claim, Entry, PopLedger, QueueLedger, Settled, Settlement
from ..rocks import Families

QUEUE = struct.Struct(">I")
OFFSET = struct.Struct(">Q")
CURSOR = struct.Struct("<Q")
ENTRY = struct.Struct("<IQQ")
PAST_ENTRIES = b"\xff" * 9  # after a queue's key: past every entry's key, where its marks are
SLOT = struct.Struct(">H")
MARK = struct.Struct("<Q")
LOCK_STRIPES = 64


def _prefix(group: str, topic: str) -> bytes:
    return group.encode() + b"\x00" + topic.encode() + b"\x00"


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


class RocksPopLedger(PopLedger):
    """Pop ledgers in RocksDB (see the module docstring)."""

    def __init__(self, path: Path, sync: bool) -> None:
        self._rocks = Families(path, ("ledger",))
        self._ledger, self._handle = self._rocks.views["ledger"], self._rocks.handles["ledger"]
        self._write = WriteOptions()
        self._write.sync = sync
        self._locks = [threading.Lock() for _ in range(LOCK_STRIPES)]

    def _stripe(self, key: bytes) -> int:
        return hash(key) % LOCK_STRIPES

    def _scan(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        bounds = ReadOptions()  # RocksDB keeps a pointer to the bound: it must outlive the iteration
        bounds.set_iterate_upper_bound(end)
        yield from self._ledger.items(from_key=start, read_opt=bounds)

    def read(self, group: str, topic: str, queue: int) -> QueueLedger:
        return self._read(_prefix(group, topic) + QUEUE.pack(queue))

    def _read(self, key: bytes) -> QueueLedger:
        cursor, entries = 0, []
        for found, value in self._scan(key, key + PAST_ENTRIES):
            if len(found) == len(key):
                (cursor,) = CURSOR.unpack(value)
            else:
                (offset,) = OFFSET.unpack_from(found, len(key))
                entries.append(_entry(offset, value))
        return QueueLedger(cursor, tuple(entries))

    def claim(self, group: str, topic: str, queue: int, claim: Claim) -> bool:
        key = _prefix(group, topic) + QUEUE.pack(queue)
        replaced = claim.replaced or {}
        with self._locks[self._stripe(key)]:
            # point reads of what the conditions name, not a scan of the ledger: a queue's acked entries leave
            # tombstones that a scan steps over until compaction (a third of a busy gateway's time, measured)
            cursor = self._ledger.get(key)
            if (CURSOR.unpack(cursor)[0] if cursor is not None else 0) != claim.cursor:
                return False
            for entry in (*claim.delivered, *claim.dropped, *claim.waiting):
                if entry.offset < claim.cursor and self._nonce(key, entry.offset) != replaced.get(entry.offset):
                    return False
            batch = WriteBatch(raw_mode=True)
            batch.put(key, CURSOR.pack(claim.new_cursor), self._handle)
            for entry in (*claim.delivered, *claim.waiting):
                batch.put(key + OFFSET.pack(entry.offset), _pack(entry), self._handle)
            for entry in claim.dropped:
                batch.delete(key + OFFSET.pack(entry.offset), self._handle)
            self._rocks.db.write(batch, self._write)
        return True

    def _nonce(self, key: bytes, offset: int) -> int | None:
        raw = self._ledger.get(key + OFFSET.pack(offset))
        return None if raw is None else ENTRY.unpack_from(raw)[1]

    def settle(self, group: str, topic: str, settlements: Sequence[Settlement]) -> list[Settled]:
        prefix = _prefix(group, topic)
        keys = [prefix + QUEUE.pack(settlement.receipt.queue) for settlement in settlements]
        stripes = sorted({self._stripe(key) for key in keys})  # taken in one order: no two settles deadlock
        for stripe in stripes:
            self._locks[stripe].acquire()
        try:
            outcomes, batch = [], WriteBatch(raw_mode=True)
            settled: dict[bytes, bool] = {}  # settled in this call, and whether dead-lettered
            for key, settlement in zip(keys, settlements, strict=True):
                receipt, then = settlement.receipt, settlement.then
                entry_key = key + OFFSET.pack(receipt.offset)
                raw = None if entry_key in settled else self._ledger.get(entry_key)
                if raw is None:  # a second settlement of one settled in this call names a nonce now gone
                    marked = settled[entry_key] if entry_key in settled else self._marked(key, receipt.offset)
                    outcomes.append(Settled.DEAD_LETTERED if marked else self._absent(key, settlement))
                elif ENTRY.unpack_from(raw)[1] != receipt.nonce:
                    outcomes.append(Settled.STALE)
                else:
                    if then is None:
                        batch.delete(entry_key, self._handle)
                    else:
                        batch.put(entry_key, _pack(then), self._handle)
                    if settlement.dead_lettered:
                        batch.put(_mark_key(key, receipt.offset), MARK.pack(receipt.offset), self._handle)
                    settled[entry_key] = settlement.dead_lettered
                    outcomes.append(Settled.DONE)
            if settled:
                self._rocks.db.write(batch, self._write)
            return outcomes
        finally:
            for stripe in stripes:
                self._locks[stripe].release()

    def _absent(self, key: bytes, settlement: Settlement) -> Settled:
        """What a settlement whose entry is gone, and whose offset is not marked, is: an ack of an offset below the
        cursor is one of an acked message; anything else names no delivery."""
        cursor = self._ledger.get(key)
        acked = cursor is not None and settlement.receipt.offset < CURSOR.unpack(cursor)[0]
        ack = settlement.then is None and not settlement.dead_lettered
        return Settled.ALREADY_ACKED if acked and ack else Settled.STALE

    def _marked(self, key: bytes, offset: int) -> bool:
        raw = self._ledger.get(_mark_key(key, offset))
        return raw is not None and MARK.unpack(raw)[0] == offset

    def was_dead_lettered(self, group: str, topic: str, queue: int, offset: int) -> bool:
        return self._marked(_prefix(group, topic) + QUEUE.pack(queue), offset)

    def forget_group(self, group: str) -> None:
        prefix = group.encode() + b"\x00"
        self._ledger.delete_range(prefix, _prefix_end(prefix), self._write)

    def forget_topic(self, topic: str) -> None:
        groups = set()
        for key, _ in self._scan(b"", b"\xff"):
            end = key.index(b"\x00")
            if key[end + 1 : key.index(b"\x00", end + 1)] == topic.encode():
                groups.add(key[:end])
        for group in groups:
            prefix = group + b"\x00" + topic.encode() + b"\x00"
            self._ledger.delete_range(prefix, _prefix_end(prefix), self._write)

    def flush(self) -> None:
        self._rocks.flush()

    def close(self) -> None:
        del self._ledger, self._handle  # references to the database: RocksDB closes when none is left
        self._rocks.close()


def _mark_key(key: bytes, offset: int) -> bytes:
    return key + PAST_ENTRIES + SLOT.pack(offset % MARK_SLOTS)


def _pack(entry: Entry) -> bytes:
    packed = ENTRY.pack(entry.attempt, entry.nonce, entry.visible_at_ms)
    return packed if entry.group is None else packed + entry.group.encode()


def _entry(offset: int, value: bytes) -> Entry:
    group = value[ENTRY.size :].decode() if len(value) > ENTRY.size else None
    return Entry(offset, *ENTRY.unpack_from(value), group)
