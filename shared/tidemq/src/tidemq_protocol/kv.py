"""KV namespaces (the RIP-22 thread): what a namespace holds and what its operations answer, on every backend.

A namespace is a sorted map of keys (text) to values (bytes). Every write moves the namespace's `revision` up by
one and gives the key it writes `version` = that revision, so a key's version increases with each write, also
across a delete and a re-create (a compare-and-set on an old version never matches a newer key). A delete is a
change too, with a revision of its own. A key may expire (`expires_at_ms`): from then on it reads as absent.

Limits (both backends; DynamoDB's 400 KB item bounds them):

    namespace name   [A-Za-z0-9_-], 1..64 characters
    key              1..1024 printable ASCII characters (space to `~`): a byte each, so that every limit is one
                     a JSON Schema can state, and DynamoDB's 1024-byte sort key holds any key
    value            0..256 KiB
    TTL              1 ms .. 10 years
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from .errors import InvalidArgument, InvalidName

NAMESPACE_RULE = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_KEY_BYTES = 1024
MAX_VALUE_BYTES = 256 * 1024
MAX_TTL_MS = 10 * 365 * 86_400_000
MAX_PAGE = 1000
MAX_PAGE_BYTES = 3 * 1024 * 1024
"""Past its first entry or change, a page stops before its values pass this (base64 in JSON, it stays under
Lambda's 6 MB response)."""
DEFAULT_HISTORY_MS = 7 * 86_400_000
TOPIC_PREFIX = "%KV%"
"""A namespace's changes are the messages of its topic `%KV%<namespace>` (`tidemq_store.kv.record`)."""


def topic_of(namespace: str) -> str:
    return TOPIC_PREFIX + namespace


def is_kv_topic(topic: str) -> bool:
    return topic.startswith(TOPIC_PREFIX)


KEY_RULE = re.compile(rb"[\x20-\x7e]{1,1024}")
_NOT_PRINTABLE = re.compile(rb"[^\x20-\x7e]")


class ChangeKind(StrEnum):
    PUT = "put"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class NamespaceConfig:
    """A namespace and its settings. `history_ms`: how long the serverless backend keeps changes for watches (the
    embedded one keeps them in the namespace's topic, compacted rather than expired)."""

    name: str
    history_ms: int = DEFAULT_HISTORY_MS
    created_at: int = 0


@dataclass(frozen=True, slots=True)
class NamespaceStatus:
    """A namespace as a listing finds it: its settings and its revision, read together, so that whoever shows a
    listing reads nothing more per namespace (a second read would fail for a namespace deleted meanwhile)."""

    config: NamespaceConfig
    revision: int

    @property
    def name(self) -> str:
        return self.config.name


@dataclass(slots=True)  # not frozen: a frozen dataclass costs twice as much to make, and a get makes one
class Entry:
    """A key as it is now."""

    key: str
    value: bytes
    version: int
    expires_at_ms: int | None = None

    def live(self, now_ms: int) -> bool:
        return self.expires_at_ms is None or self.expires_at_ms > now_ms


@dataclass(frozen=True, slots=True)
class Change:
    """One write to a namespace, as watches see it: `revision` is the namespace's revision it made, `previous` the
    revision before it (a watch that finds `previous` past where it asked from knows changes are gone). A delete
    has no value, and `version` = its revision."""

    revision: int
    previous: int
    kind: ChangeKind
    key: str
    value: bytes = b""
    version: int = 0
    expires_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """What a put or delete did: the key's version now (a delete's: its revision) and the namespace's revision."""

    key: str
    version: int
    revision: int


@dataclass(slots=True)
class Read:
    """A key read (None: absent or expired), with the namespace's revision when it was read."""

    entry: Entry | None
    revision: int


@dataclass(frozen=True, slots=True)
class EntryPage:
    """Keys in key order, from a prefix scan or a batch get; `next_after`: where the next page starts (None: the
    scan is done)."""

    entries: list[Entry]
    revision: int
    next_after: str | None = None


@dataclass(frozen=True, slots=True)
class ChangePage:
    """Changes in revision order from a watch; the next call asks from `next_revision`, and gets no change of this
    page again and misses none."""

    changes: list[Change]
    revision: int
    next_revision: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A namespace's contents at one revision."""

    config: NamespaceConfig
    revision: int
    entries: list[Entry] = field(default_factory=list)


def check_namespace(name: object) -> str:
    if not isinstance(name, str) or not NAMESPACE_RULE.fullmatch(name):
        raise InvalidName(f"KV namespace name {name!r} must be 1-64 characters of [A-Za-z0-9_-]")
    return name


def check_key(key: object) -> bytes:
    """The key's bytes, if it is a valid key (else InvalidArgument saying why)."""
    try:
        raw = key.encode()  # type: ignore[union-attr]
    except AttributeError:
        raise InvalidArgument("a KV key must be a string") from None
    except UnicodeEncodeError:
        raw = b"\x80"  # not ASCII either
    if KEY_RULE.fullmatch(raw):
        return raw
    if not raw:
        raise InvalidArgument("a KV key must not be empty")
    if _NOT_PRINTABLE.search(raw):
        raise InvalidArgument(f"KV key {key!r} has characters outside printable ASCII (space to '~')")
    raise InvalidArgument(f"KV key is {len(raw)} characters long; the limit is {MAX_KEY_BYTES}")


def check_value(value: bytes) -> bytes:
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidArgument(f"KV value is {len(value)} bytes; the limit is {MAX_VALUE_BYTES}")
    return value


def check_ttl(ttl_ms: int | None) -> int | None:
    if ttl_ms is not None and not 1 <= ttl_ms <= MAX_TTL_MS:
        raise InvalidArgument(f"TTL of {ttl_ms} ms is out of range: 1..{MAX_TTL_MS} ms")
    return ttl_ms


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"limit {limit} is out of range: 1..{MAX_PAGE}")
    return limit


def check_config(config: NamespaceConfig) -> NamespaceConfig:
    check_namespace(config.name)
    if not 60_000 <= config.history_ms <= MAX_TTL_MS:
        raise InvalidArgument(f"history of {config.history_ms} ms is out of range: 60000..{MAX_TTL_MS} ms")
    return config


def restorable(entries: list[Entry], revision: int) -> list[Entry]:
    """What an import writes into a namespace at `revision`, in order: each key once (the entry with its highest
    version; of equal ones, the last), in version order, each version above the one before and above `revision`.
    A snapshot's own entries (distinct versions, above the namespace's revision) come out as they are: keys keep
    their versions. Any other list still gives versions that only increase per key and revisions in order."""
    latest: dict[str, Entry] = {}
    for entry in sorted(entries, key=lambda entry: entry.version):
        check_key(entry.key)
        check_value(entry.value)
        if entry.version < 1:
            raise InvalidArgument(f"an imported key's version is 1 or more, not {entry.version}")
        latest[entry.key] = entry
    written, previous = [], revision
    for entry in sorted(latest.values(), key=lambda entry: entry.version):
        version = max(entry.version, previous + 1)
        written.append(
            entry if version == entry.version else Entry(entry.key, entry.value, version, entry.expires_at_ms)
        )
        previous = version
    return written
