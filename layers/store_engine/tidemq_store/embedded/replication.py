"""Replication of the embedded store: a slave broker's commit log as a byte-for-byte copy of its master's (RIP-31).

The master answers `read_replica` with whole batches of its log from where the slave's ends (replica.py owns the
chunk's format; the BrokerContainer carries it, servers/container). The slave's `apply_replica` writes them at the
same positions, in segments that roll where the master's rolled, and indexes them as recovery indexes a log read
back, so message ids and queue offsets are the same on both.
"""

from __future__ import annotations

from tidemq_protocol.errors import ReplicaDiverged
from tidemq_protocol.record import scan_batches

from ..hot import StoredBatch
from .parts import StoreParts
from .replica import ReplicaChunk


class Replication(StoreParts):
    """Both ends of `EmbeddedMessageStore`'s replication (`_dispatch_logged` is recovery's)."""

    def read_replica(self, position: int, max_bytes: int) -> ReplicaChunk:
        """The whole batches of this log from `position` (where the slave's log ends), at most `max_bytes` unless
        one batch is larger, within one segment; no data when the slave has everything. Below this log's first
        segment, the chunk starts at that segment (an empty slave starts there)."""
        self._check_open()
        log = self.commitlog
        written = log.written_position
        if type(position) is not int or position < 0 or position > written:
            raise ReplicaDiverged(f"the slave's log ends at {position!r}, past the end of the master's at {written}")
        position = max(position, log.min_position)
        segment_start = log.segment_start(position)
        if position == written:
            return ReplicaChunk(position, segment_start, written, b"")
        segment_end = next((s.end for s in log.segments() if s.start == segment_start), written)
        available = min(segment_end, written) - position
        window = min(max(max_bytes, 1), available)
        while True:
            data = log.read(position, window)
            batches = list(scan_batches(data, position))
            if batches:
                break
            if window == available:
                raise ReplicaDiverged(f"position {position} is not where a batch starts in the master's log")
            window = min(window * 2, available)
        end = batches[-1][-1].physical_offset + batches[-1][-1].size
        topics = {}
        for name in dict.fromkeys(header.topic for batch in batches for header in batch):
            config = self.meta.get_topic(name)
            if config is not None:
                topics[name] = config
        return ReplicaChunk(position, segment_start, written, data[: end - position], tuple(topics.values()))

    def apply_replica(self, chunk: ReplicaChunk) -> int:
        """Write a master's chunk to this log where the master wrote it, index it as the master did, and make it
        durable as this store's flush type says; return where this log now ends (the next chunk's position)."""
        stored: list[StoredBatch] = []
        with self._write_lock:
            self._check_open()
            for config in chunk.topics:
                current = self.meta.get_topic(config.name)
                if current != config:
                    self.meta.put_topic(config, previous=current)
            if not chunk.data:
                return self.commitlog.written_position
            batches = list(scan_batches(chunk.data, chunk.position))
            if not batches or batches[-1][-1].physical_offset + batches[-1][-1].size != chunk.end:
                raise ReplicaDiverged(f"the chunk at {chunk.position} does not hold whole batches")
            self.commitlog.append_replica(chunk.data, chunk.position, chunk.segment_start)
            try:
                for batch in batches:
                    batch_stored = self._dispatch_logged(batch)
                    if batch_stored is not None:
                        stored.append(batch_stored)
                    for header in batch:
                        self._next_offsets[(header.topic, header.queue)] = header.queue_offset + 1
            except BaseException:
                if self.commitlog.failure is None:
                    self.commitlog.truncate(chunk.position)
                self._next_offsets.clear()
                raise
        self._acknowledge(chunk.end, stored)
        return chunk.end
