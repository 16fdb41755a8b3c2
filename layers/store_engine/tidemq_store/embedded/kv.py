"""The embedded backend's KV namespaces, as the RIP-22 thread describes them: the commit log first, then RocksDB.

A write, under its namespace's lock: check the condition against the applied state, append the change to the
namespace's topic `%KV%<namespace>` (record.py; one queue, kept forever, `cleanup.policy=COMPACTION`, so the cold
tier holds it and the Spark key compaction keeps the newest change per key), wait for it to be durable (the
store's flush mode), then apply it to RocksDB without a WAL and acknowledge. A reader sees its own writes; a write
the caller saw acknowledged is in the commit log.

RocksDB holds each namespace's entries and a checkpoint, moved together in one write batch (kv_entries.py says how
they lie), so whatever a crash leaves is a state the topic reached: recovery replays the topic from the checkpoint
(`_replay`), and `rebuild` from the topic's start, from the hot tier or the cold one alike. Watches read the topic
itself (kv_watch.py). The memtable is flushed every `FLUSH_INTERVAL_S` of writes, which bounds how much a recovery
replays.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import logging
import threading
import time
from pathlib import Path

from rocksdict import WriteBatch, WriteOptions

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    InvalidArgument,
    KeyNotFound,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    TopicExists,
    TopicNotFound,
    VersionMismatch,
)
from tidemq_protocol.kv import (
    MAX_PAGE,
    MAX_PAGE_BYTES,
    Change,
    ChangeKind,
    ChangePage,
    Entry,
    EntryPage,
    NamespaceConfig,
    NamespaceStatus,
    Read,
    Snapshot,
    Written,
    check_config,
    check_key,
    check_limit,
    check_namespace,
    check_ttl,
    check_value,
    restorable,
    topic_of,
)

from ..api import MessageStore
from ..kv import record
from ..kv.api import KeyValueStore
from ..model import Page, TopicConfig
from ..rocks import Families
from ..threads import background_thread
from .kv_entries import (
    ENTRY_HEADER,
    checkpoint_key,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
    entries_end,
    entries_prefix,
    entry_key,
    has_expired,
    keys_starting_with,
    unpack_entry_header,
)
from .kv_watch import ChangeReader

FLUSH_INTERVAL_S = 5.0
REPLAY_BATCH = 1000
TOPIC_ATTRIBUTES = {"cleanup.policy": "COMPACTION"}
PURGE_INTERVAL_S = 60.0
log = logging.getLogger("tidemq.kv")


@dataclasses.dataclass
class NamespaceState:
    config: NamespaceConfig
    revision: int
    next_offset: int  # the topic's next offset to apply
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    prefix: bytes = b""  # what every entry key of the namespace starts with

    def __post_init__(self) -> None:
        self.prefix = entries_prefix(self.config.name)


class EmbeddedKeyValueStore(KeyValueStore):
    def __init__(self, store: MessageStore, path: Path, sync: bool) -> None:
        self.store = store
        self._rocks = Families(path, ("namespaces", "entries"))
        self._namespaces, self._entries = self._rocks.views["namespaces"], self._rocks.views["entries"]
        self._entries_handle = self._rocks.handles["entries"]
        self._get_entry = self._entries.get
        self._with_wal = WriteOptions()
        self._with_wal.sync = sync
        self._without_wal = WriteOptions()
        self._without_wal.disable_wal = True
        self._states: dict[str, NamespaceState] = {}
        self._admin = threading.Lock()  # creating and deleting namespaces
        self._changes = ChangeReader(store)
        self._flushed_at = time.monotonic()
        for raw in self._namespaces.values():
            self._open_namespace(NamespaceConfig(**json.loads(raw)))
        self._stop = threading.Event()
        self._purger = background_thread(self._purge_periodically, "kv-purge")
        self._purger.start()

    # ---- namespaces ------------------------------------------------------------------------------

    def create_namespace(self, config: NamespaceConfig) -> NamespaceConfig:
        check_config(config)
        with self._admin:
            if config.name in self._states:
                raise NamespaceExists(config.name)
            config = dataclasses.replace(config, created_at=clock.now_ms())
            topic = TopicConfig(name=topic_of(config.name), queues=1, retention_ms=None, attributes=TOPIC_ATTRIBUTES)
            try:
                self.store.create_topic(topic)
            except TopicExists:  # a create that stopped before its namespace record: start the topic again
                self.store.delete_topic(topic.name)
                self.store.create_topic(topic)
            self._drop_entries(config.name)
            self._namespaces.put(config.name.encode(), json.dumps(dataclasses.asdict(config)).encode(), self._with_wal)
            self._states[config.name] = NamespaceState(config, 0, 0)
            self._changes.forget()
        return config

    def get_namespace(self, name: str) -> NamespaceConfig:
        return self._state(name).config

    def list_namespaces(self, after: str | None = None, limit: int = 100) -> Page[NamespaceStatus]:
        """A page of the open namespaces, from one copy of them. Safe against concurrent deletes: the copy is taken
        in one step (a dict copy runs no Python code, so no other thread runs during it) and the page is made from
        the copy alone, never by looking a name up again, which a delete meanwhile would make fail."""
        check_limit(limit)
        states = dict(self._states)
        names = sorted(states)
        start = bisect.bisect_right(names, after) if after is not None else 0
        chosen = names[start : start + limit]
        more = start + limit < len(names)
        page = [NamespaceStatus(states[name].config, states[name].revision) for name in chosen]
        return Page(page, chosen[-1] if more and chosen else None)

    def delete_namespace(self, name: str) -> None:
        with self._admin:
            state = self._state(name)
            with state.lock:
                self._drop_entries(name)
                with contextlib.suppress(TopicNotFound):
                    self.store.delete_topic(topic_of(name))
                self._namespaces.delete(name.encode(), self._with_wal)
                del self._states[name]
            self._changes.forget()

    def revision(self, namespace: str) -> int:
        return self._state(namespace).revision

    # ---- keys ------------------------------------------------------------------------------------

    def get(self, namespace: str, key: str) -> Read:
        # The hot path of reads, written out: a key found is valid (every write checks its key), so only a miss
        # pays for checking it.
        state = self._states.get(namespace)
        if state is None:
            raise NamespaceNotFound(check_namespace(namespace))
        try:
            raw = self._get_entry(state.prefix + key.encode())
        except (AttributeError, UnicodeEncodeError):
            raw = None
        if raw is None:
            check_key(key)
            return Read(None, state.revision)
        version, expires = unpack_entry_header(raw)
        if not expires:
            return Read(Entry(key, raw[ENTRY_HEADER:], version), state.revision)
        if expires <= clock.now_ms():
            return Read(None, state.revision)
        return Read(Entry(key, raw[ENTRY_HEADER:], version, expires), state.revision)

    def get_many(self, namespace: str, keys: list[str]) -> EntryPage:
        state = self._state(namespace)
        if len(keys) > MAX_PAGE:
            raise InvalidArgument(f"a batch get asks for at most {MAX_PAGE} keys, not {len(keys)}")
        found = [self._entry(state, key, check_key(key)) for key in sorted(set(keys))]
        return EntryPage([entry for entry in found if entry is not None], state.revision)

    def put(
        self,
        namespace: str,
        key: str,
        value: bytes,
        *,
        expected_version: int | None = None,
        create_only: bool = False,
        ttl_ms: int | None = None,
    ) -> Written:
        raw_key = check_key(key)
        check_value(value)
        check_ttl(ttl_ms)
        if create_only and expected_version is not None:
            raise InvalidArgument("a put is either create-only or conditional on a version, not both")
        state = self._state(namespace)
        with state.lock:
            current = self._entry(state, key, raw_key)
            found = None if current is None else current.version
            if (create_only and current is not None) or (expected_version is not None and found != expected_version):
                raise VersionMismatch(namespace, key, expected_version, found)
            revision = state.revision + 1
            expires = None if ttl_ms is None else clock.now_ms() + ttl_ms
            self._commit(state, Change(revision, state.revision, ChangeKind.PUT, key, value, revision, expires))
        return Written(key, revision, revision)

    def delete(self, namespace: str, key: str, *, expected_version: int | None = None) -> Written:
        raw_key = check_key(key)
        state = self._state(namespace)
        with state.lock:
            current = self._entry(state, key, raw_key)
            if current is None and expected_version is None:
                raise KeyNotFound(namespace, key)
            found = None if current is None else current.version
            if expected_version is not None and found != expected_version:
                raise VersionMismatch(namespace, key, expected_version, found)
            revision = state.revision + 1
            self._commit(state, Change(revision, state.revision, ChangeKind.DELETE, key, version=revision))
        return Written(key, revision, revision)

    def scan(self, namespace: str, prefix: str = "", after: str | None = None, limit: int = 100) -> EntryPage:
        state = self._state(namespace)
        check_limit(limit)
        if prefix:
            check_key(prefix)
        base = state.prefix
        start = base + (prefix if after is None or after < prefix else after).encode()
        bounds = keys_starting_with(base + prefix.encode())
        now, entries, size = clock.now_ms(), [], 0
        for raw_key, raw in self._entries.items(from_key=start, read_opt=bounds):
            key = raw_key[len(base) :].decode()
            if after is not None and key <= after:
                continue
            entry = decode_entry(key, raw)
            if not entry.live(now):
                continue
            if entries and (len(entries) == limit or size + len(entry.value) > MAX_PAGE_BYTES):
                return EntryPage(entries, state.revision, entries[-1].key)
            entries.append(entry)
            size += len(entry.value)
        return EntryPage(entries, state.revision, None)

    # ---- watches ---------------------------------------------------------------------------------

    def watch(
        self,
        namespace: str,
        from_revision: int,
        *,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = 100,
        wait_s: float = 0.0,
    ) -> ChangePage:
        state = self._state(namespace)
        check_limit(limit)
        if from_revision < 1:
            raise InvalidArgument(f"a watch starts at revision 1 or later, not {from_revision}")
        if key is not None:
            check_key(key)
        deadline = time.monotonic() + wait_s
        while True:
            revision, applied_end = state.revision, state.next_offset
            page = self._changes.read(namespace, from_revision, applied_end, revision, key, prefix, limit)
            remaining = deadline - time.monotonic()
            if page.changes or remaining <= 0:
                return page
            from_revision = page.next_revision  # only changes to other keys so far: wait past them
            self.store.wait_for_messages(topic_of(namespace), 0, applied_end, min(remaining, 1.0))

    # ---- snapshots and rebuilding ----------------------------------------------------------------

    def export(self, namespace: str) -> Snapshot:
        """One revision's contents, read from a RocksDB snapshot of the entries."""
        state = self._state(namespace)
        with state.lock:  # no write between the revision and the snapshot
            revision, view = state.revision, self._entries.snapshot()
        base = state.prefix
        bounds = keys_starting_with(base)
        now, entries = clock.now_ms(), []
        try:
            for raw_key, raw in view.items(from_key=base, read_opt=bounds):
                entry = decode_entry(raw_key[len(base) :].decode(), raw)
                if entry.live(now):
                    entries.append(entry)
        finally:
            del view
        return Snapshot(state.config, revision, entries)

    def restore(self, snapshot: Snapshot, namespace: str | None = None, *, append: bool = False) -> int:
        name = check_namespace(namespace or snapshot.config.name)
        restorable(snapshot.entries, 0)  # bad keys or values refuse the import before anything is made
        if name not in self._states and not append:
            self.create_namespace(dataclasses.replace(snapshot.config, name=name))
        state = self._state(name)
        with state.lock:
            if not append and (state.revision or self._has_entries(name)):
                raise NamespaceNotEmpty(name)
            entries = restorable(snapshot.entries, state.revision)
            for entry in entries:
                change = Change(
                    entry.version,
                    state.revision,
                    ChangeKind.PUT,
                    entry.key,
                    entry.value,
                    entry.version,
                    entry.expires_at_ms,
                )
                self._commit(state, change)
        return len(entries)

    def rebuild(self, namespace: str) -> int:
        """Build the namespace's entries again from its topic (hot tier, then cold), from its first offset; returns
        how many changes were applied."""
        state = self._state(namespace)
        with state.lock:
            self._drop_entries(namespace)
            self._changes.forget()
            state.revision, state.next_offset = 0, 0
            return self._replay(state)

    # ---- the write path --------------------------------------------------------------------------

    def _commit(self, state: NamespaceState, change: Change) -> None:
        """Append `change` to the topic (durable when this returns), then apply it (the caller holds the lock)."""
        (put,) = self.store.put(topic_of(state.config.name), [record.to_message(change)])
        batch = WriteBatch(raw_mode=True)
        self._apply(batch, state.config.name, change)
        state.next_offset, state.revision = put.queue_offset + 1, change.revision
        self._checkpoint(batch, state)
        self._rocks.db.write(batch, self._without_wal)
        if time.monotonic() - self._flushed_at > FLUSH_INTERVAL_S:
            self._flushed_at = time.monotonic()
            self._entries.flush(False)

    def _apply(self, batch: WriteBatch, namespace: str, change: Change) -> None:
        target = entry_key(namespace, change.key)
        if change.kind is ChangeKind.PUT:
            batch.put(target, encode_entry(change), self._entries_handle)
        else:
            batch.delete(target, self._entries_handle)

    def _checkpoint(self, batch: WriteBatch, state: NamespaceState) -> None:
        mark = checkpoint_key(state.config.name)
        batch.put(mark, encode_checkpoint(state.next_offset, state.revision), self._entries_handle)

    # ---- opening and recovery --------------------------------------------------------------------

    def _open_namespace(self, config: NamespaceConfig) -> None:
        topic = topic_of(config.name)
        try:
            self.store.get_topic(topic)
        except TopicNotFound:  # a delete that stopped before its namespace record: finish it
            self._drop_entries(config.name)
            self._namespaces.delete(config.name.encode(), self._with_wal)
            return
        next_offset, revision = decode_checkpoint(self._entries.get(checkpoint_key(config.name)))
        state = self._states[config.name] = NamespaceState(config, revision, next_offset)
        self._replay(state)

    def _replay(self, state: NamespaceState) -> int:
        """Apply the topic's changes from the state's next offset to its end; returns how many."""
        topic = topic_of(state.config.name)
        (extent,) = self.store.queue_offsets(topic)
        offset, applied = max(state.next_offset, extent.min_offset), 0
        while offset < extent.max_offset:
            got = self.store.get(topic, 0, offset, max_messages=REPLAY_BATCH)
            if not got.messages:
                offset = max(offset + 1, got.next_offset)
                continue
            batch = WriteBatch(raw_mode=True)
            for message in got.messages:
                change = record.from_message(message)
                self._apply(batch, state.config.name, change)
                state.revision, applied = change.revision, applied + 1
            offset = state.next_offset = got.next_offset
            self._checkpoint(batch, state)
            self._rocks.db.write(batch, self._without_wal)
        return applied

    # ---- helpers ---------------------------------------------------------------------------------

    def _state(self, namespace: str) -> NamespaceState:
        state = self._states.get(namespace)
        if state is None:
            raise NamespaceNotFound(check_namespace(namespace))
        return state

    def _entry(self, state: NamespaceState, key: str, raw_key: bytes) -> Entry | None:
        raw = self._entries.get(state.prefix + raw_key)
        if raw is None or has_expired(raw, clock.now_ms()):
            return None
        return decode_entry(key, raw)

    def _has_entries(self, namespace: str) -> bool:
        base = entries_prefix(namespace)
        bounds = keys_starting_with(base)
        return any(True for _ in self._entries.keys(from_key=base, read_opt=bounds))

    def _drop_entries(self, namespace: str) -> None:
        batch = WriteBatch(raw_mode=True)
        batch.delete_range(entries_prefix(namespace), entries_end(namespace), self._entries_handle)
        self._rocks.db.write(batch, self._with_wal)

    def flush(self) -> None:
        """Write the memtable to files now (it is otherwise flushed every FLUSH_INTERVAL_S of writes, and at close):
        what a crash no longer needs to replay."""
        self._rocks.flush()

    # ---- expired keys --------------------------------------------------------------------------------

    def purge_expired(self, now_ms: int | None = None) -> int:
        """Remove expired keys from RocksDB (they read as absent already; the topic keeps their puts, so a rebuild
        brings them back expired). Not a change: watches see none. Returns how many were removed."""
        now, purged = now_ms if now_ms is not None else clock.now_ms(), 0
        for name in list(self._states):
            state = self._states.get(name)
            if state is None:
                continue
            bounds = keys_starting_with(state.prefix)
            expired = [
                raw_key
                for raw_key, raw in self._entries.items(from_key=state.prefix, read_opt=bounds)
                if has_expired(raw, now)
            ]
            for start in range(0, len(expired), REPLAY_BATCH):
                with state.lock:  # a write of the key meanwhile is not undone: check again under the lock
                    batch = WriteBatch(raw_mode=True)
                    for raw_key in expired[start : start + REPLAY_BATCH]:
                        raw = self._entries.get(raw_key)
                        if raw is not None and has_expired(raw, now):
                            batch.delete(raw_key, self._entries_handle)
                            purged += 1
                    self._rocks.db.write(batch, self._without_wal)
        return purged

    def _purge_periodically(self) -> None:
        while not self._stop.wait(PURGE_INTERVAL_S):
            try:
                self.purge_expired()
            except Exception:  # the next round tries again
                log.exception("purging expired KV keys failed")

    def close(self) -> None:
        self._stop.set()
        self._purger.join()
        self._rocks.flush()
        # A family handle held here would keep the database open: drop every reference before closing it.
        del self._entries_handle, self._entries, self._namespaces, self._get_entry
        self._rocks.close()
