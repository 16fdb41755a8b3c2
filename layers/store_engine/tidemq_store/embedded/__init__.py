"""The embedded backend: CommitLog files + RocksDB ConsumeQueue and metadata, in one process."""

from .store import EmbeddedMessageStore

__all__ = ["EmbeddedMessageStore"]
