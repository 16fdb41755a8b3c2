"""How the embedded backend's KV namespaces lie in RocksDB (`<home>/kv`, two column families); the one module that
knows the layout.

    namespaces   name                   -> NamespaceConfig as JSON (with its WAL: rare, small, must survive)
    entries      name 0x00 key          -> version:u64 expires_at_ms:u64 (0: never) value   (no WAL)
                 name 0x01              -> checkpoint: next topic offset to apply:u64, revision:u64   (no WAL)

An entry and the checkpoint move together in one write batch of one family, so whatever a crash leaves of the
family is a state the namespace's topic reached (kv.py replays the topic from the checkpoint). Names cannot hold
0x00, so `name 0x00` starts a namespace's entries and nothing else.
"""

from __future__ import annotations

import struct

from rocksdict import ReadOptions

from tidemq_protocol.kv import Change, Entry

ENTRY = struct.Struct("<QQ")
unpack_entry_header, ENTRY_HEADER = ENTRY.unpack_from, ENTRY.size
"""(version, expires_at_ms) of an entry's value, and how many bytes they take before the value."""
CHECKPOINT = struct.Struct("<QQ")
ENTRIES, CHECKPOINT_MARK = b"\x00", b"\x01"


def entries_prefix(namespace: str) -> bytes:
    """What every entry key of the namespace starts with."""
    return namespace.encode() + ENTRIES


def entry_key(namespace: str, key: str) -> bytes:
    return entries_prefix(namespace) + key.encode()


def entries_end(namespace: str) -> bytes:
    """The first key past the namespace's entries and checkpoint (the end of a range delete of both)."""
    return namespace.encode() + b"\x02"


def checkpoint_key(namespace: str) -> bytes:
    return namespace.encode() + CHECKPOINT_MARK


def encode_entry(change: Change) -> bytes:
    """The stored value of the key a put change leaves."""
    return ENTRY.pack(change.version, change.expires_at_ms or 0) + change.value


def decode_entry(key: str, raw: bytes) -> Entry:
    version, expires = unpack_entry_header(raw)
    return Entry(key, raw[ENTRY_HEADER:], version, expires or None)


def has_expired(raw: bytes, now_ms: int) -> bool:
    """Whether the stored entry `raw` expired at or before `now_ms`."""
    return 0 < unpack_entry_header(raw)[1] <= now_ms


def encode_checkpoint(next_offset: int, revision: int) -> bytes:
    return CHECKPOINT.pack(next_offset, revision)


def decode_checkpoint(raw: bytes | None) -> tuple[int, int]:
    """(the topic's next offset to apply, the revision applied); (0, 0) for a namespace with no checkpoint yet."""
    return CHECKPOINT.unpack(raw) if raw is not None else (0, 0)


def keys_starting_with(prefix: bytes) -> ReadOptions:
    """Read options that end an iteration after the last key starting with `prefix`. RocksDB keeps a pointer to the
    bound: the options must outlive the iteration."""
    bounds = ReadOptions()
    bounds.set_iterate_upper_bound(_prefix_end(prefix))
    return bounds


def _prefix_end(prefix: bytes) -> bytes:
    """The first key past every key starting with `prefix`."""
    trimmed = prefix.rstrip(b"\xff")
    return trimmed[:-1] + bytes([trimmed[-1] + 1])
