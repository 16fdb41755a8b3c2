"""`ServerlessKeyValueStore`: the serverless backend's KV namespaces (the RIP-22 thread), in three DynamoDB tables
(tables.py): `kv_namespaces` (a namespace's settings and revision), `kv_entries` (its keys) and `kv_changes` (its
history, for watches).

A write (put or delete) reads the namespace item, strongly consistent, for its revision r, then makes ONE
TransactWriteItems of three items:

    1. the entry      put or delete, on the caller's condition (absent or expired / at version v / live)
    2. the change     put `kv_changes` item r+1 (kind, key, value, version, expires_at_ms, previous = r)
    3. the namespace  SET revision = r+1, condition revision = r and no restore or deletion holds it

A failed condition on 3 means another writer took revision r+1 first: read again and retry, with jittered
backoff, a bounded number of times (then StoreUnavailable, nothing written). A failed condition on 1 is the
caller's: read the key (strongly) and, unless it has meanwhile become what the write asks for, raise
VersionMismatch with its version, or KeyNotFound (also when 3 failed too: the key refuses the write as it is now).
A request the SDK resends never writes twice: each attempt carries its own ClientRequestToken, so DynamoDB
answers a resent one as it answered the first.

Why a namespace's writes are serialized: they take revisions one at a time, so revisions are dense, and a change
item r exists exactly when the namespace's revision is r or more (one transaction makes both or neither). A watch
therefore reads the revision R, then the change items up to R, and knows that a missing one is a change gone (its
history expired: RevisionCompacted), never one still on its way: watches lose nothing, with no clock and no
ordering guess. The cost: one namespace takes one write at a time, a read and a transaction each (some tens of
writes a second, fewer when many writers contend and retry, however many Lambdas write), and every write of a
namespace goes through its one item. Namespaces are independent: spread write-hot data over several.

Reads are strongly consistent and read the namespace item first: what a read returns reflects at least every
change up to the revision it reports, so "read, then watch from revision + 1" misses nothing. Expired keys and
changes read as absent from their expiry on (`expires_at_ms`; a change's `purge_at`, the namespace's history_ms
after it); DynamoDB's TTL deletes their items later (`purge_at`, usually within days).

A restore or a deletion holds the namespace (`busy`, `busy_token`, `busy_since` on its item) while it runs, since
both write many items outside transactions: writes wait for the hold (then StoreUnavailable), and a namespace
being deleted reads as missing. A restore writes its change items before its entries and moves the revision last,
so whatever a failed one leaves is above the revision, where the next restore finds and removes it. A hold older
than BUSY_ABANDONED_MS lost its holder (a process that died) and is taken over: a deletion by whoever deletes or
creates the namespace again, a restore by another restore or a deletion.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import time
import uuid
from datetime import UTC, datetime

from pynamodb.exceptions import DeleteError, DoesNotExist, PutError, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    InvalidArgument,
    KeyNotFound,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    RevisionCompacted,
    StoreUnavailable,
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
)

from ..kv.api import KeyValueStore
from ..model import Page
from .queue_index import BACKOFF_S, MAX_BACKOFF_S, is_conditional, raced

log = logging.getLogger("tidemq.serverless")
NAMESPACE = "namespace"  # the hash key of every `kv_namespaces` item: one partition, listed in name order
RESTORING, DELETING = "restoring", "deleting"  # what may hold a namespace (`busy`)
BUSY_ABANDONED_MS = 15 * 60_000
"""A hold older than this lost its holder: no Lambda invocation runs longer."""
WRITE_ATTEMPTS = 64
"""Tries of a write racing other writers of its namespace (its backoff doubles up to MAX_BACKOFF_S: 30 s at most)."""
WAIT_POLL_S = 0.1
"""How often a waiting watch reads its namespace's revision."""
EXAMINED_PER_WATCH = 5 * MAX_PAGE
"""Changes a filtered watch reads per call at most, matching or not (the next call goes on from there)."""
CONDITION_FAILED = "ConditionalCheckFailed"
ENTRY_ITEM, NAMESPACE_ITEM = 0, 2
"""Where a write's items are in its transaction: pynamodb sends deletes and puts (the entry, then the change)
before updates (the namespace), and cancellation reasons come in that order."""


class ServerlessKeyValueStore(KeyValueStore):
    """The KV namespaces of a `ServerlessMessageStore`, on its DynamoDB tables and connection; any number of
    processes use the same namespaces at once."""

    def __init__(self, store) -> None:
        self.tables = store.tables
        self._namespaces = store.tables.kv_namespaces
        self._entries = store.tables.kv_entries
        self._changes = store.tables.kv_changes
        _ = self.tables.connection.client  # made now, not inside the first write (after its expiry is set)

    # ---- namespaces ------------------------------------------------------------------------------

    def create_namespace(self, config: NamespaceConfig) -> NamespaceConfig:
        """One conditional PutItem (a namespace whose deletion was abandoned is deleted first)."""
        check_config(config)
        created = dataclasses.replace(config, created_at=clock.now_ms())
        namespaces = self._namespaces
        fresh = namespaces(NAMESPACE, created.name, config=_config_json(created), revision=0)
        try:
            fresh.save(condition=namespaces.name.does_not_exist())
            return created
        except PutError as error:
            if not is_conditional(error):
                raise
        item = self._item(created.name)
        if item is None or item.busy != DELETING or not _abandoned(item):
            raise NamespaceExists(created.name)
        token = self._hold(item, DELETING, NamespaceExists(created.name))
        self._purge(created.name)
        try:
            fresh.save(condition=namespaces.busy_token == token)
        except PutError as error:
            if is_conditional(error):
                raise NamespaceExists(created.name) from None
            raise
        return created

    def get_namespace(self, name: str) -> NamespaceConfig:
        return _config_of(self._namespace(name))

    def list_namespaces(self, after: str | None = None, limit: int = 100) -> Page[NamespaceStatus]:
        """One Query of the namespaces' partition, in name order (namespaces being deleted left out). Safe against
        concurrent deletes: each item holds the namespace's settings and revision, so nothing is read per namespace
        after the Query (where a namespace deleted meanwhile would raise NamespaceNotFound): one deleted during the
        listing is listed as it was or left out, and the next page starts after a name, whether it is still there."""
        check_limit(limit)
        if after is not None:
            check_namespace(after)
        namespaces = self._namespaces
        condition = namespaces.name > after if after is not None else None
        found: list[NamespaceStatus] = []
        for item in namespaces.query(NAMESPACE, condition, consistent_read=True, page_size=limit + 1):
            if item.busy == DELETING:
                continue
            if len(found) == limit:
                return Page(found, found[-1].name)
            found.append(NamespaceStatus(_config_of(item), int(item.revision)))
        return Page(found, None)

    def delete_namespace(self, name: str) -> None:
        """Hold the namespace (from then on no write lands and it reads as missing), delete its entries and
        changes (Query, BatchWriteItem), then its item."""
        check_namespace(name)
        item = self._item(name)
        if item is None or (item.busy == DELETING and not _abandoned(item)):
            raise NamespaceNotFound(name)
        if item.busy == RESTORING and not _abandoned(item):
            raise StoreUnavailable(f"KV namespace {name!r} is being restored: delete it once the restore has ended")
        token = self._hold(item, DELETING, NamespaceNotFound(name))
        self._purge(name)
        try:
            self._namespaces(NAMESPACE, name).delete(condition=self._namespaces.busy_token == token)
        except DeleteError as error:
            if not is_conditional(error):  # else a create took the abandoned deletion over: it is done
                raise

    def revision(self, namespace: str) -> int:
        return int(self._namespace(namespace).revision)

    # ---- keys ------------------------------------------------------------------------------------

    def get(self, namespace: str, key: str) -> Read:
        """Two strongly consistent GetItems: the namespace's revision, then the key."""
        check_key(key)
        revision = int(self._namespace(namespace).revision)
        return Read(self._entry(namespace, key, clock.now_ms()), revision)

    def get_many(self, namespace: str, keys: list[str]) -> EntryPage:
        """The namespace's revision, then one strongly consistent BatchGetItem per 100 keys."""
        if len(keys) > MAX_PAGE:
            raise InvalidArgument(f"a batch get asks for at most {MAX_PAGE} keys, not {len(keys)}")
        for key in keys:
            check_key(key)
        wanted = sorted(set(keys))
        revision = int(self._namespace(namespace).revision)
        now = clock.now_ms()
        items = self._entries.batch_get([(namespace, key) for key in wanted], consistent_read=True) if wanted else []
        found = [entry for entry in map(_entry_of, items) if entry.live(now)]
        return EntryPage(sorted(found, key=lambda entry: entry.key), revision)

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
        check_key(key)
        check_value(value)
        check_ttl(ttl_ms)
        if create_only and expected_version is not None:
            raise InvalidArgument("a put is either create-only or conditional on a version, not both")
        check_namespace(namespace)
        return self._write(namespace, key, value, ttl_ms, expected_version, create_only)

    def delete(self, namespace: str, key: str, *, expected_version: int | None = None) -> Written:
        check_key(key)
        check_namespace(namespace)
        return self._write(namespace, key, None, None, expected_version, False)

    def scan(self, namespace: str, prefix: str = "", after: str | None = None, limit: int = 100) -> EntryPage:
        """The namespace's revision, then one Query of its keys from `after` (or from `prefix`) on, in key order
        (DynamoDB's: UTF-8 bytes, which is code point order), stopping at the first key past the prefix."""
        check_limit(limit)
        if prefix:
            check_key(prefix)
        if after is not None:
            check_key(after)
        revision = int(self._namespace(namespace).revision)
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
        """The namespace's revision R, then one Query of its change items from `from_revision` to R; with nothing
        there yet (or only changes the filter leaves out), the revision again every WAIT_POLL_S until `wait_s`
        has passed."""
        check_limit(limit)
        if isinstance(from_revision, bool) or not isinstance(from_revision, int) or from_revision < 1:
            raise InvalidArgument(f"a watch starts at revision 1 or later, not {from_revision!r}")
        if key is not None:
            check_key(key)
        if prefix:
            check_key(prefix)
        check_namespace(namespace)
        deadline = time.monotonic() + max(wait_s, 0.0)
        while True:
            revision = int(self._namespace(namespace).revision)
            changes, next_revision = [], from_revision
            if from_revision <= revision:
                changes, next_revision = self._changes_from(namespace, from_revision, revision, key, prefix, limit)
            remaining = deadline - time.monotonic()
            if changes or remaining <= 0:
                return ChangePage(changes, revision, next_revision)
            if next_revision <= revision:  # stopped before the end (a gap, or enough read): go on at once
                from_revision = next_revision
                continue
            from_revision = next_revision
            time.sleep(min(WAIT_POLL_S, remaining))

    def _changes_from(
        self, namespace: str, first: int, last: int, key: str | None, prefix: str | None, limit: int
    ) -> tuple[list[Change], int]:
        """The changes [first, last] that match, in revision order, and the revision after the last one read.
        RevisionCompacted when the first change there is not the first after `first` - 1, or there is none. A
        later gap (a change expired before an older one) ends the page, so the next call reports it."""
        filtered = key is not None or prefix is not None
        page_size = MAX_PAGE if filtered else limit
        condition = self._changes.revision.between(first, last)
        now, changes, size, examined, previous = clock.now_ms(), [], 0, 0, None
        for item in self._changes.query(namespace, condition, consistent_read=True, page_size=page_size):
            if item.purge_at.timestamp() * 1000 <= now:
                continue  # past the namespace's history: gone, as if DynamoDB had deleted it already
            change = _change_of(item)
            if previous is None and change.previous >= first:
                raise RevisionCompacted(namespace, first, change.revision)
            if previous is not None and change.previous != previous:
                break
            if changes and size + len(change.value) > MAX_PAGE_BYTES:
                break
            if examined == EXAMINED_PER_WATCH:
                break
            examined, previous = examined + 1, change.revision
            if (key is None or change.key == key) and (prefix is None or change.key.startswith(prefix)):
                changes.append(change)
                size += len(change.value)
                if len(changes) == limit:  # full: no need to read (maybe a page more) to find so
                    break
        if previous is None:
            raise RevisionCompacted(namespace, first, last + 1)
        return changes, previous + 1

    # ---- snapshots -------------------------------------------------------------------------------

    def restore(self, snapshot: Snapshot, namespace: str | None = None, *, append: bool = False) -> int:
        """Hold the namespace, write a change item per entry, then the entries (BatchWriteItem both), then set the
        revision and release the namespace in one conditional UpdateItem. The first part of an import creates the
        namespace if missing and needs it at revision 0 (else NamespaceNotEmpty); a later one (`append`) goes above
        its revision (`restorable`). A part that fails deletes what it wrote (so does the next part, of what
        a part that died left: changes above the revision, and their keys if still at those versions)."""
        name = check_namespace(namespace if namespace is not None else snapshot.config.name)
        config = check_config(dataclasses.replace(snapshot.config, name=name))
        restorable(snapshot.entries, 0)  # bad keys or values refuse the import before anything is made
        item = self._item(name)
        if item is None and not append:
            with contextlib.suppress(NamespaceExists):  # made meanwhile: restored into if still empty
                self.create_namespace(config)
            item = self._item(name)
        if item is None or item.busy == DELETING:
            raise NamespaceNotFound(name)
        if item.busy is not None and not _abandoned(item):
            raise StoreUnavailable(f"KV namespace {name!r} is being restored already: send this part once it is done")
        revision = int(item.revision)
        if not append and revision != 0:
            raise NamespaceNotEmpty(name)
        entries = restorable(snapshot.entries, revision)
        namespaces = self._namespaces
        moved = (
            StoreUnavailable(f"KV namespace {name!r} was written to as this part began: send it again")
            if append
            else NamespaceNotEmpty(name)
        )
        token = self._hold(item, RESTORING, moved, namespaces.revision == revision)
        previous = revision
        try:
            self._remove_above(name, revision)
            purge_at = _purge_time(clock.now_ms() + _config_of(item).history_ms)
            with self._changes.batch_write() as writer:  # first: every entry written has its change item
                for entry in entries:
                    version, expires = entry.version, entry.expires_at_ms
                    change = Change(version, previous, ChangeKind.PUT, entry.key, entry.value, version, expires)
                    writer.save(self._change_item(name, change, purge_at))
                    previous = version
            with self._entries.batch_write() as writer:
                for entry in entries:
                    writer.save(self._entry_item(name, entry))
        except Exception:
            self._abandon_restore(name, token, revision)
            raise
        self._release(name, token, previous)
        return len(entries)

    def _abandon_restore(self, name: str, token: str, revision: int) -> None:
        """Undo a failed restore part as far as possible (what is left, the next part removes)."""
        try:
            self._remove_above(name, revision)
            self._release(name, token, revision)
        except Exception:  # the hold stays: BUSY_ABANDONED_MS from now it can be taken over
            log.warning("undoing the failed restore of KV namespace %r failed", name, exc_info=True)

    def _remove_above(self, name: str, revision: int) -> None:
        """Delete what a restore part wrote above the namespace's revision `revision`, which no reader relies on:
        its change items, and the keys they name that are still at a version above it (at revision 0: all)."""
        if revision == 0:
            self._purge(name)
            return
        changes, entries = self._changes, self._entries
        above = list(changes.query(name, changes.revision > revision, consistent_read=True))
        for key in {item.key for item in above}:
            try:
                entries(name, key).delete(condition=entries.version > revision)
            except DeleteError as error:
                if not is_conditional(error):
                    raise
        with changes.batch_write() as writer:
            for item in above:
                writer.delete(item)

    # ---- the write path --------------------------------------------------------------------------

    def _write(
        self,
        namespace: str,
        key: str,
        value: bytes | None,
        ttl_ms: int | None,
        expected: int | None,
        create_only: bool,
    ) -> Written:
        """Put `value` (None: delete) at the namespace's next revision (see the module docstring)."""
        entries, namespaces = self._entries, self._namespaces
        for attempt in range(WRITE_ATTEMPTS):
            item = self._namespace(namespace)
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
                purge_at = _purge_time(now + _config_of(item).history_ms)
                try:
                    with TransactWrite(
                        connection=self.tables.connection, client_request_token=uuid.uuid4().hex
                    ) as transaction:
                        if value is None:
                            transaction.delete(entries(namespace, key), condition=condition)
                        else:
                            entry = Entry(key, value, revision, change.expires_at_ms)
                            transaction.save(self._entry_item(namespace, entry), condition=condition)
                        transaction.save(self._change_item(namespace, change, purge_at))
                        transaction.update(
                            namespaces(NAMESPACE, namespace),
                            [namespaces.revision.set(revision)],
                            condition=(namespaces.revision == previous) & namespaces.busy.does_not_exist(),
                        )
                    return Written(key, revision, revision)
                except TransactWriteError as error:
                    reasons = [reason.code if reason else None for reason in error.cancellation_reasons or []]
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
        current = self._entry(namespace, key, clock.now_ms())
        found = None if current is None else current.version
        if create_only and current is not None:
            raise VersionMismatch(namespace, key, None, found)
        if expected is not None and found != expected:
            raise VersionMismatch(namespace, key, expected, found)
        if must_exist and current is None:
            raise KeyNotFound(namespace, key)

    # ---- items -----------------------------------------------------------------------------------

    def _item(self, name: str):
        """The namespace's item, strongly consistent (None: there is none)."""
        try:
            return self._namespaces.get(NAMESPACE, name, consistent_read=True)
        except DoesNotExist:
            return None

    def _namespace(self, name: str):
        """The namespace's item, or NamespaceNotFound (also while it is being deleted)."""
        check_namespace(name)
        item = self._item(name)
        if item is None or item.busy == DELETING:
            raise NamespaceNotFound(name)
        return item

    def _hold(self, item, busy: str, refused: Exception, condition=None) -> str:
        """Hold the namespace for a restore or a deletion, if it is still as `item` was read (raise `refused`
        otherwise); returns the hold's token."""
        namespaces, token = self._namespaces, uuid.uuid4().hex
        seen = (
            namespaces.busy_token.does_not_exist()
            if item.busy_token is None
            else namespaces.busy_token == item.busy_token
        )
        if condition is not None:
            seen = seen & condition
        try:
            namespaces(NAMESPACE, item.name).update(
                actions=[
                    namespaces.busy.set(busy),
                    namespaces.busy_token.set(token),
                    namespaces.busy_since.set(clock.now_ms()),
                ],
                condition=namespaces.name.exists() & seen,
            )
        except UpdateError as error:
            if is_conditional(error):
                raise refused from None
            raise
        return token

    def _release(self, name: str, token: str, revision: int) -> None:
        namespaces = self._namespaces
        actions = [
            namespaces.revision.set(revision),
            namespaces.busy.remove(),
            namespaces.busy_token.remove(),
            namespaces.busy_since.remove(),
        ]
        try:
            namespaces(NAMESPACE, name).update(actions=actions, condition=namespaces.busy_token == token)
        except UpdateError as error:
            if is_conditional(error):
                raise StoreUnavailable(f"KV namespace {name!r} was taken over while this restore held it") from None
            raise

    def _purge(self, name: str) -> None:
        """Delete every entry and change item of the namespace."""
        for model, range_key in ((self._entries, "key"), (self._changes, "revision")):
            items = model.query(name, consistent_read=True, attributes_to_get=["namespace", range_key])
            with model.batch_write() as writer:
                for item in items:
                    writer.delete(item)

    def _entry(self, namespace: str, key: str, now: int) -> Entry | None:
        try:
            entry = _entry_of(self._entries.get(namespace, key, consistent_read=True))
        except DoesNotExist:
            return None
        return entry if entry.live(now) else None

    def _entry_item(self, namespace: str, entry: Entry):
        expires = entry.expires_at_ms
        return self._entries(
            namespace,
            entry.key,
            value=entry.value,
            version=entry.version,
            expires_at_ms=expires,
            purge_at=None if expires is None else _purge_time(expires),
        )

    def _change_item(self, namespace: str, change: Change, purge_at: datetime):
        return self._changes(
            namespace,
            change.revision,
            previous=change.previous,
            kind=change.kind.value,
            key=change.key,
            value=change.value if change.kind is ChangeKind.PUT else None,
            version=change.version,
            expires_at_ms=change.expires_at_ms,
            purge_at=purge_at,
        )


def _entry_condition(entries, now: int, expected: int | None, create_only: bool, *, must_exist: bool):
    """The write's condition on the key's item: an expired item counts as absent."""
    if create_only:
        return entries.key.does_not_exist() | (entries.expires_at_ms <= now)
    live = entries.key.exists() & (entries.expires_at_ms.does_not_exist() | (entries.expires_at_ms > now))
    if expected is not None:
        return live & (entries.version == expected)
    return live if must_exist else None


def _abandoned(item) -> bool:
    return item.busy_since is not None and clock.now_ms() - int(item.busy_since) > BUSY_ABANDONED_MS


def _config_json(config: NamespaceConfig) -> str:
    return json.dumps(dataclasses.asdict(config))


def _config_of(item) -> NamespaceConfig:
    return NamespaceConfig(**json.loads(item.config))


def _entry_of(item) -> Entry:
    expires = item.expires_at_ms
    return Entry(item.key, item.value, int(item.version), None if expires is None else int(expires))


def _change_of(item) -> Change:
    expires = item.expires_at_ms
    return Change(
        revision=int(item.revision),
        previous=int(item.previous),
        kind=ChangeKind(item.kind),
        key=item.key,
        value=item.value or b"",
        version=int(item.version),
        expires_at_ms=None if expires is None else int(expires),
    )


LATEST_PURGE_S = int(datetime(9999, 12, 31, tzinfo=UTC).timestamp())
"""The latest `purge_at` a datetime holds (an imported key may expire later: DynamoDB's TTL ignores times that far
out anyway, and the key reads as absent from `expires_at_ms` on whatever its purge time)."""


def _purge_time(at_ms: int) -> datetime:
    """A `purge_at` (DynamoDB TTL, whole seconds): the second `at_ms` falls in, rounded up."""
    return datetime.fromtimestamp(min(-(-at_ms // 1000), LATEST_PURGE_S), tz=UTC)


__all__ = ["ServerlessKeyValueStore"]
