"""KV function: namespaces of keys on the broker (the RIP-22 thread; tidemq_store/kv). Each route says what the
caller must be allowed on the namespace (`Namespace:<name>` in a policy): Sub to read and watch it, Pub to write it,
Create and Delete for the namespace itself, Get (or Sub or Pub) to describe it."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import WithJsonSchema

from functions.api.auth import require, require_any, visible
from functions.api.errors import responses
from functions.api.resolver import lambda_entry, new_resolver
from functions.logic import kv
from functions.observability import metrics
from functions.store import get_store
from shared.settings import get_settings
from tidemq_protocol import acl
from tidemq_protocol.acl import Action
from tidemq_protocol.api.common import MAX_JSON_INTEGER
from tidemq_protocol.api.kv import (
    KvBatchGet,
    KvChangeList,
    KvEntryList,
    KvImport,
    KvImported,
    KvKey,
    KvPrefix,
    KvPut,
    KvRead,
    KvWritten,
    NamespaceList,
    NamespaceName,
    NamespaceSpec,
    NamespaceView,
)
from tidemq_protocol.kv import MAX_PAGE

app = new_resolver()
LIMITS = get_settings()

NamespaceInPath = Annotated[NamespaceName, Path()]
KeyInQuery = Annotated[KvKey, Query(description="The key: 1-1024 printable ASCII characters.")]
# Optional headers: declared as strings (a header is absent or a string, never null), with their patterns.
IF_MATCH_DOC = 'Compare-and-set: write only if the key is at this version (`"7"`); else 412.'
IF_NONE_MATCH_DOC = "`*`: create only; 412 if the key exists."
IfMatch = Annotated[
    str | None,
    Header(alias="if-match", pattern=kv.IF_MATCH_PATTERN, description=IF_MATCH_DOC),
    WithJsonSchema({"type": "string", "pattern": kv.IF_MATCH_PATTERN, "description": IF_MATCH_DOC}),
]
IfNoneMatch = Annotated[
    str | None,
    Header(alias="if-none-match", pattern=kv.IF_NONE_MATCH_PATTERN, description=IF_NONE_MATCH_DOC),
    WithJsonSchema({"type": "string", "enum": ["*"], "description": IF_NONE_MATCH_DOC}),
]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Most items to return.")]
WaitMs = Annotated[
    int, Query(ge=0, le=LIMITS.max_get_wait_ms, description="Long polling: wait up to this long for a change.")
]


# ---- namespaces ----------------------------------------------------------------------------------


@app.post("/v1/kv", status_code=201, tags=["kv"], responses=responses(415, 400, 409, ok=201))
def create_namespace(spec: NamespaceSpec) -> NamespaceView:
    require((acl.namespace(spec.name), Action.CREATE))
    return kv.create_namespace(get_store(), spec)


@app.get("/v1/kv", tags=["kv"], responses=responses())
def list_namespaces(
    after: Annotated[NamespaceName | None, Query(description="Return namespaces after this name (paging).")] = None,
    limit: Limit = 100,
) -> NamespaceList:
    """A page of the namespaces the caller may see (List or Get); `next_after` pages through all of them."""
    return kv.list_namespaces(get_store(), after, limit, lambda name: visible(acl.namespace(name)))


@app.get("/v1/kv/<namespace>", tags=["kv"], responses=responses(404))
def describe_namespace(namespace: NamespaceInPath) -> NamespaceView:
    require_any(acl.namespace(namespace), Action.GET, Action.SUB, Action.PUB)
    return kv.describe_namespace(get_store(), namespace)


@app.delete("/v1/kv/<namespace>", tags=["kv"], responses=responses(404, ok=204))
def delete_namespace(namespace: NamespaceInPath):
    """Delete the namespace with every key and its history."""
    require((acl.namespace(namespace), Action.DELETE))
    get_store().kv.delete_namespace(namespace)
    return Response(204)


# ---- keys ------------------------------------------------------------------------------------------


@app.get("/v1/kv/<namespace>/entry", tags=["kv"], responses=responses(400, 404))
def get_key(namespace: NamespaceInPath, key: KeyInQuery) -> KvRead:
    """The key's value (base64), version and expiry, with the namespace's revision; 404 when it does not exist."""
    require((acl.namespace(namespace), Action.SUB))
    return kv.get(get_store(), namespace, key)


@app.put("/v1/kv/<namespace>/entry", tags=["kv"], responses=responses(415, 400, 404, 412))
def put_key(
    namespace: NamespaceInPath,
    key: KeyInQuery,
    body: KvPut,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> KvWritten:
    """Write the key: always, create-only (`If-None-Match: *`) or compare-and-set (`If-Match: "<version>"`)."""
    require((acl.namespace(namespace), Action.PUB))
    written = kv.put(get_store(), namespace, key, body, if_match, if_none_match)
    metrics.add_metric(name="KvWrites", unit=MetricUnit.Count, value=1)
    return written


@app.delete("/v1/kv/<namespace>/entry", tags=["kv"], responses=responses(400, 404, 412))
def delete_key(namespace: NamespaceInPath, key: KeyInQuery, if_match: IfMatch = None) -> KvWritten:
    """Delete the key (404 if it does not exist; 412 if `If-Match` names another version)."""
    require((acl.namespace(namespace), Action.PUB))
    written = kv.delete(get_store(), namespace, key, if_match)
    metrics.add_metric(name="KvWrites", unit=MetricUnit.Count, value=1)
    return written


@app.post("/v1/kv/<namespace>/batch-get", tags=["kv"], responses=responses(415, 400, 404))
def batch_get(namespace: NamespaceInPath, request: KvBatchGet) -> KvEntryList:
    """The keys asked for that exist, in key order."""
    require((acl.namespace(namespace), Action.SUB))
    return kv.get_many(get_store(), namespace, request.keys)


@app.get("/v1/kv/<namespace>/keys", tags=["kv"], responses=responses(400, 404))
def scan(
    namespace: NamespaceInPath,
    prefix: Annotated[KvPrefix, Query(description="Only keys starting with this.")] = "",
    after: Annotated[KvKey | None, Query(description="Start after this key (a page's `next_after`).")] = None,
    limit: Limit = 100,
) -> KvEntryList:
    """Keys in key order, a page at a time (at most 3 MiB of values past the first)."""
    require((acl.namespace(namespace), Action.SUB))
    return kv.scan(get_store(), namespace, prefix, after, limit)


@app.get("/v1/kv/<namespace>/changes", tags=["kv"], responses=responses(400, 404, 410))
def watch(
    namespace: NamespaceInPath,
    from_revision: Annotated[int, Query(ge=1, le=MAX_JSON_INTEGER, description="The first revision to return.")],
    key: Annotated[KvKey | None, Query(description="Only this key's changes.")] = None,
    prefix: Annotated[KvPrefix | None, Query(description="Only changes to keys starting with this.")] = None,
    limit: Limit = 100,
    wait_ms: WaitMs = 0,
) -> KvChangeList:
    """Changes from `from_revision` on, in revision order; call again from `next_revision`. 410 when the changes
    asked for are no longer kept: read the keys again and watch from the revision that read returns."""
    require((acl.namespace(namespace), Action.SUB))
    return kv.watch(get_store(), namespace, from_revision, key, prefix, limit, wait_ms)


@app.post("/v1/kv/<namespace>/import", tags=["kv"], responses=responses(415, 400, 404, 409))
def import_snapshot(namespace: NamespaceInPath, request: KvImport) -> KvImported:
    """Write a snapshot's keys (with their versions) into an empty namespace, made if missing; a large snapshot goes
    in parts, in version order, each after the first with `append`."""
    require((acl.namespace(namespace), Action.PUB), (acl.namespace(namespace), Action.CREATE))
    return kv.restore(get_store(), namespace, request)


lambda_handler = lambda_entry(app)
