"""KV: namespaces of keys on the broker (the RIP-22 thread) over the HTTP API, as the engine's own records.

    kv = KV()
    kv.create_namespace("config")
    written = kv.put("config", "feature/dark-mode", b"on", create_only=True)
    kv.put("config", "feature/dark-mode", b"off", if_version=written.version)  # compare-and-set
    for change in kv.follow("config", written.revision + 1, prefix="feature/"):
        apply(change)

Pages and changes come back as `tidemq_protocol.kv` records (`EntryPage`, `ChangePage`, `Change`, `Snapshot`) with
values as bytes, so code written against an in-process `KeyValueStore` reads the same over HTTP; errors are the
engine's classes (`KeyNotFound`, `VersionMismatch` with `current`, `RevisionCompacted` with `oldest`).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tidemq_protocol import kv_snapshot as snapshot_file
from tidemq_protocol.api.kv import (
    KvChangeList,
    KvEntryList,
    KvImported,
    KvRead,
    KvWritten,
    NamespaceList,
    NamespaceView,
)
from tidemq_protocol.errors import (
    InvalidArgument,
    KeyNotFound,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    RevisionCompacted,
    VersionMismatch,
)
from tidemq_protocol.kv import (
    MAX_PAGE,
    Change,
    ChangePage,
    Entry,
    EntryPage,
    NamespaceConfig,
    Snapshot,
    check_key,
    check_namespace,
    check_value,
)
from tidemq_protocol.kv_snapshot import read_at_one_revision

from .api_client import ApiClient, every, model_of
from .client import segment

FOLLOW_WAIT_MS = 10_000
"""How long one long poll of `follow` waits for a change (the server caps it at TIDEMQ_MAX_GET_WAIT_MS, 20 s)."""
IMPORT_PART_BYTES = 3 * 1024 * 1024
"""Most JSON in one import request: half the gateway's 6 MiB body limit (TIDEMQ_MAX_REQUEST_BYTES), so a part is
never refused for its size."""
_ENTRY_JSON_OVERHEAD = 96  # the field names, quotes and numbers around one entry's key and value


@dataclass(frozen=True, slots=True)
class KeyValue:
    """A key as `KV.get` read it: its value (bytes), version and expiry, with the namespace's revision at the read
    (watch from `revision + 1` to see every later change to it)."""

    key: str
    value: bytes
    version: int
    revision: int
    expires_at_ms: int | None = None

    def entry(self) -> Entry:
        return Entry(self.key, self.value, self.version, self.expires_at_ms)


class KV(ApiClient):
    """Namespaces and their keys: read, write (unconditionally, create-only or compare-and-set), scan, watch, and
    export or import a whole namespace as a snapshot file (`tidemq_protocol.kv_snapshot`)."""

    # ---- namespaces ------------------------------------------------------------------------------

    def create_namespace(self, name: str, history_ms: int | None = None) -> NamespaceView:
        """Create a namespace (raises NamespaceExists). `history_ms`: how long the serverless backend keeps changes
        for watches [default: the server's, 7 days]."""
        spec: dict[str, Any] = {"name": check_namespace(name)}
        if history_ms is not None:
            spec["history_ms"] = history_ms
        with _completing(name):
            return model_of(NamespaceView, self._client.request("POST", "/v1/kv", json=spec))

    def describe_namespace(self, name: str) -> NamespaceView:
        """The namespace's settings and its revision now (raises NamespaceNotFound)."""
        with _completing(name):
            return self._get(NamespaceView, _namespace_path(name))

    def list_namespaces(self, *, after: str | None = None, limit: int = 100) -> NamespaceList:
        """One page of the namespaces this caller may see, in name order, after the name `after`."""
        return self._get(NamespaceList, "/v1/kv", after=after, limit=limit)

    def iter_namespaces(self, *, page_size: int = MAX_PAGE) -> Iterator[NamespaceView]:
        """Every namespace this caller may see, in name order, fetched a page at a time."""
        return every(lambda after: self.list_namespaces(after=after, limit=page_size), lambda page: page.namespaces)

    def delete_namespace(self, name: str) -> None:
        """Delete the namespace with every key and its history (raises NamespaceNotFound)."""
        with _completing(name):
            self._client.request("DELETE", _namespace_path(name))

    # ---- keys ------------------------------------------------------------------------------------

    def get(self, namespace: str, key: str) -> KeyValue:
        """The key as it is now; raises KeyNotFound when it does not exist or has expired."""
        check_key(key)  # a malformed key fails with the engine's own message, before any request
        with _completing(namespace, key):
            read = self._get(KvRead, _namespace_path(namespace, "entry"), key=key)
        return KeyValue(read.key, base64.b64decode(read.value), read.version, read.revision, read.expires_at_ms)

    def put(
        self,
        namespace: str,
        key: str,
        value: bytes | str,
        *,
        ttl_ms: int | None = None,
        if_version: int | None = None,
        create_only: bool = False,
    ) -> KvWritten:
        """Write the key (a str value as UTF-8), expiring `ttl_ms` from now if given. `create_only`: only if the key
        does not exist; `if_version`: only if it is at that version (compare-and-set). Otherwise nothing is written
        and VersionMismatch says the key's version now (`current`, None: absent)."""
        check_key(key)
        raw = check_value(value.encode() if isinstance(value, str) else bytes(value))
        body: dict[str, Any] = {"value": base64.b64encode(raw).decode("ascii")}
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        headers = _conditions(if_version, create_only)
        with _completing(namespace, key, if_version):
            response = self._client.request(
                "PUT", _namespace_path(namespace, "entry"), params={"key": key}, json=body, headers=headers
            )
        return model_of(KvWritten, response)

    def delete(self, namespace: str, key: str, *, if_version: int | None = None) -> KvWritten:
        """Delete the key: KeyNotFound if it does not exist, VersionMismatch if `if_version` is not its version.
        The answer's `version` is the revision the delete made."""
        check_key(key)
        headers = _conditions(if_version, create_only=False)
        with _completing(namespace, key, if_version):
            response = self._client.request(
                "DELETE", _namespace_path(namespace, "entry"), params={"key": key}, headers=headers
            )
        return model_of(KvWritten, response)

    def get_many(self, namespace: str, keys: Sequence[str]) -> EntryPage:
        """The keys of `keys` that exist (at most 1000 asked for), in key order, read at one revision."""
        with _completing(namespace):
            response = self._client.request("POST", _namespace_path(namespace, "batch-get"), json={"keys": list(keys)})
        return _entry_page(model_of(KvEntryList, response))

    def scan(self, namespace: str, prefix: str = "", after: str | None = None, limit: int = 100) -> EntryPage:
        """One page of the keys starting with `prefix`, in key order, after the key `after`; the page's
        `next_after` is where the next one starts (None: the scan is done)."""
        with _completing(namespace):
            page = self._get(KvEntryList, _namespace_path(namespace, "keys"), prefix=prefix, after=after, limit=limit)
        return _entry_page(page)

    def iter_scan(self, namespace: str, prefix: str = "", page_size: int = MAX_PAGE) -> Iterator[Entry]:
        """Every key starting with `prefix`, in key order, fetched a page at a time (each page is read at its own
        revision: for one revision's contents, `export`)."""
        return every(lambda after: self.scan(namespace, prefix, after, page_size), lambda page: page.entries)

    # ---- changes ---------------------------------------------------------------------------------

    def watch(
        self,
        namespace: str,
        from_revision: int,
        *,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = 100,
        wait_ms: int = 0,
    ) -> ChangePage:
        """One page of changes from `from_revision` on (to `key`, to keys under `prefix`, or all), in revision
        order, waiting up to `wait_ms` for one; ask again from the page's `next_revision`. RevisionCompacted
        when those changes are no longer kept: read the keys again and watch from the revision that read gave."""
        params = {"from_revision": from_revision, "key": key, "prefix": prefix, "limit": limit, "wait_ms": wait_ms}
        path = _namespace_path(namespace, "changes")
        with _completing(namespace, key, revision=from_revision):
            response = self._client.request(
                "GET",
                path,
                params={name: value for name, value in params.items() if value is not None},
                timeout_s=self._client.timeout_s + wait_ms / 1000,
            )
        page = model_of(KvChangeList, response)
        return ChangePage([change.change() for change in page.changes], page.revision, page.next_revision)

    def follow(
        self,
        namespace: str,
        from_revision: int,
        *,
        key: str | None = None,
        prefix: str | None = None,
        wait_ms: int = FOLLOW_WAIT_MS,
    ) -> Iterator[Change]:
        """Every change from `from_revision` on, in revision order, for as long as the caller iterates: long polls
        of `wait_ms` one after another, each from where the last one ended. Raises RevisionCompacted when the
        changes it is up to are no longer kept (the caller fell too far behind): read the keys again and follow
        from the revision that read returns."""
        revision = from_revision
        while True:
            page = self.watch(namespace, revision, key=key, prefix=prefix, limit=MAX_PAGE, wait_ms=wait_ms)
            yield from page.changes
            revision = page.next_revision

    # ---- snapshots -------------------------------------------------------------------------------

    def export(self, namespace: str, *, progress: Callable[[int], None] | None = None) -> Snapshot:
        """The namespace's contents at one revision, read over HTTP as `KeyValueStore.export` reads them
        (`tidemq_protocol.kv_snapshot.read_at_one_revision`). `progress` is told the keys read so far after each
        page."""
        view = self.describe_namespace(namespace)
        return read_at_one_revision(
            NamespaceConfig(view.name, view.history_ms, view.created_at),
            lambda: self.describe_namespace(namespace).revision,
            lambda after: self.scan(namespace, after=after, limit=MAX_PAGE),
            lambda revision: self.watch(namespace, revision, limit=MAX_PAGE),
            progress,
        )

    def export_to(self, namespace: str, target: str, *, progress: Callable[[int], None] | None = None) -> Snapshot:
        """`export` the namespace and write the snapshot to a file (`target`: a path, or s3://bucket/key)."""
        exported = self.export(namespace, progress=progress)
        snapshot_file.write(exported, target)
        return exported

    def import_snapshot(
        self, namespace: str, snapshot: Snapshot, *, progress: Callable[[int], None] | None = None
    ) -> KvImported:
        """Write a snapshot's keys, with their values, versions and expiry, into `namespace`: an empty one, or a
        missing one (made with the snapshot's history setting); else NamespaceNotEmpty. The keys go in version
        order, in parts the API takes (at most 1000 keys and IMPORT_PART_BYTES of JSON), each part after the first
        appended. `progress` is called with the number of keys written so far after each part. The answer counts
        every key written, with the namespace's revision after the last part (the snapshot's highest version)."""
        written, revision = 0, 0
        with _completing(namespace):
            for number, part in enumerate(_parts(sorted(snapshot.entries, key=lambda entry: entry.version))):
                body = {"entries": part, "history_ms": snapshot.config.history_ms, "append": number > 0}
                imported = model_of(
                    KvImported, self._client.request("POST", _namespace_path(namespace, "import"), json=body)
                )
                written, revision = written + imported.keys, imported.revision
                if progress is not None:
                    progress(written)
        return KvImported(keys=written, revision=revision)

    def import_from(self, namespace: str, source: str, *, progress: Callable[[int], None] | None = None) -> KvImported:
        """`import_snapshot` of the snapshot file at `source` (a path, or s3://bucket/key)."""
        return self.import_snapshot(namespace, snapshot_file.read(source), progress=progress)


def _namespace_path(namespace: str, *rest: str) -> str:
    """The path of a namespace's resource; a name no namespace can have fails here, with the engine's message."""
    return "/".join(("/v1/kv", segment(check_namespace(namespace)), *rest))


def _conditions(if_version: int | None, create_only: bool) -> dict[str, str]:
    """A conditional write as HTTP states it: `If-None-Match: *` (create-only), `If-Match: "<version>"` (an ETag)."""
    if if_version is not None and create_only:
        raise InvalidArgument("a write is create-only or conditional on a version, not both")
    if create_only:
        return {"if-none-match": "*"}
    if if_version is not None:
        return {"if-match": f'"{if_version}"'}
    return {}


def _entry_page(page: KvEntryList) -> EntryPage:
    return EntryPage([entry.entry() for entry in page.entries], page.revision, page.next_after)


def _parts(entries: list[Entry]) -> Iterator[list[dict[str, Any]]]:
    """Import entries (in version order) in parts of at most MAX_PAGE entries and IMPORT_PART_BYTES of JSON; an
    empty snapshot is one empty part (it still creates the namespace)."""
    part: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        line = {
            "key": entry.key,
            "value": base64.b64encode(entry.value).decode("ascii"),
            "version": entry.version,
            "expires_at_ms": entry.expires_at_ms,
        }
        length = len(json.dumps(entry.key)) + 4 * math.ceil(len(entry.value) / 3) + _ENTRY_JSON_OVERHEAD
        if part and (len(part) == MAX_PAGE or size + length > IMPORT_PART_BYTES):
            yield part
            part, size = [], 0
        part.append(line)
        size += length
    yield part


@contextmanager
def _completing(
    namespace: str, key: str | None = None, expected: int | None = None, *, revision: int | None = None
) -> Iterator[None]:
    """Completes an error the server raised about `namespace` (or `key`) with the attributes the engine's class
    carries in process (an error body holds only the class, the message and `current_version` or
    `oldest_revision`), so `error.current` of a VersionMismatch reads the same over HTTP as in process."""
    try:
        yield
    except (
        NamespaceNotFound,
        NamespaceExists,
        NamespaceNotEmpty,
        KeyNotFound,
        VersionMismatch,
        RevisionCompacted,
    ) as error:
        error.namespace = namespace
        if isinstance(error, KeyNotFound | VersionMismatch) and key is not None:
            error.key = key
        if isinstance(error, VersionMismatch):
            error.expected = expected
            error.current = error.current_version = getattr(error, "current_version", None)
        if isinstance(error, RevisionCompacted):
            error.revision = revision
            error.oldest = error.oldest_revision = getattr(error, "oldest_revision", None)
        raise


__all__ = ["KV", "KeyValue"]
