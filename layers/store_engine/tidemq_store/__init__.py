"""TideMQ's store engine: the `MessageStore` API and its backends (shipped as a Lambda layer).

from tidemq_store import StoreConfig, open_store
with open_store(StoreConfig(home="data")) as store: ...
"""

from .api import CleanReport, MessageStore
from .config import FlushDiskType, StoreConfig
from .model import (
    GetResult,
    GroupConfig,
    Message,
    MessageType,
    PutResult,
    QueueOffsets,
    RecordBatch,
    StoredMessage,
    TagFilter,
    TopicConfig,
)


def open_store(config: StoreConfig) -> MessageStore:
    """Open the embedded store described by `config` (recovering it if it was not closed cleanly)."""
    from .embedded import EmbeddedMessageStore

    return EmbeddedMessageStore(config)


__all__ = [
    "CleanReport",
    "FlushDiskType",
    "GetResult",
    "GroupConfig",
    "Message",
    "MessageStore",
    "MessageType",
    "PutResult",
    "QueueOffsets",
    "RecordBatch",
    "StoreConfig",
    "StoredMessage",
    "TagFilter",
    "TopicConfig",
    "open_store",
]
