"""The embedded backend's transaction log (transactions/api.py has the protocol and why it is crash-safe): RocksDB
with its WAL, `<home>/transactions`, every change one WriteBatch made under the lock of its transaction (this process
alone opens the store: no other writer can come between). The WAL is fsync'd as the store's metadata is
(`metadata_sync`: a process crash never loses a write, a power loss may lose the latest unless it is set), but a
commit's decision always: it must be on disk before the message it lets into the commit log is; and a half message
as the commit log's messages are (under SYNC, before it is acknowledged).

    tx       msg_id                                  -> the transaction (JSON: `Stored`)
    half     msg_id                                  -> its half message: the record its commit appends
    due      check_at_ms:u64 msg_id                  -> ""   prepared transactions, by when their next check is due
    open     topic 0x00 group 0x00 msg_id            -> ""   a check is open (opened, not yet taken)
    listed   topic 0x00 ~prepared_ms:u64 msg_id       -> ""   every transaction of the topic, newest first
    ended    ended_ms:u64 msg_id                     -> ""   outcomes, oldest first (pruning)
    meta     "next"                                  -> u64  the counter half message ids are made from
    sends, sent_at                                         the idempotency keys of half messages (send_records.py),
                                                           each written in its transaction's batch

Integers are big-endian (so keys sort by them); names cannot contain 0x00. A half message's id is `TX_ID_BASE` plus
the counter: above every commit-log position, so it names no record of the log, and `message_by_id` asks here.

A commit is three writes (api.py says why that is still once): the decision with the queue's end then
(`committing_from`), the append of the half message's record to the commit log (its properties give it its id), and
the outcome with the message's offset. Whoever next touches a transaction left between the first and the last (the
log's opening, an end, a check) finishes it: it reads the queue from `committing_from` for a message with the id,
and appends the record only if none is there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rocksdict import ReadOptions, WriteBatch, WriteOptions

from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    MessageNotFound,
    MessageTooLarge,
    OffsetOutOfRange,
    TopicNotFound,
    TransactionNotFound,
)
from tidemq_protocol.message import Message, StoredMessage
from tidemq_protocol.record import (
    MESSAGE_ID,
    decode_message,
    encode_properties,
    encode_record,
    message_id,
    parse_message_id,
    with_message_id,
)

from ..batch import ValidatedBatch, validate_batch
from ..config import FlushDiskType
from ..model import Page
from ..rocks import Families
from ..sends import SendKey, earlier_results, keyed
from ..transactions.api import (
    OUTCOME_RETENTION_MS,
    Transaction,
    TransactionLog,
    TransactionState,
    ended_as_asked,
    half_sent,
    listing_key,
)
from .admin import topic_now
from .send_records import SEND_FAMILIES, SendRecords

if TYPE_CHECKING:
    from .store import EmbeddedMessageStore

TX_ID_BASE = 1 << 63
"""Half message ids are this plus a counter: no commit-log position reaches it."""
FAMILIES = ("tx", "half", "due", "open", "listed", "ended", "meta", *SEND_FAMILIES)
U64 = struct.Struct(">Q")
NEWEST = (1 << 64) - 1
LOCK_STRIPES = 64
ID_PROPERTY_BYTES = len(MESSAGE_ID) + 2 + 24  # what `with_message_id` adds: name, separators, the id
FIND_PAGE = 256  # messages one read looks through for a commit's message


def is_transaction_id(msg_id: str) -> bool:
    """Whether `msg_id` is one this log gave a half message (not a commit-log position)."""
    return parse_message_id(msg_id)[0] >= TX_ID_BASE


@dataclasses.dataclass(frozen=True, slots=True)
class Stored:
    """What `tx` holds of one transaction: the transaction, and while a commit is under way (or was, when the
    process died) the queue's end when it was decided; the half message's tag code and keys (its record's index
    columns)."""

    transaction: Transaction
    committing_from: int | None = None
    tag_code: int = 0
    keys: tuple[str, ...] = ()

    def encode(self) -> bytes:
        return json.dumps(
            {
                "transaction": dataclasses.asdict(self.transaction),
                "committing_from": self.committing_from,
                "tag_code": self.tag_code,
                "keys": list(self.keys),
            }
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Stored:
        data = json.loads(raw)
        fields = data["transaction"]
        transaction = Transaction(**{**fields, "state": TransactionState(fields["state"])})
        return cls(transaction, data["committing_from"], data["tag_code"], tuple(data["keys"]))

    def changed(self, **changes) -> Stored:
        return dataclasses.replace(self, transaction=dataclasses.replace(self.transaction, **changes))

    @property
    def check_open(self) -> bool:
        return not self.transaction.ended and self.transaction.checks > self.transaction.claimed


def _name(*parts: str) -> bytes:
    return b"".join(part.encode() + b"\x00" for part in parts)


class RocksTransactionLog(TransactionLog):
    """Transactions in RocksDB (see the module docstring), over the embedded store that appends their messages."""

    def __init__(self, store: EmbeddedMessageStore, path: Path, sync: bool) -> None:
        self.store = store
        self._rocks = Families(path, FAMILIES)
        self._views, self._handles = self._rocks.views, self._rocks.handles
        self._write, self._synced = WriteOptions(), WriteOptions()
        self._write.sync, self._synced.sync = sync, True
        self._half_synced = store.config.flush_disk_type is FlushDiskType.SYNC
        self._locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self._counter = threading.Lock()  # a half message's id taken (and its key looked up and recorded)
        self._sends = SendRecords(self._rocks)
        for stored in self._committing():  # a commit the last process left half done
            with self._lock(stored.transaction.msg_id):
                self._finish_quietly(stored.transaction.msg_id)

    # ---- storage ---------------------------------------------------------------------------------

    def _lock(self, msg_id: str) -> threading.Lock:
        return self._locks[hash(msg_id) % LOCK_STRIPES]

    def _scan(self, family: str, start: bytes, end: bytes) -> Iterator[bytes]:
        bounds = ReadOptions()  # RocksDB keeps a pointer to the bound: it must outlive the iteration
        bounds.set_iterate_upper_bound(end)
        for key, _ in self._views[family].items(from_key=start, read_opt=bounds):
            yield key

    def _read(self, msg_id: str) -> Stored | None:
        raw = self._views["tx"].get(msg_id.encode())
        return None if raw is None else Stored.decode(raw)

    def _index_keys(self, stored: Stored) -> dict[str, bytes]:
        """The index entries `stored` has (family -> key)."""
        t, msg = stored.transaction, stored.transaction.msg_id.encode()
        keys = {"listed": _name(t.topic) + U64.pack(NEWEST - t.prepared_ms) + msg}
        if t.ended:
            keys["ended"] = U64.pack(t.ended_ms or 0) + msg
        else:
            keys["due"] = U64.pack(t.check_at_ms) + msg
            if stored.check_open:
                keys["open"] = _name(t.topic, t.producer_group) + msg
        return keys

    def _save(
        self,
        old: Stored | None,
        new: Stored,
        half: bytes | None = None,
        batch: WriteBatch | None = None,
        synced: bool = False,
    ) -> Stored:
        """Write `new` (replacing `old`) with its index entries, in one batch (`batch`, if given, holds more of it;
        `synced`: fsync'd whatever `metadata_sync` says); `half`: its half message too. An ended transaction's half
        message goes."""
        batch = WriteBatch(raw_mode=True) if batch is None else batch
        msg = new.transaction.msg_id.encode()
        before, after = (self._index_keys(old) if old else {}), self._index_keys(new)
        for family, key in before.items():
            if after.get(family) != key:
                batch.delete(key, self._handles[family])
        for family, key in after.items():
            if before.get(family) != key:
                batch.put(key, b"", self._handles[family])
        batch.put(msg, new.encode(), self._handles["tx"])
        if half is not None:
            batch.put(msg, half, self._handles["half"])
        if new.transaction.ended:
            batch.delete(msg, self._handles["half"])
        self._rocks.db.write(batch, self._synced if synced else self._write)
        return new

    def _delete(self, stored: Stored, batch: WriteBatch) -> None:
        msg = stored.transaction.msg_id.encode()
        for family, key in self._index_keys(stored).items():
            batch.delete(key, self._handles[family])
        batch.delete(msg, self._handles["tx"])
        batch.delete(msg, self._handles["half"])

    # ---- the protocol ----------------------------------------------------------------------------

    def prepare(
        self, topic: str, message: Message, producer_group: str, timeout_ms: int, send: SendKey | None = None
    ) -> Transaction:
        store = self.store
        config = store.get_topic(topic)
        batch = validate_batch(store.config, config, [message], half=True)
        body, born = bytes(message.body), message.born_timestamp
        properties = encode_properties(message.keys, message.tag, message.properties)
        if len(body) + len(properties) + ID_PROPERTY_BYTES > store.config.max_message_bytes:
            room = store.config.max_message_bytes - ID_PROPERTY_BYTES
            raise MessageTooLarge(f"a half message holds at most {room} bytes of body and properties here")
        send = keyed(send, batch)
        with self._counter:
            prepared = topic_now(config)
            if send is not None:
                window = store.config.send_dedup_window_ms
                sent = self._sends.sent(topic, send.key)
                earlier = earlier_results(topic, send, sent, prepared, window, config.created_at)
                if earlier is not None:
                    return self.get(topic, earlier[0].msg_id)
            raw = self._views["meta"].get(b"next")
            number = U64.unpack(raw)[0] if raw is not None else 0
            msg_id = message_id(TX_ID_BASE + number, batch.sizes[0] + ID_PROPERTY_BYTES)
            record = encode_record(
                topic.encode(),
                message.queue,
                prepared if born is None else born,
                with_message_id(properties, msg_id),
                body,
            )
            transaction = Transaction(
                msg_id, topic, message.queue, producer_group, TransactionState.PREPARED, prepared, prepared + timeout_ms
            )
            stored = Stored(transaction, None, batch.tag_codes[0], tuple(batch.keys[0]))
            counted = WriteBatch(raw_mode=True)
            counted.put(b"next", U64.pack(number + 1), self._handles["meta"])
            if send is not None:
                self._sends.add(counted, topic, send.key, half_sent(send, transaction))
            # a half message is a message: on disk before it is acknowledged, as the commit log's are under SYNC
            return self._save(None, stored, record, counted, synced=self._half_synced).transaction

    def get(self, topic: str, msg_id: str) -> Transaction:
        return self._stored(topic, msg_id).transaction

    def _stored(self, topic: str, msg_id: str) -> Stored:
        stored = self._read(msg_id) if isinstance(msg_id, str) else None
        if stored is None or stored.transaction.topic != topic:
            raise TransactionNotFound(topic, msg_id)
        return stored

    def half_message(self, transaction: Transaction) -> StoredMessage:
        raw = self._views["half"].get(transaction.msg_id.encode())
        if raw is None:
            raise MessageNotFound(f"with id {transaction.msg_id}: its transaction has ended")
        return decode_message(raw)

    def end(self, topic: str, msg_id: str, commit: bool, ended_by: str, checks: int | None = None) -> Transaction:
        with self._lock(msg_id):
            stored = self._stored(topic, msg_id)
            if stored.committing_from is not None:
                stored = self._finish(stored)
            transaction = stored.transaction
            if ended_as_asked(transaction, commit, checks):
                return transaction
            if not commit:
                rolled_back = stored.changed(state=TransactionState.ROLLED_BACK, ended_ms=now_ms(), ended_by=ended_by)
                return self._save(stored, rolled_back).transaction
            committing = dataclasses.replace(
                stored.changed(ended_by=ended_by), committing_from=self.store.max_offset(topic, transaction.queue)
            )
            return self._finish(self._save(stored, committing, synced=True)).transaction

    def _finish(self, stored: Stored) -> Stored:
        """Complete a commit decided (see the module docstring); under the transaction's lock. A transaction whose
        topic is gone, or was made again since (a deletion forgets its transactions, but without their locks: one
        written meanwhile may outlive it), is dropped: TransactionNotFound."""
        transaction = stored.transaction
        try:
            if self.store.get_topic(transaction.topic).created_at > transaction.prepared_ms:
                raise TopicNotFound(transaction.topic)
        except TopicNotFound:
            batch = WriteBatch(raw_mode=True)
            self._delete(stored, batch)
            self._rocks.db.write(batch, self._write)
            raise TransactionNotFound(transaction.topic, transaction.msg_id) from None
        offset = self._find_committed(stored)
        if offset is None:
            record = self._views["half"].get(transaction.msg_id.encode())
            batch = ValidatedBatch(record, [len(record)], [transaction.queue], [stored.tag_code], [stored.keys])
            offset = self.store.append_batch(transaction.topic, batch)[0].queue_offset
        committed = dataclasses.replace(
            stored.changed(state=TransactionState.COMMITTED, ended_ms=now_ms(), offset=offset), committing_from=None
        )
        return self._save(stored, committed)

    def _find_committed(self, stored: Stored) -> int | None:
        """The offset of the transaction's message in its queue from `committing_from` on, if it is there."""
        transaction, store = stored.transaction, self.store
        offset = max(stored.committing_from or 0, store.min_offset(transaction.topic, transaction.queue))
        while offset < store.max_offset(transaction.topic, transaction.queue):
            try:
                read = store.get(transaction.topic, transaction.queue, offset, FIND_PAGE)
            except OffsetOutOfRange as error:
                offset = error.min_offset
                continue
            for message in read.messages:
                if message.msg_id == transaction.msg_id:
                    return message.queue_offset
            offset = read.next_offset
        return None

    def _finish_quietly(self, msg_id: str) -> None:
        """Finish a commit the last process left half done (dropped if its topic is gone: `_finish`)."""
        stored = self._read(msg_id)
        if stored is not None and stored.committing_from is not None:
            with contextlib.suppress(TransactionNotFound):
                self._finish(stored)

    def _committing(self) -> list[Stored]:
        """Prepared transactions whose commit was decided and not recorded done."""
        found = (self._read(key[U64.size :].decode()) for key in self._scan("due", b"", b"\xff" * 9))
        return [stored for stored in found if stored is not None and stored.committing_from is not None]

    def note(self, topic: str, msg_id: str, answer: str) -> Transaction:
        with self._lock(msg_id):
            stored = self._stored(topic, msg_id)
            if stored.transaction.ended or stored.committing_from is not None:
                return stored.transaction
            return self._save(stored, stored.changed(answer=answer)).transaction

    def due(
        self, now_ms: int, limit: int, topic: str | None = None, producer_group: str | None = None
    ) -> list[Transaction]:
        found = []
        for key in self._scan("due", b"", U64.pack(now_ms + 1)):
            msg_id = key[U64.size :].decode()
            stored = self._read(msg_id)
            if stored is None:
                continue
            if stored.committing_from is not None:
                with self._lock(msg_id):
                    self._finish_quietly(msg_id)
                continue
            transaction = stored.transaction
            if topic not in (None, transaction.topic) or producer_group not in (None, transaction.producer_group):
                continue
            found.append(transaction)
            if len(found) == limit:
                break
        return found

    def open_check(self, transaction: Transaction, next_check_ms: int, claim: bool) -> Transaction | None:
        with self._lock(transaction.msg_id):
            stored = self._read(transaction.msg_id)
            if stored is None or stored.transaction.ended or stored.committing_from is not None:
                return None
            if stored.transaction.checks != transaction.checks:
                return None
            checks = transaction.checks + 1
            opened = stored.changed(
                checks=checks, check_at_ms=next_check_ms, claimed=checks if claim else stored.transaction.claimed
            )
            return self._save(stored, opened).transaction

    def claim(self, topic: str, producer_group: str, limit: int) -> list[Transaction]:
        prefix, taken = _name(topic, producer_group), []
        for key in list(self._scan("open", prefix, prefix[:-1] + b"\x01")):
            msg_id = key[len(prefix) :].decode()
            with self._lock(msg_id):
                stored = self._read(msg_id)
                if stored is None or not stored.check_open:
                    continue
                taken.append(self._save(stored, stored.changed(claimed=stored.transaction.checks)).transaction)
            if len(taken) == limit:
                break
        return taken

    def list(self, topic: str, state: TransactionState | None, after: str | None, limit: int) -> Page[Transaction]:
        prefix = _name(topic)
        start = prefix
        if after is not None:
            prepared, _, after_id = after.partition(".")
            start = prefix + U64.pack(NEWEST - int(prepared)) + after_id.encode() + b"\x00"
        found: list[Transaction] = []
        for key in self._scan("listed", start, prefix[:-1] + b"\x01"):
            stored = self._read(key[len(prefix) + U64.size :].decode())
            if stored is None or state not in (None, stored.transaction.state):
                continue
            if len(found) == limit:
                return Page(found, listing_key(found[-1]))
            found.append(stored.transaction)
        return Page(found, None)

    def forget_topic(self, topic: str) -> None:
        prefix, batch = _name(topic), WriteBatch(raw_mode=True)
        for key in list(self._scan("listed", prefix, prefix[:-1] + b"\x01")):
            stored = self._read(key[len(prefix) + U64.size :].decode())
            if stored is not None:
                self._delete(stored, batch)
        self._rocks.db.write(batch, self._write)

    def prune(self, now_ms: int) -> int:
        self._sends.forget(now_ms - self.store.config.send_dedup_window_ms, self._write)
        pruned, batch = 0, WriteBatch(raw_mode=True)
        for key in list(self._scan("ended", b"", U64.pack(max(0, now_ms - OUTCOME_RETENTION_MS)))):
            stored = self._read(key[U64.size :].decode())
            if stored is not None:
                self._delete(stored, batch)
                pruned += 1
        if pruned:
            self._rocks.db.write(batch, self._write)
        return pruned

    def committed_message(self, msg_id: str) -> StoredMessage:
        """The committed message of the half message `msg_id` (MessageNotFound unless committed and still there)."""
        stored = self._read(msg_id)
        if stored is None or not stored.transaction.committed:
            raise MessageNotFound(f"with id {msg_id}")
        transaction = stored.transaction
        try:
            messages = self.store.get(transaction.topic, transaction.queue, transaction.offset, 1).messages
        except (OffsetOutOfRange, TopicNotFound):
            messages = []
        if not messages or messages[0].msg_id != msg_id:
            raise MessageNotFound(f"with id {msg_id}")
        return messages[0]

    def close(self) -> None:
        del self._views, self._handles  # references to the database: RocksDB closes when none is left
        self._rocks.close()
