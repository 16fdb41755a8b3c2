"""The one format of a KV change as a message of its namespace's topic (`%KV%<namespace>`, one queue): what the
embedded backend appends before it applies a write, what recovery and a rebuild replay, and what the Spark key
compaction keeps the newest of per key.

    keys        (the KV key, percent-encoded where a message key may not hold it: `%`, whitespace, non-ASCII)
    properties  kv.key   the KV key itself
                kv.op    put | delete
                kv.rev   the namespace's revision this change made
                kv.prev  the revision before it (a gap past a watch's start means changes are gone)
                kv.ver   the key's version after a put
                kv.exp   when the key expires (ms since the epoch; absent: never)
    body        the value (a delete: empty)

A delete is a tombstone (empty body) to the key compaction; a put of an empty value is not (`is_tombstone`).
"""

from __future__ import annotations

from urllib.parse import quote

from tidemq_protocol.kv import Change, ChangeKind
from tidemq_protocol.message import Message, StoredMessage

KEY, OP, REVISION, PREVIOUS, VERSION, EXPIRES = "kv.key", "kv.op", "kv.rev", "kv.prev", "kv.ver", "kv.exp"
_SAFE = "!#$&'()*+,/:;=?@[]~^`{|}<>\"\\"


def message_key(key: str) -> str:
    """The KV key as a message key (no whitespace, no `%` left unescaped), one to one."""
    return quote(key, safe=_SAFE)


def to_message(change: Change) -> Message:
    properties = {
        KEY: change.key,
        OP: change.kind.value,
        REVISION: str(change.revision),
        PREVIOUS: str(change.previous),
    }
    if change.kind is ChangeKind.PUT:
        properties[VERSION] = str(change.version)
        if change.expires_at_ms is not None:
            properties[EXPIRES] = str(change.expires_at_ms)
    return Message(change.value, keys=(message_key(change.key),), properties=properties)


def from_message(message: StoredMessage) -> Change:
    properties = message.properties
    kind = ChangeKind(properties[OP])
    revision = int(properties[REVISION])
    expires = properties.get(EXPIRES)
    return Change(
        revision=revision,
        previous=int(properties[PREVIOUS]),
        kind=kind,
        key=properties[KEY],
        value=message.body,
        version=int(properties[VERSION]) if kind is ChangeKind.PUT else revision,
        expires_at_ms=int(expires) if expires is not None else None,
    )


def is_tombstone(message: StoredMessage) -> bool:
    """A message key compaction may drop once past its grace: an empty body, unless it is a KV put of an empty
    value."""
    return not message.body and message.properties.get(OP) != ChangeKind.PUT.value
