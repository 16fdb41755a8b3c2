"""Compaction of one queue's tier files, the work of one Spark task (and of the benchmark's one-process baseline).

Segment compaction merges runs of small segments (an upload makes one of each kind) into segments of about
`target_bytes`, byte for byte; key compaction (a topic with `cleanup.policy=COMPACTION`) keeps only the newest
message of each key and drops tombstones older than their grace. Either way every record's CRC is checked on the
way, the new segments are written under names of their own, and a new manifest generation switches readers to
them atomically (tidemq_store.tiered.manifest, which documents the protocol); what it replaced is deleted once the
switch is older than the grace period, by this run or the next. The uploader keeps appending meanwhile: the work
covers the committed front of the files only, up to a boundary where both end a segment.

The queue's index objects (tidemq_store.tiered.index: one per upload) are merged too, into objects of about
`target_bytes / 16` covering the same offsets, so a lookup reads few of them; readers take a merged object over
the ones it covers at once (its name says what it covers), and those are deleted once it is `grace_s` old. Offsets
are stable under both compactions, so merging copies the entries as they are (an entry of an offset key compaction
emptied stays: a lookup passes over it, as it does over a hash collision).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from tidemq_protocol.attributes import TopicPolicy
from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.record import VerifiedRecords, decode_records, verify_records
from tidemq_store.cq_entry import ENTRY_SIZE, CqEntries, CqEntry, pack_entry
from tidemq_store.kv.record import is_tombstone
from tidemq_store.tiered.container import TieredQueue
from tidemq_store.tiered.index import (
    IndexRange,
    cover,
    decode_entries,
    encode_index,
    index_key,
    index_prefix,
    parse_index_key,
)
from tidemq_store.tiered.manifest import Manifest, SegmentRef, compacted_name, garbage, write_manifest
from tidemq_store.tiered.segment import FileSegment, TierDriver

from .tier import READ_ENTRIES, QueueRef, TierLocation

DEFAULT_TARGET_BYTES = 128 * 1024 * 1024
DEFAULT_GRACE_S = 600.0


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do to a queue: `key_compaction` (else segment compaction), how large a segment to make, the
    tombstone grace (key compaction), when it is, how long replaced objects stay, and whether to write."""

    key_compaction: bool = False
    target_bytes: int = DEFAULT_TARGET_BYTES
    tombstone_grace_ms: int = TopicPolicy().tombstone_grace_ms
    now_ms: int = 0
    grace_s: float = DEFAULT_GRACE_S
    dry_run: bool = False


@dataclass(slots=True)
class QueueCompaction:
    """What compacting one queue did (or, in a dry run, would do)."""

    topic: str
    queue: int
    objects_in: int = 0
    bytes_in: int = 0
    records_in: int = 0
    objects_out: int = 0
    bytes_out: int = 0
    records_out: int = 0
    records_removed: int = 0
    objects_deleted: int = 0
    index_objects_in: int = 0
    index_objects_out: int = 0
    switched: bool = False
    note: str = ""


@dataclass(frozen=True, slots=True)
class Region:
    """The committed front of a queue's files that a compaction covers: segments of each kind up to boundaries
    where both end one."""

    consumequeue: list[FileSegment]
    commitlog: list[FileSegment]

    @property
    def consumequeue_end(self) -> int:
        return self.consumequeue[-1].end

    @property
    def commitlog_end(self) -> int:
        return self.commitlog[-1].end


def region(tiered: TieredQueue) -> Region | None:
    """The largest front of the queue's files where the ConsumeQueue's last entry ends a commit-log segment."""
    consumequeue = tiered.consumequeue.first_segments()
    commitlog = tiered.commitlog.first_segments()
    commitlog_ends = {segment.end: index for index, segment in enumerate(commitlog)}
    for index in range(len(consumequeue) - 1, -1, -1):
        segment = consumequeue[index]
        if segment.size < ENTRY_SIZE:
            continue
        last = CqEntries(segment.read(segment.end - ENTRY_SIZE, ENTRY_SIZE))[0]
        if last.end in commitlog_ends:
            return Region(consumequeue[: index + 1], commitlog[: commitlog_ends[last.end] + 1])
    return None


def groups(segments: list[FileSegment], target: int) -> list[list[FileSegment]]:
    """Consecutive segments packed into groups of at most `target` bytes (a larger segment alone)."""
    packed: list[list[FileSegment]] = []
    size = 0
    for segment in segments:
        if packed and size + segment.size <= target:
            packed[-1].append(segment)
            size += segment.size
        else:
            packed.append([segment])
            size = segment.size
    return packed


@functools.lru_cache(maxsize=8)
def tier_driver(location: TierLocation) -> TierDriver:
    """This process's driver for the tier at `location`, made once: a Spark worker runs one task after another, and
    each new boto3 client costs about 0.15 s of CPU (it parses its service model again)."""
    return location.driver()


def compact_queue(driver: TierDriver, ref: QueueRef, plan: Plan) -> QueueCompaction:
    """Compact one queue of the tier `driver` reaches as `plan` says (see the module docstring)."""
    tiered = TieredQueue(driver, ref.topic, ref.queue, segment_bytes=1, writer=False)
    result = QueueCompaction(ref.topic, ref.queue)
    manifest, found = tiered.manifest, region(tiered)
    if manifest is not None and manifest.key_compacted and not plan.key_compaction:
        result.note = "key-compacted before: segment compaction leaves it to key compaction"
    elif found is not None:
        rewrite = _Rewrite(tiered, found, plan, tiered.generation + 1, uuid.uuid4().hex[:8])
        switched = _compact_keys(rewrite, result) if plan.key_compaction else _merge_segments(rewrite, result)
        if switched is not None and not plan.dry_run:
            if write_manifest(driver, tiered.path, switched):
                result.switched, manifest = True, switched
            else:
                result.note = "another compaction switched the queue first; its work stands"
                manifest = None
    if manifest is not None and not plan.dry_run:
        doomed = garbage(driver, tiered.path, manifest, time.time(), plan.grace_s)
        for item in doomed:
            driver.delete_object(item.key)
        result.objects_deleted = len(doomed)
    compact_index(driver, tiered, plan, result)
    return result


def compact_index(driver: TierDriver, tiered: TieredQueue, plan: Plan, result: QueueCompaction) -> None:
    """Merge runs of the queue's committed index objects into objects of about `target_bytes / 16`; delete the
    objects a merged one covers once it is `grace_s` old (see the module docstring)."""
    objects = driver.objects(index_prefix(tiered.path))
    listed = [item for item in map(parse_index_key, objects) if item is not None]
    sizes = {item.key: item.size for item in objects}
    chosen = cover(listed)
    committed = [item for item in chosen if item.end <= (tiered.max_offset or 0)]
    target = max(ENTRY_SIZE, plan.target_bytes // 16)
    run: list[IndexRange] = []
    size = 0
    for item in [*committed, None]:
        contiguous = item is not None and run and run[-1].end == item.first
        if item is not None and (not run or (contiguous and size + sizes[item.key] <= target)):
            run.append(item)
            size += sizes[item.key]
            continue
        if len(run) > 1:
            _merge_index(driver, tiered, run, plan, result)
        run, size = ([item], sizes[item.key]) if item is not None else ([], 0)
    if plan.dry_run:
        return
    now = time.time()
    for item in listed:
        holder = next((c for c in chosen if c.first <= item.first and item.end <= c.end and c.key != item.key), None)
        if holder is not None and now - holder.modified_s >= plan.grace_s:
            driver.delete_object(item.key)
            result.objects_deleted += 1


def _merge_index(
    driver: TierDriver, tiered: TieredQueue, run: list[IndexRange], plan: Plan, result: QueueCompaction
) -> None:
    """Write one index object with the entries of `run` (consecutive objects), those below the tier's minimum left
    out."""
    low = tiered.min_offset or 0
    entries = []
    for item in run:
        data = driver.read_object(item.key)
        if data is None:
            return  # retention removed it meanwhile: the next run looks again
        entries += [(hashed, offset) for hashed, offset in decode_entries(data) if offset >= low]
    result.index_objects_in += len(run)
    result.index_objects_out += 1
    if not plan.dry_run:
        driver.create_object(
            index_key(tiered.path, run[0].first, run[-1].end), encode_index(run[0].first, run[-1].end, entries)
        )


@dataclass(frozen=True, slots=True)
class _Rewrite:
    """One compaction of a queue: its files, the front it covers, the plan, and the names its segments get."""

    tiered: TieredQueue
    found: Region
    plan: Plan
    generation: int
    attempt: str

    def target(self, kind: str) -> int:
        """The size of segment to make (a ConsumeQueue's is a 16th, as the tier's own segments)."""
        return self.plan.target_bytes if kind == "commitlog" else max(ENTRY_SIZE, self.plan.target_bytes // 16)

    def write(self, kind: str, base: int, data: bytes) -> SegmentRef:
        """Write a new segment of `kind` holding bytes [base, base + len(data)) (not in a dry run)."""
        name = compacted_name(base, self.generation, self.attempt)
        if not self.plan.dry_run:
            segment = self.tiered.driver.create(f"{self.tiered.path}/{kind}", base, name)
            segment.append(data)
            segment.commit()
        return SegmentRef(name, base, len(data))

    def manifest(self, consumequeue: list[SegmentRef], commitlog: list[SegmentRef]) -> Manifest:
        return Manifest(
            self.generation,
            tuple(consumequeue),
            tuple(commitlog),
            self.found.consumequeue_end,
            self.found.commitlog_end,
            key_compacted=self.plan.key_compaction,
        )


def _merge_segments(rewrite: _Rewrite, result: QueueCompaction) -> Manifest | None:
    """Segment compaction: each run of small segments becomes one, byte for byte, every record checked (its CRCs,
    and that it is one of the queue's own at an offset above the one before)."""
    tiered, found = rewrite.tiered, rewrite.found
    refs: dict[str, list[SegmentRef]] = {}
    merged = False
    next_offset = 0  # the offset the next record must reach: offsets increase across the groups too
    for kind, file, segments in (
        ("commitlog", tiered.commitlog, found.commitlog),
        ("consumequeue", tiered.consumequeue, found.consumequeue),
    ):
        refs[kind] = []
        for group in groups(segments, rewrite.target(kind)):
            first = group[0]
            if len(group) == 1:
                refs[kind].append(SegmentRef(first.name, first.base, first.size))
                continue
            merged = True
            parts = []
            for segment in group:
                part = segment.read(segment.base, segment.size)
                if kind == "commitlog":  # each segment as it comes (an upload's records end with its segment)
                    records, next_offset = _verify_segment(tiered, segment, part, next_offset)
                    result.records_in += records
                parts.append(part)
            data = b"".join(parts)
            if kind == "consumequeue" and len(data) % ENTRY_SIZE:
                raise CorruptStore(f"{file.path}: segments from {first.base} hold a torn entry")
            result.objects_in += len(group)
            result.bytes_in += len(data)
            result.objects_out += 1
            result.bytes_out += len(data)
            refs[kind].append(rewrite.write(kind, first.base, data))
    result.records_out = result.records_in
    return rewrite.manifest(refs["consumequeue"], refs["commitlog"]) if merged else None


def _verify_segment(tiered: TieredQueue, segment: FileSegment, data: bytes, first_offset: int) -> VerifiedRecords:
    """Check the records of one commit-log segment (`record.verify_records`), naming the segment when one fails."""
    try:
        return verify_records(data, tiered.topic, tiered.queue, first_offset)
    except CorruptStore as error:
        raise CorruptStore(f"tier {tiered.topic}:{tiered.queue}: commit-log segment {segment.name}: {error}") from None


def _compact_keys(rewrite: _Rewrite, result: QueueCompaction) -> Manifest | None:
    """Key compaction: keep the newest message of each key (and every message without a key); drop a tombstone
    (an empty body, but a KV namespace's put of an empty value: kv/record.py) with everything before it once it is
    older than the grace; offsets stay, and a removed offset's entry gets size 0 (reads pass over it)."""
    tiered, found, plan = rewrite.tiered, rewrite.found, rewrite.plan
    first, end = found.consumequeue[0].base // ENTRY_SIZE, found.consumequeue_end // ENTRY_SIZE
    newest: dict[str, int] = {}
    expired: set[int] = set()  # tombstones past their grace
    keyless = 0
    for offset, _, message in _records(tiered, first, end):
        if message is None:
            continue
        result.records_in += 1
        if not message.keys:
            keyless += 1
            continue
        newest[message.keys[0]] = offset
        if message.tombstone and message.store_timestamp + plan.tombstone_grace_ms <= plan.now_ms:
            expired.add(offset)
    result.records_out = keyless + sum(1 for offset in newest.values() if offset not in expired)
    result.records_removed = result.records_in - result.records_out
    result.objects_in = len(found.consumequeue) + len(found.commitlog)
    result.bytes_in = sum(s.size for s in found.consumequeue) + sum(s.size for s in found.commitlog)
    if result.records_removed == 0 and len(groups(found.commitlog, plan.target_bytes)) == len(found.commitlog):
        return None  # nothing to remove, nothing to merge
    output = _Output(rewrite, found.commitlog[0].base, first)
    for offset, entry, message in _records(tiered, first, end):
        keep = message is not None and (
            not message.keys or (newest[message.keys[0]] == offset and offset not in expired)
        )
        output.add(entry, message.raw if keep else None)
    commitlog, consumequeue = output.finish()
    result.objects_out = len(commitlog) + len(consumequeue)
    result.bytes_out = sum(s.size for s in commitlog) + sum(s.size for s in consumequeue)
    return rewrite.manifest(consumequeue, commitlog)


@dataclass(frozen=True, slots=True)
class Record:
    """One stored message of a queue, with its record's bytes as stored."""

    keys: tuple[str, ...]
    body: bytes
    store_timestamp: int
    raw: bytes
    tombstone: bool  # kv/record.py's rule: an empty body, but a KV namespace's put of an empty value


def _records(tiered: TieredQueue, first: int, end: int) -> Iterator[tuple[int, CqEntry, Record | None]]:
    """(offset, entry, record) of offsets [first, end), each record CRC-checked; None for an offset key
    compaction removed before."""
    offset = first
    while offset < end:
        run = tiered.run(offset, min(end, offset + READ_ENTRIES))
        messages = iter(decode_records(run.records, (tiered.topic, tiered.queue, offset)))
        start = run.entries[0].position
        for index, entry in enumerate(run.entries):
            if not entry.size:
                yield offset + index, entry, None
                continue
            message = next(messages)
            if message.queue_offset != offset + index:
                raise CorruptStore(f"tier {tiered.topic}:{tiered.queue}: entry {offset + index} points elsewhere")
            raw = run.records[entry.position - start : entry.end - start]
            record = Record(message.keys, message.body, message.store_timestamp, raw, is_tombstone(message))
            yield offset + index, entry, record
        offset += len(run.entries)


class _Output:
    """The new segments of a key compaction: survivors back to back from the region's first commit-log position,
    an entry per offset (size 0 where removed), each file cut into segments of about the target size."""

    def __init__(self, rewrite: _Rewrite, base: int, first: int) -> None:
        self.rewrite = rewrite
        self.position = base
        self.bases = {"commitlog": base, "consumequeue": first * ENTRY_SIZE}
        self.parts: dict[str, list[bytes]] = {"commitlog": [], "consumequeue": []}
        self.sizes = {"commitlog": 0, "consumequeue": 0}
        self.refs: dict[str, list[SegmentRef]] = {"commitlog": [], "consumequeue": []}

    def add(self, entry: CqEntry, raw: bytes | None) -> None:
        size = len(raw) if raw is not None else 0
        self._put("consumequeue", pack_entry(self.position, size, entry.tag_code, entry.store_timestamp))
        if raw is not None:
            self._put("commitlog", raw)
            self.position += size

    def _put(self, kind: str, data: bytes) -> None:
        self.parts[kind].append(data)
        self.sizes[kind] += len(data)
        if self.sizes[kind] >= self.rewrite.target(kind):
            self._flush(kind)

    def _flush(self, kind: str) -> None:
        if not self.sizes[kind]:
            return
        data = b"".join(self.parts[kind])
        self.refs[kind].append(self.rewrite.write(kind, self.bases[kind], data))
        self.bases[kind] += len(data)
        self.parts[kind], self.sizes[kind] = [], 0

    def finish(self) -> tuple[list[SegmentRef], list[SegmentRef]]:
        self._flush("commitlog")
        self._flush("consumequeue")
        return self.refs["commitlog"], self.refs["consumequeue"]
