"""The `kv_entries` items: a namespace's keys as they are now, read strongly consistent after the namespace's
revision, and written one at a time, each by the one transaction the package's docstring describes (the entry,
its change, the namespace's revision).
"""

from __future__ import annotations

import random
import time
import uuid

from pynamodb.exceptions import DoesNotExist, TransactWriteError
from pynamodb.transactions import TransactWrite

from tidemq_protocol import clock
from tidemq_protocol.errors import InvalidArgument, KeyNotFound, StoreUnavailable, VersionMismatch
from tidemq_protocol.kv import (
    MAX_PAGE,
    MAX_PAGE_BYTES,
    Change,
    ChangeKind,
    Entry,
    EntryPage,
    Read,
    Written,
    check_key,
    check_limit,
)

from ..conditions import raced
from ..queue_index import BACKOFF_S, MAX_BACKOFF_S
from ..tables import Tables
from .changes import Changes, purge_time
from .namespaces import NAMESPACE, Namespaces, config_of

WRITE_ATTEMPTS = 64
"""Tries of a write racing other writers of its namespace (its backoff doubles up to MAX_BACKOFF_S: 30 s at most)."""
CONDITION_FAILED = "ConditionalCheckFailed"
ENTRY_ITEM, NAMESPACE_ITEM = 0, 2
"""Where a write's items are in its transaction: pynamodb sends deletes and puts (the entry, then the change)
before updates (the namespace), and cancellation reasons come in that order."""


class Keys:
    """The keys of the namespaces of one set of tables."""

    def __init__(self, tables: Tables, namespaces: Namespaces, changes: Changes) -> None:
        self.tables, self.namespaces, self.changes = tables, namespaces, changes
        self._entries = tables.kv_entries

    # ---- reads -----------------------------------------------------------------------------------

    def get(self, namespace: str, key: str) -> Read:
        """Two strongly consistent GetItems: the namespace's revision, then the key."""
        check_key(key)
        revision = int(self.namespaces.live(namespace).revision)
        return Read(self.entry(namespace, key, clock.now_ms()), revision)

    def get_many(self, namespace: str, keys: list[str]) -> EntryPage:
        """The namespace's revision, then one strongly consistent BatchGetItem per 100 keys."""
        if len(keys) > MAX_PAGE:
            raise InvalidArgument(f"a batch get asks for at most {MAX_PAGE} keys, not {len(keys)}")
        for key in keys:
            check_key(key)
        wanted = sorted(set(keys))
        revision = int(self.namespaces.live(namespace).revision)
        now = clock.now_ms()
        items = self._entries.batch_get([(namespace, key) for key in wanted], consistent_read=True) if wanted else []
        found = [entry for entry in map(_entry_of, items) if entry.live(now)]
        return EntryPage(sorted(found, key=lambda entry: entry.key), revision)

    def scan(self, namespace: str, prefix: str = "", after: str | None = None, limit: int = 100) -> EntryPage:
        """The namespace's revision, then one Query of its keys from `after` (or from `prefix`) on, in key order
        (DynamoDB's: UTF-8 bytes, which is code point order), stopping at the first key past the prefix."""
        check_limit(limit)
        if prefix:
            check_key(prefix)
        if after is not None:
            check_key(after)
        revision = int(self.namespaces.live(namespace).revision)
        entries = self._entries
        if after is not None and after >= prefix:
            condition = entries.key > after
        else:  # every key under the prefix is past `after`
            condition = entries.key.startswith(prefix) if prefix else None
        now, found, size = clock.now_ms(), [], 0
        for item in entries.query(namespace, condition, consistent_read=True, page_size=limit + 1):
            if not item.key.startswith(prefix):
                break
            entry = _entry_of(item)
            if not entry.live(now):
                continue
            if found and (len(found) == limit or size + len(entry.value) > MAX_PAGE_BYTES):
                return EntryPage(found, revision, found[-1].key)
            found.append(entry)
            size += len(entry.value)
        return EntryPage(found, revision, None)

    def entry(self, namespace: str, key: str, now: int) -> Entry | None:
        """The key's entry, strongly consistent (None: there is none, or it expired by `now`)."""
        try:
            entry = _entry_of(self._entries.get(namespace, key, consistent_read=True))
        except DoesNotExist:
            return None
        return entry if entry.live(now) else None

    # ---- the write -------------------------------------------------------------------------------

    def write(
        self,
        namespace: str,
        key: str,
        value: bytes | None,
        ttl_ms: int | None,
        expected: int | None,
        create_only: bool,
    ) -> Written:
        """Put `value` (None: delete) at the namespace's next revision (see the package's docstring)."""
        entries, namespaces = self._entries, self.tables.kv_namespaces
        for attempt in range(WRITE_ATTEMPTS):
            item = self.namespaces.live(namespace)
            if item.busy is None:
                now = clock.now_ms()
                previous = int(item.revision)
                revision = previous + 1
                condition = _entry_condition(entries, now, expected, create_only, must_exist=value is None)
                if value is None:
                    change = Change(revision, previous, ChangeKind.DELETE, key, b"", revision)
                else:
                    expires = None if ttl_ms is None else now + ttl_ms
                    change = Change(revision, previous, ChangeKind.PUT, key, value, revision, expires)
                purge_at = purge_time(now + config_of(item).history_ms)
                token = uuid.uuid4().hex  # DynamoDB applies a transaction sent again with its token once
                try:
                    with TransactWrite(connection=self.tables.connection, client_request_token=token) as transaction:
                        if value is None:
                            transaction.delete(entries(namespace, key), condition=condition)
                        else:
                            entry = Entry(key, value, revision, change.expires_at_ms)
                            transaction.save(self.item(namespace, entry), condition=condition)
                        transaction.save(self.changes.item(namespace, change, purge_at, writer=token))
                        transaction.update(
                            namespaces(NAMESPACE, namespace),
                            [namespaces.revision.set(revision)],
                            condition=(namespaces.revision == previous) & namespaces.busy.does_not_exist(),
                        )
                    return Written(key, revision, revision)
                except TransactWriteError as error:
                    reasons = [reason.code if reason else None for reason in error.cancellation_reasons or []]
                    if reasons and self.changes.made_by(namespace, revision, token):  # landed, its answer lost
                        return Written(key, revision, revision)
                    if len(reasons) == 3 and reasons[ENTRY_ITEM] == CONDITION_FAILED:
                        self._refuse(namespace, key, expected, create_only, must_exist=value is None)
                    if not raced(error):
                        raise
            time.sleep(random.uniform(0, min(MAX_BACKOFF_S, BACKOFF_S * 2**attempt)))  # step back, more each time
        raise StoreUnavailable(
            f"KV namespace {namespace!r} is too busy: {WRITE_ATTEMPTS} tries of this write met others; nothing was "
            f"written"
        )

    def _refuse(self, namespace: str, key: str, expected: int | None, create_only: bool, *, must_exist: bool):
        """The entry's condition failed: raise what the key is now, unless it has come back to what the write
        asked for (then the caller tries again)."""
        current = self.entry(namespace, key, clock.now_ms())
        found = None if current is None else current.version
        if create_only and current is not None:
            raise VersionMismatch(namespace, key, None, found)
        if expected is not None and found != expected:
            raise VersionMismatch(namespace, key, expected, found)
        if must_exist and current is None:
            raise KeyNotFound(namespace, key)

    def item(self, namespace: str, entry: Entry):
        """The entry's item, to be written (the write's transaction, or a restore's batch)."""
        expires = entry.expires_at_ms
        return self._entries(
            namespace,
            entry.key,
            value=entry.value,
            version=entry.version,
            expires_at_ms=expires,
            purge_at=None if expires is None else purge_time(expires),
        )


def _entry_condition(entries, now: int, expected: int | None, create_only: bool, *, must_exist: bool):
    """The write's condition on the key's item: an expired item counts as absent."""
    if create_only:
        return entries.key.does_not_exist() | (entries.expires_at_ms <= now)
    live = entries.key.exists() & (entries.expires_at_ms.does_not_exist() | (entries.expires_at_ms > now))
    if expected is not None:
        return live & (entries.version == expected)
    return live if must_exist else None


def _entry_of(item) -> Entry:
    expires = item.expires_at_ms
    return Entry(item.key, item.value, int(item.version), None if expires is None else int(expires))


__all__ = ["Keys"]
