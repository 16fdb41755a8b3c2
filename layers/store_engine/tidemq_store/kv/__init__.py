"""KV namespaces on the broker (the RIP-22 thread): `KeyValueStore` (api.py), its records (model.py), the format of
a change in a namespace's topic (record.py) and of a snapshot file (snapshot.py)."""

from .api import KeyValueStore
from .model import (
    Change,
    ChangeKind,
    ChangePage,
    Entry,
    EntryPage,
    NamespaceConfig,
    NamespaceStatus,
    Read,
    Snapshot,
    Written,
)

__all__ = [
    "Change",
    "ChangeKind",
    "ChangePage",
    "Entry",
    "EntryPage",
    "KeyValueStore",
    "NamespaceConfig",
    "NamespaceStatus",
    "Read",
    "Snapshot",
    "Written",
]
