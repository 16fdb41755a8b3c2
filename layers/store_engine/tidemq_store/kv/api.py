"""`KeyValueStore`: the KV namespaces of a store (`MessageStore.kv`), the one API every backend serves.

    embedded     embedded/kv.py: each write goes to the namespace's topic first (commit log, tiered and compacted
                 like any topic), then into RocksDB; watches read the topic
    serverless   serverless/kv.py: DynamoDB conditional transactions; changes recorded in a table of their own

Consistency, on both: a write is acknowledged once readers see it; compare-and-set and create-only puts are atomic;
watches see every change once, in revision order, until the namespace's history no longer holds it
(RevisionCompacted). `export` is consistent (one revision's contents) on both, by the same generic means: a scan
and then the changes that happened during it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from tidemq_protocol.kv import (
    MAX_PAGE,
    ChangePage,
    EntryPage,
    NamespaceConfig,
    NamespaceStatus,
    Read,
    Snapshot,
    Written,
)
from tidemq_protocol.kv_snapshot import read_at_one_revision

from ..model import Page


class KeyValueStore(ABC):
    # ---- namespaces ------------------------------------------------------------------------------

    @abstractmethod
    def create_namespace(self, config: NamespaceConfig) -> NamespaceConfig:
        """Create a namespace (NamespaceExists); returns it with `created_at` set."""

    @abstractmethod
    def get_namespace(self, name: str) -> NamespaceConfig:
        """The namespace's settings, or NamespaceNotFound."""

    @abstractmethod
    def list_namespaces(self, after: str | None = None, limit: int = 100) -> Page[NamespaceStatus]:
        """Namespaces in name order, from after `after`, each with its revision. Safe against concurrent deletes:
        each namespace's settings and revision are read in one go, so one deleted meanwhile is listed as it was or
        left out, never the cause of an error; the next page starts after a name (there or not), so none is listed
        twice."""

    @abstractmethod
    def delete_namespace(self, name: str) -> None:
        """Delete a namespace with every key and its history (NamespaceNotFound)."""

    @abstractmethod
    def revision(self, namespace: str) -> int:
        """The namespace's revision now: that of its last write (0: none yet)."""

    # ---- keys ------------------------------------------------------------------------------------

    @abstractmethod
    def get(self, namespace: str, key: str) -> Read:
        """The key as it is (None: absent or expired), with the revision it was read at."""

    @abstractmethod
    def get_many(self, namespace: str, keys: list[str]) -> EntryPage:
        """The keys of `keys` that exist, in key order (at most MAX_PAGE keys asked for)."""

    @abstractmethod
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
        """Write the key. `create_only`: only if it does not exist; `expected_version`: only if it is at that
        version. Otherwise VersionMismatch (with the current version) and nothing changes."""

    @abstractmethod
    def delete(self, namespace: str, key: str, *, expected_version: int | None = None) -> Written:
        """Delete the key (KeyNotFound if it does not exist; VersionMismatch if not at `expected_version`)."""

    @abstractmethod
    def scan(self, namespace: str, prefix: str = "", after: str | None = None, limit: int = 100) -> EntryPage:
        """Keys starting with `prefix`, in key order, from after `after`: at most `limit`, and at most
        MAX_PAGE_BYTES of values past the first."""

    @abstractmethod
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
        """Changes from `from_revision` on (to `key`, or to keys under `prefix`, or all), in revision order; with
        none yet, wait up to `wait_s` for one. RevisionCompacted when changes from `from_revision` are gone."""

    # ---- snapshots -------------------------------------------------------------------------------

    def export(self, namespace: str) -> Snapshot:
        """The namespace's contents at one revision (`read_at_one_revision`)."""
        return read_at_one_revision(
            self.get_namespace(namespace),
            lambda: self.revision(namespace),
            lambda after: self.scan(namespace, after=after, limit=MAX_PAGE),
            lambda revision: self.watch(namespace, revision, limit=MAX_PAGE),
        )

    @abstractmethod
    def restore(self, snapshot: Snapshot, namespace: str | None = None, *, append: bool = False) -> int:
        """Import a snapshot into namespace `namespace` (default: the snapshot's), created with the snapshot's
        settings if missing, else it must be empty (NamespaceNotEmpty). Keys keep their values, versions and
        expiry, and are written in version order (`model.restorable` says what becomes of other lists); the
        namespace's revision becomes the highest version. With `append` (a later part of one import, sent in
        parts) the namespace may hold keys, and the part goes above its revision. Returns how many keys it wrote."""

    def close(self) -> None:  # noqa: B027 (a backend with nothing to release keeps the default)
        """Release what the KV layer holds (its store closes it)."""


__all__ = ["KeyValueStore"]
