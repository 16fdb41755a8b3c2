"""The HTTP API's bodies for KV namespaces (`tidemq_protocol.kv`)."""

from __future__ import annotations

import base64
from typing import Annotated

from pydantic import (
    Field,
    StrictBool,
    WithJsonSchema,
)

from tidemq_protocol import kv as kv_model

from .common import BASE64_PATTERN, MAX_JSON_INTEGER, ApiModel

KV_KEY_PATTERN = f"^{kv_model.KEY_RULE.pattern.decode()}$"
KV_VALUE_CHARS = 4 * ((kv_model.MAX_VALUE_BYTES - 1) // 3)
"""The longest base64 value the API takes: any base64 text this long decodes within the engine's limit."""
KvKey = Annotated[
    str,
    Field(min_length=1, max_length=kv_model.MAX_KEY_BYTES, pattern=KV_KEY_PATTERN),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": kv_model.MAX_KEY_BYTES, "pattern": KV_KEY_PATTERN}),
]
KvPrefix = Annotated[
    str,
    Field(max_length=kv_model.MAX_KEY_BYTES, pattern=f"^[\\x20-\\x7e]{{0,{kv_model.MAX_KEY_BYTES}}}$"),
]
NamespaceName = Annotated[
    str,
    Field(min_length=1, max_length=64, pattern=f"^{kv_model.NAMESPACE_RULE.pattern}$"),
]
Base64Value = Annotated[
    str,
    Field(max_length=KV_VALUE_CHARS, pattern=BASE64_PATTERN, description="The value, base64 (RFC 4648)."),
]
TtlMs = Annotated[int, Field(ge=1, le=kv_model.MAX_TTL_MS, description="Expire the key this many ms from now.")]


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


class NamespaceSpec(ApiModel):
    name: NamespaceName
    history_ms: int = Field(
        default=kv_model.DEFAULT_HISTORY_MS,
        ge=60_000,
        le=kv_model.MAX_TTL_MS,
        description="How long changes stay watchable on the serverless backend (the embedded one keeps its topic).",
    )


class NamespaceView(NamespaceSpec):
    created_at: int
    revision: int = Field(description="The revision of the namespace's last write (0: none).")


class NamespaceList(ApiModel):
    namespaces: list[NamespaceView]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class KvPut(ApiModel):
    value: Base64Value
    ttl_ms: TtlMs | None = None

    def value_bytes(self) -> bytes:
        return base64.b64decode(self.value)


class KvWritten(ApiModel):
    key: str
    version: int = Field(description="The key's version now (a delete: the revision it made).")
    revision: int = Field(description="The namespace's revision after this write.")


class KvEntryView(ApiModel):
    key: str
    value: str = Field(description="base64")
    version: int
    expires_at_ms: int | None = None

    @classmethod
    def of(cls, entry: kv_model.Entry) -> KvEntryView:
        return cls(key=entry.key, value=_b64(entry.value), version=entry.version, expires_at_ms=entry.expires_at_ms)

    def entry(self) -> kv_model.Entry:
        return kv_model.Entry(self.key, base64.b64decode(self.value), self.version, self.expires_at_ms)


class KvRead(KvEntryView):
    revision: int = Field(description="The namespace's revision when the key was read.")


class KvBatchGet(ApiModel):
    keys: list[KvKey] = Field(min_length=1, max_length=kv_model.MAX_PAGE)


class KvEntryList(ApiModel):
    entries: list[KvEntryView]
    revision: int
    next_after: str | None = Field(default=None, description="A scan's next `after`; null when it is done.")


class KvChangeView(ApiModel):
    revision: int
    previous: int
    kind: kv_model.ChangeKind
    key: str
    value: str = Field(default="", description="base64 (a delete: empty)")
    version: int
    expires_at_ms: int | None = None

    @classmethod
    def of(cls, change: kv_model.Change) -> KvChangeView:
        return cls(
            revision=change.revision,
            previous=change.previous,
            kind=change.kind,
            key=change.key,
            value=_b64(change.value),
            version=change.version,
            expires_at_ms=change.expires_at_ms,
        )

    def change(self) -> kv_model.Change:
        return kv_model.Change(
            self.revision,
            self.previous,
            self.kind,
            self.key,
            base64.b64decode(self.value),
            self.version,
            self.expires_at_ms,
        )


class KvChangeList(ApiModel):
    changes: list[KvChangeView]
    revision: int
    next_revision: int = Field(description="Watch from here next: no change of this page again, none missed.")


class KvImportEntry(ApiModel):
    key: KvKey
    value: Base64Value
    version: int = Field(ge=1, le=MAX_JSON_INTEGER)
    expires_at_ms: int | None = Field(default=None, ge=1, le=MAX_JSON_INTEGER)

    def entry(self) -> kv_model.Entry:
        return kv_model.Entry(self.key, base64.b64decode(self.value), self.version, self.expires_at_ms)


class KvImport(ApiModel):
    """A snapshot (or, with `append`, its next part) to write into the namespace, keys keeping their versions."""

    entries: list[KvImportEntry] = Field(max_length=kv_model.MAX_PAGE)
    history_ms: int = Field(default=kv_model.DEFAULT_HISTORY_MS, ge=60_000, le=kv_model.MAX_TTL_MS)
    append: StrictBool = Field(
        default=False,
        description="false: the namespace must be empty (or missing: it is created); true: a later part of the same "
        "import, whose versions are all above the namespace's revision.",
    )


class KvImported(ApiModel):
    keys: int
    revision: int
