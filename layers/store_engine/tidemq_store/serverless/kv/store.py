"""`ServerlessKeyValueStore`: the KeyValueStore interface (tidemq_store/kv/api.py) over the serverless backend's
three KV tables, each argument checked here and the work done by the module that owns the table (the package's
docstring).
"""

from __future__ import annotations

from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.kv import (
    ChangePage,
    EntryPage,
    NamespaceConfig,
    NamespaceStatus,
    Read,
    Snapshot,
    Written,
    check_key,
    check_namespace,
    check_ttl,
    check_value,
)

from ...kv.api import KeyValueStore
from ...model import Page
from ..tables import Tables
from .changes import Changes
from .keys import Keys
from .namespaces import Namespaces, config_of
from .restore import Restorer


class ServerlessKeyValueStore(KeyValueStore):
    """The KV namespaces of a `ServerlessMessageStore`, on its DynamoDB tables and connection; any number of
    processes use the same namespaces at once."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.namespaces = Namespaces(tables)
        self.changes = Changes(tables, self.namespaces)
        self.keys = Keys(tables, self.namespaces, self.changes)
        self.restorer = Restorer(tables, self.namespaces, self.keys, self.changes)
        _ = self.tables.connection.client  # made now, not inside the first write (after its expiry is set)

    # ---- namespaces (namespaces.py) --------------------------------------------------------------

    def create_namespace(self, config: NamespaceConfig) -> NamespaceConfig:
        return self.namespaces.create(config)

    def get_namespace(self, name: str) -> NamespaceConfig:
        return config_of(self.namespaces.live(name))

    def list_namespaces(self, after: str | None = None, limit: int = 100) -> Page[NamespaceStatus]:
        return self.namespaces.list(after, limit)

    def delete_namespace(self, name: str) -> None:
        self.namespaces.delete(name)

    def revision(self, namespace: str) -> int:
        return int(self.namespaces.live(namespace).revision)

    # ---- keys (keys.py) --------------------------------------------------------------------------

    def get(self, namespace: str, key: str) -> Read:
        return self.keys.get(namespace, key)

    def get_many(self, namespace: str, keys: list[str]) -> EntryPage:
        return self.keys.get_many(namespace, keys)

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
        return self.keys.write(namespace, key, value, ttl_ms, expected_version, create_only)

    def delete(self, namespace: str, key: str, *, expected_version: int | None = None) -> Written:
        check_key(key)
        check_namespace(namespace)
        return self.keys.write(namespace, key, None, None, expected_version, False)

    def scan(self, namespace: str, prefix: str = "", after: str | None = None, limit: int = 100) -> EntryPage:
        return self.keys.scan(namespace, prefix, after, limit)

    # ---- watches (changes.py) and snapshots (restore.py) -----------------------------------------

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
        return self.changes.watch(namespace, from_revision, key=key, prefix=prefix, limit=limit, wait_s=wait_s)

    def restore(self, snapshot: Snapshot, namespace: str | None = None, *, append: bool = False) -> int:
        return self.restorer.restore(snapshot, namespace, append=append)


__all__ = ["ServerlessKeyValueStore"]
