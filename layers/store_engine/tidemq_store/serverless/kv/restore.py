"""A snapshot imported into a namespace: under the namespace's hold, every entry's change item first, then the
entries, then the revision moved and the hold released; a part that fails removes what it wrote (and what a
part that died left, above the revision, the next part removes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging

from pynamodb.exceptions import DeleteError

from tidemq_protocol import clock
from tidemq_protocol.errors import NamespaceExists, NamespaceNotEmpty, NamespaceNotFound, StoreUnavailable
from tidemq_protocol.kv import Change, ChangeKind, Snapshot, check_config, check_namespace, restorable

from ..conditions import is_conditional
from ..tables import Tables
from .changes import Changes, purge_time
from .keys import Keys
from .namespaces import DELETING, RESTORING, Namespaces, abandoned, config_of

log = logging.getLogger("tidemq.serverless")


class Restorer:
    """Restores into the namespaces of one set of tables."""

    def __init__(self, tables: Tables, namespaces: Namespaces, keys: Keys, changes: Changes) -> None:
        self.tables, self.namespaces, self.keys, self.changes = tables, namespaces, keys, changes
        self._entries, self._changes = tables.kv_entries, tables.kv_changes

    def restore(self, snapshot: Snapshot, namespace: str | None = None, *, append: bool = False) -> int:
        """Hold the namespace, write a change item per entry, then the entries (BatchWriteItem both), then set the
        revision and release the namespace in one conditional UpdateItem. The first part of an import creates the
        namespace if missing and needs it at revision 0 (else NamespaceNotEmpty); a later one (`append`) goes above
        its revision (`restorable`). A part that fails deletes what it wrote (so does the next part, of what
        a part that died left: changes above the revision, and their keys if still at those versions)."""
        name = check_namespace(namespace if namespace is not None else snapshot.config.name)
        config = check_config(dataclasses.replace(snapshot.config, name=name))
        restorable(snapshot.entries, 0)  # bad keys or values refuse the import before anything is made
        item = self.namespaces.item(name)
        if item is None and not append:
            with contextlib.suppress(NamespaceExists):  # made meanwhile: restored into if still empty
                self.namespaces.create(config)
            item = self.namespaces.item(name)
        if item is None or item.busy == DELETING:
            raise NamespaceNotFound(name)
        if item.busy is not None and not abandoned(item):
            raise StoreUnavailable(f"KV namespace {name!r} is being restored already: send this part once it is done")
        revision = int(item.revision)
        if not append and revision != 0:
            raise NamespaceNotEmpty(name)
        entries = restorable(snapshot.entries, revision)
        moved = (
            StoreUnavailable(f"KV namespace {name!r} was written to as this part began: send it again")
            if append
            else NamespaceNotEmpty(name)
        )
        token = self.namespaces.hold(item, RESTORING, moved, self.tables.kv_namespaces.revision == revision)
        previous = revision
        try:
            self._remove_above(name, revision)
            purge_at = purge_time(clock.now_ms() + config_of(item).history_ms)
            with self._changes.batch_write() as writer:  # first: every entry written has its change item
                for entry in entries:
                    version, expires = entry.version, entry.expires_at_ms
                    change = Change(version, previous, ChangeKind.PUT, entry.key, entry.value, version, expires)
                    writer.save(self.changes.item(name, change, purge_at))
                    previous = version
            with self._entries.batch_write() as writer:
                for entry in entries:
                    writer.save(self.keys.item(name, entry))
        except Exception:
            self._abandon(name, token, revision)
            raise
        self.namespaces.release(name, token, previous)
        return len(entries)

    def _abandon(self, name: str, token: str, revision: int) -> None:
        """Undo a failed restore part as far as possible (what is left, the next part removes)."""
        try:
            self._remove_above(name, revision)
            self.namespaces.release(name, token, revision)
        except Exception:  # the hold stays: BUSY_ABANDONED_MS from now it can be taken over
            log.warning("undoing the failed restore of KV namespace %r failed", name, exc_info=True)

    def _remove_above(self, name: str, revision: int) -> None:
        """Delete what a restore part wrote above the namespace's revision `revision`, which no reader relies on:
        its change items, and the keys they name that are still at a version above it (at revision 0: all)."""
        if revision == 0:
            self.namespaces.purge(name)
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


__all__ = ["Restorer"]
