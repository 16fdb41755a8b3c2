"""KV namespaces over HTTP: the API's bodies to and from the engine's `KeyValueStore` (tidemq_store/kv), and the
conditions of a write read from HTTP's own headers.

    If-None-Match: *     create-only: 412 when the key exists
    If-Match: <version>  compare-and-set: 412 unless the key is at that version (`"7"` or `7`; ETags are quoted)

Every answer about a key carries its version and the namespace's revision; a 412 carries the version the key has
now (none: it does not exist).
"""

from __future__ import annotations

import re

from tidemq_protocol.api.kv import (
    KvChangeList,
    KvChangeView,
    KvEntryList,
    KvEntryView,
    KvImport,
    KvImported,
    KvPut,
    KvRead,
    KvWritten,
    NamespaceList,
    NamespaceSpec,
    NamespaceView,
)
from tidemq_protocol.errors import InvalidArgument, KeyNotFound, VersionMismatch
from tidemq_protocol.kv import NamespaceConfig, Snapshot
from tidemq_store import MessageStore

VERSION_TAG = re.compile(r'^\s*(?:W/)?"?([0-9]{1,16})"?\s*$')
IF_MATCH_PATTERN = '^\\s*(?:W/)?"?[0-9]{1,16}"?\\s*$'
"""What If-Match holds: a version, bare or as an ETag (quoted, or weak: `W/"7"`), as the API declares it."""
IF_NONE_MATCH_PATTERN = "^\\*$"


def expected_version(if_match: str | None) -> int | None:
    if if_match is None:
        return None
    matched = VERSION_TAG.fullmatch(if_match)
    if matched is None:
        raise InvalidArgument(f'If-Match {if_match!r} is not a version: send the key\'s version, e.g. "7"')
    return int(matched.group(1))


def create_only(if_none_match: str | None) -> bool:
    if if_none_match is None:
        return False
    if if_none_match.strip() != "*":
        raise InvalidArgument(f"If-None-Match {if_none_match!r} is not '*': only create-only puts are conditional so")
    return True


def namespace_view(config: NamespaceConfig, revision: int) -> NamespaceView:
    return NamespaceView(
        name=config.name, history_ms=config.history_ms, created_at=config.created_at, revision=revision
    )


def create_namespace(store: MessageStore, spec: NamespaceSpec) -> NamespaceView:
    created = store.kv.create_namespace(NamespaceConfig(spec.name, spec.history_ms))
    return namespace_view(created, store.kv.revision(created.name))


def describe_namespace(store: MessageStore, name: str) -> NamespaceView:
    return namespace_view(store.kv.get_namespace(name), store.kv.revision(name))


def list_namespaces(store: MessageStore, after: str | None, limit: int, visible) -> NamespaceList:
    """A page of namespaces with the revision each was listed at: nothing is read again per namespace, so one
    deleted meanwhile cannot fail the listing (`KeyValueStore.list_namespaces`)."""
    page = store.kv.list_namespaces(after, limit)
    shown = [namespace_view(listed.config, listed.revision) for listed in page if visible(listed.name)]
    return NamespaceList(namespaces=shown, next_after=page.next_after)


def get(store: MessageStore, namespace: str, key: str) -> KvRead:
    read = store.kv.get(namespace, key)
    if read.entry is None:
        raise KeyNotFound(namespace, key)
    return KvRead(**KvEntryView.of(read.entry).model_dump(), revision=read.revision)


def put(
    store: MessageStore, namespace: str, key: str, body: KvPut, if_match: str | None, if_none_match: str | None
) -> KvWritten:
    expected, only_new = expected_version(if_match), create_only(if_none_match)
    if expected is not None and only_new:  # a key at a version exists: both preconditions never hold (RFC 9110)
        current = store.kv.get(namespace, key).entry
        raise VersionMismatch(namespace, key, expected, None if current is None else current.version)
    written = store.kv.put(
        namespace, key, body.value_bytes(), expected_version=expected, create_only=only_new, ttl_ms=body.ttl_ms
    )
    return KvWritten(key=written.key, version=written.version, revision=written.revision)


def delete(store: MessageStore, namespace: str, key: str, if_match: str | None) -> KvWritten:
    written = store.kv.delete(namespace, key, expected_version=expected_version(if_match))
    return KvWritten(key=written.key, version=written.version, revision=written.revision)


def get_many(store: MessageStore, namespace: str, keys: list[str]) -> KvEntryList:
    page = store.kv.get_many(namespace, keys)
    return KvEntryList(entries=[KvEntryView.of(entry) for entry in page.entries], revision=page.revision)


def scan(store: MessageStore, namespace: str, prefix: str, after: str | None, limit: int) -> KvEntryList:
    page = store.kv.scan(namespace, prefix, after, limit)
    entries = [KvEntryView.of(entry) for entry in page.entries]
    return KvEntryList(entries=entries, revision=page.revision, next_after=page.next_after)


def watch(
    store: MessageStore,
    namespace: str,
    from_revision: int,
    key: str | None,
    prefix: str | None,
    limit: int,
    wait_ms: int,
) -> KvChangeList:
    page = store.kv.watch(namespace, from_revision, key=key, prefix=prefix, limit=limit, wait_s=wait_ms / 1000)
    changes = [KvChangeView.of(change) for change in page.changes]
    return KvChangeList(changes=changes, revision=page.revision, next_revision=page.next_revision)


def restore(store: MessageStore, namespace: str, request: KvImport) -> KvImported:
    snapshot = Snapshot(NamespaceConfig(namespace, request.history_ms), 0, [entry.entry() for entry in request.entries])
    written = store.kv.restore(snapshot, namespace, append=request.append)
    return KvImported(keys=written, revision=store.kv.revision(namespace))
