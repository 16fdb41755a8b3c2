"""TideMQ's store engine: the `MessageStore` API and its backends (shipped as a Lambda layer).

from tidemq_store import StoreConfig, open_store
with open_store(StoreConfig(home="data")) as store: ...
"""

from tidemq_protocol.filter import MessageFilter, SqlFilter, TagFilter
from tidemq_protocol.message import Message, MessageType, StoredMessage

from .api import CleanReport, MaintenanceReport, MessageStore
from .config import Backend, FlushDiskType, StoreConfig, TieredStorageLevel, TierMedium
from .model import GetResult, GroupConfig, PutResult, QueueOffsets, RecordBatch, TopicConfig


def open_store(config: StoreConfig) -> MessageStore:
    """Open the store `config` describes: the serverless backend (EFS files and DynamoDB), or the embedded engine
    (recovered if it was not closed cleanly), behind the tiered access layer when `config.tier` names a cold tier."""
    if config.backend is Backend.SERVERLESS:
        from .serverless.store import ServerlessMessageStore

        return ServerlessMessageStore(config)
    from .embedded import EmbeddedMessageStore

    hot = EmbeddedMessageStore(config)
    if config.tier is TierMedium.OFF:
        return hot
    from .tiered import TieredMessageStore, open_driver

    try:
        return TieredMessageStore(hot, open_driver(config), config)
    except BaseException:
        hot.close()
        raise


__all__ = [
    "Backend",
    "CleanReport",
    "FlushDiskType",
    "GetResult",
    "GroupConfig",
    "MaintenanceReport",
    "Message",
    "MessageFilter",
    "MessageStore",
    "MessageType",
    "PutResult",
    "QueueOffsets",
    "RecordBatch",
    "SqlFilter",
    "StoreConfig",
    "StoredMessage",
    "TagFilter",
    "TierMedium",
    "TieredStorageLevel",
    "TopicConfig",
    "open_store",
]
