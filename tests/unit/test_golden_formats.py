"""The on-disk formats, pinned by golden bytes (tests/golden/README.md): every reader the system uses reads each
checked-in file into exactly the messages written, every field of each, and the writers still write those bytes.

A change that moves a field, changes a size or a constant of a format, or changes what a reader makes of the bytes
fails here even when the writer and the reader change together (every round trip would still pass)."""

from __future__ import annotations

import shutil
import struct
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pytest
from crc32c import crc32c

from tidemq_protocol import codec
from tidemq_protocol import kv_snapshot as snapshot
from tidemq_protocol.filter import TagFilter
from tidemq_protocol.kv import Entry, NamespaceConfig, Snapshot
from tidemq_protocol.message import StoredMessage
from tidemq_protocol.record import (
    BROKER_CRC_AT,
    CRC_AT,
    CRC_START,
    CRC_START_V1,
    END_OF_BATCH,
    HEADER_SIZE,
    HEADER_SIZE_V1,
    MAGIC,
    MAGIC_V1,
    PHYSICAL_AT,
    QUEUE_AT,
    QUEUE_OFFSET_AT,
    SHORTEST_HEADER,
    STORE_TIMESTAMP_AT,
    ProducedRecords,
    RecordHeader,
    VerifiedRecords,
    check_produced,
    decode_message,
    decode_records,
    decode_run,
    read_by_id,
    read_header,
    rebase,
    scan_batches,
    store_timestamp_at,
    verify_records,
)
from tidemq_store import StoreConfig, TopicConfig, open_store
from tidemq_store.cq_entry import ENTRY_SIZE, CqEntries, CqEntry, entries_of
from tidemq_store.serverless.cold import ColdTier
from tidemq_store.serverless.segments import read_segment, split_physical
from tidemq_store.tiered.cache import ReadAheadCache, read_cold
from tidemq_store.tiered.container import TieredQueue
from tidemq_store.tiered.posix import PosixDriver

from ..golden import make_golden
from ..golden.make_golden import (
    COMMITLOG_V1,
    COMMITLOG_V2,
    GOLDEN,
    KV_SNAPSHOT,
    SERVERLESS_SEGMENT,
    TIER_COMMITLOG,
    TIER_CONSUMEQUEUE,
    TOPIC_CREATED_AT,
    fixed_clock,
)

SIZE, OFFSET = struct.Struct("<I"), struct.Struct("<Q")
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # StoreConfig's default: the largest record read_by_id reads follows from it


class Content(NamedTuple):
    """What a producer gave a message: all of a stored message but where and when it was stored."""

    born: int
    body: bytes
    keys: tuple[str, ...]
    tag: str | None
    properties: dict[str, str]


FIRST = Content(1_700_000_000_001, b"first order", ("order-1",), "TagA", {"color": "blue"})
EMPTY = Content(1_700_000_000_002, b"", (), None, {})
BINARY = Content(1_700_000_000_003, b"\x00\x01\x02\xfe\xff", ("order-2", "order-3"), "TagB", {})
UNICODE = Content(1_700_000_000_004, "héllo wörld ✓".encode(), (), "TagA", {"note": "ünïcode ✓", "empty": ""})
KEYED_EMPTY = Content(1_700_000_000_005, b"", ("order-4",), None, {"a b": "c d"})
PRODUCED = Content(1_700_000_000_006, b"p", ("order-5",), "TagC", {})
PRODUCED_40 = Content(1_700_000_000_007, b"x" * 40, (), None, {})
PUT_1, PUT_2, PUT_3 = 1_700_000_001_000, 1_700_000_002_000, 1_700_000_003_000
V1_PUT_1, V1_PUT_2 = 1_600_000_001_000, 1_600_000_002_000


def stored(queue: int, offset: int, msg_id: str, store_timestamp: int, content: Content) -> StoredMessage:
    born, body, keys, tag, properties = content
    return StoredMessage("orders", queue, offset, msg_id, born, store_timestamp, body, keys, tag, properties)


V1_LOG = [  # commitlog_v1.bin, in log order: ids name (position, size) of 53-byte-header records
    stored(0, 0, "000000000000000000000068", V1_PUT_1, FIRST),
    stored(1, 0, "00000000000000680000003b", V1_PUT_1, EMPTY),
    stored(0, 1, "00000000000000a30000005f", V1_PUT_1, BINARY),
    stored(1, 1, "000000000000010200000070", V1_PUT_2, UNICODE),
    stored(0, 2, "000000000000017200000050", V1_PUT_2, KEYED_EMPTY),
]
V2_LOG = [  # commitlog_v2.bin, in log order: 57-byte headers, so each record is 4 bytes longer than in version 1
    stored(0, 0, "00000000000000000000006c", PUT_1, FIRST),
    stored(1, 0, "000000000000006c0000003f", PUT_1, EMPTY),
    stored(0, 1, "00000000000000ab00000063", PUT_1, BINARY),
    stored(1, 1, "000000000000010e00000074", PUT_2, UNICODE),
    stored(0, 2, "000000000000018200000054", PUT_2, KEYED_EMPTY),
    stored(0, 3, "00000000000001d600000057", PUT_3, PRODUCED),
    stored(1, 2, "000000000000022d00000067", PUT_3, PRODUCED_40),
]
V1_BATCHES = [  # scan_batches of commitlog_v1.bin: (size, flags, queue, queue offset, position, store time)
    [(104, 0, 0, 0, 0, V1_PUT_1), (59, 0, 1, 0, 104, V1_PUT_1), (95, END_OF_BATCH, 0, 1, 163, V1_PUT_1)],
    [(112, 0, 1, 1, 258, V1_PUT_2), (80, END_OF_BATCH, 0, 2, 370, V1_PUT_2)],
]
V2_BATCHES = [
    [(108, 0, 0, 0, 0, PUT_1), (63, 0, 1, 0, 108, PUT_1), (99, END_OF_BATCH, 0, 1, 171, PUT_1)],
    [(116, 0, 1, 1, 270, PUT_2), (84, END_OF_BATCH, 0, 2, 386, PUT_2)],
    [(87, 0, 0, 3, 470, PUT_3), (103, END_OF_BATCH, 1, 2, 557, PUT_3)],
]
TAG_A, TAG_B, TAG_C = 123300504, 2656058146, 3914795956  # model.tag_hash: zlib.crc32 of the tag
TIER_ENTRIES = [  # tier_consumequeue_queue0.bin: positions in the queue's own tier commit log
    CqEntry(0, 108, TAG_A, PUT_1),
    CqEntry(108, 99, TAG_B, PUT_1),
    CqEntry(207, 84, 0, PUT_2),
    CqEntry(291, 87, TAG_C, PUT_3),
]
SERVERLESS_FILE = "5eed01"
SERVERLESS_BATCHES = {  # what the queue index holds of each batch: (first offset, position, length), per queue
    0: [(0, 0, 108 + 99), (2, 270, 84), (3, 470, 87)],
    1: [(0, 207, 63), (1, 354, 116), (2, 557, 103)],
}
SERVERLESS_QUEUES = {  # each queue's messages with their offsets as sequenced; ids name the file and position
    0: [
        stored(0, 0, "5eed0100000000000000006c", PUT_1, FIRST),
        stored(0, 1, "5eed01000000006c00000063", PUT_1, BINARY),
        stored(0, 2, "5eed01000000010e00000054", PUT_2, KEYED_EMPTY),
        stored(0, 3, "5eed0100000001d600000057", PUT_3, PRODUCED),
    ],
    1: [
        stored(1, 0, "5eed0100000000cf0000003f", PUT_1, EMPTY),
        stored(1, 1, "5eed01000000016200000074", PUT_2, UNICODE),
        stored(1, 2, "5eed01000000022d00000067", PUT_3, PRODUCED_40),
    ],
}
KV_EXPORTED = Snapshot(
    NamespaceConfig("golden", 86_400_000),
    7,
    [
        Entry("config/color", b"blue", 2),
        Entry("config/size", "größe ✓".encode(), 3),
        Entry("empty", b"", 4),
        Entry("session/1", bytes(range(8)), 7, 1_700_003_604_000),
    ],
)


COMMIT_LOGS = [
    pytest.param(COMMITLOG_V1, V1_LOG, V1_BATCHES, id="v1"),
    pytest.param(COMMITLOG_V2, V2_LOG, V2_BATCHES, id="v2"),
]


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def reader(data: bytes):
    """`read(position, length)` over bytes, as a commit log reads its file (short at the end)."""
    return lambda position, length: data[position : position + length]


def queue_of(log: list[StoredMessage], queue: int) -> list[StoredMessage]:
    return [message for message in log if message.queue == queue]


def records_of(data: bytes, queue: int) -> bytes:
    """A queue's records taken out of a commit log, back to back (as the tier and a read of the queue hold them)."""
    batches = [header for batch in scan_batches(data, 0) for header in batch]
    return b"".join(data[h.physical_offset : h.physical_offset + h.size] for h in batches if h.queue == queue)


def store_over(home: Path, segment: bytes):
    """The embedded engine opened over a commit log holding just `segment` (the topic made before its records)."""
    with fixed_clock(TOPIC_CREATED_AT):
        store = open_store(StoreConfig(home=home))
        store.create_topic(TopicConfig(name="orders", queues=2, retention_ms=None))
        store.close()
    (home / "commitlog" / "00000000000000000000").write_bytes(segment)
    return open_store(StoreConfig(home=home))


# ---- commit-log segments -----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "log", "batches"), COMMIT_LOGS)
def test_commit_log_segment_decodes_into_every_field_of_every_message(name, log, batches):
    data = golden(name)
    assert decode_records(data) == log
    positions = [int(m.msg_id[:16], 16) for m in log]
    assert [decode_message(data, position) for position in positions] == log
    assert [store_timestamp_at(data, position) for position in positions] == [m.store_timestamp for m in log]


@pytest.mark.parametrize(("name", "log", "batches"), COMMIT_LOGS)
def test_recovery_scan_finds_each_put_of_the_segment_whole(name, log, batches):
    data = golden(name)
    found = [[tuple(header)[:6] for header in batch] for batch in scan_batches(data, 0)]
    assert found == batches
    keys_and_tags = [(h.topic, h.keys, h.tag) for batch in scan_batches(data, 0) for h in batch]
    assert keys_and_tags == [("orders", m.keys, m.tag) for m in log]
    assert list(scan_batches(data, 1)) == []  # the records name their own positions


@pytest.mark.parametrize(("name", "log", "batches"), COMMIT_LOGS)
def test_every_message_of_a_segment_is_found_by_its_id(name, log, batches):
    data = golden(name)
    assert [read_by_id(m.msg_id, MAX_MESSAGE_BYTES, reader(data)) for m in log] == log


@pytest.mark.parametrize(("name", "log", "batches"), COMMIT_LOGS)
def test_a_queues_records_verify_and_decode_as_a_run(name, log, batches):
    data = golden(name)
    for queue in (0, 1):
        run = records_of(data, queue)
        expected = queue_of(log, queue)
        assert verify_records(run, "orders", queue) == VerifiedRecords(len(expected), len(expected))
        assert decode_run(run, "orders", queue, 0) == expected
        assert decode_records(run, ("orders", queue, 0)) == expected


def test_the_field_positions_record_py_publishes_are_where_golden_records_hold_the_fields():
    v1, v2 = golden(COMMITLOG_V1), golden(COMMITLOG_V2)
    for data, batches, magic, header_size in ((v1, V1_BATCHES, MAGIC_V1, 53), (v2, V2_BATCHES, MAGIC, 57)):
        for batch in batches:
            for size, flags, _, _, at, _ in batch:
                assert (SIZE.unpack_from(data, at)[0], data[at + 4]) == (size, magic)
                assert data[at + header_size : at + header_size + 6] == b"orders"
                assert (data[at + (5 if magic == MAGIC else 9)] & END_OF_BATCH) == flags
    assert HEADER_SIZE == 57 and SHORTEST_HEADER == HEADER_SIZE_V1 == 53
    for size, _, queue, offset, at, stored in (record for batch in V2_BATCHES for record in batch):
        assert SIZE.unpack_from(v2, at + QUEUE_AT)[0] == queue
        assert [OFFSET.unpack_from(v2, at + field)[0] for field in (QUEUE_OFFSET_AT, PHYSICAL_AT)] == [offset, at]
        assert OFFSET.unpack_from(v2, at + STORE_TIMESTAMP_AT)[0] == stored
        assert SIZE.unpack_from(v2, at + BROKER_CRC_AT)[0] == crc32c(v2[at + 5 : at + BROKER_CRC_AT])
        assert SIZE.unpack_from(v2, at + CRC_AT)[0] == crc32c(v2[at + CRC_START : at + size])
    for size, _, _, _, at, _ in (record for batch in V1_BATCHES for record in batch):
        assert SIZE.unpack_from(v1, at + 5)[0] == crc32c(v1[at + CRC_START_V1 : at + size])


def test_a_segments_first_record_is_read_where_a_segment_starts():
    """What the commit log reads at a segment's start (its first store time for retention, a header)."""
    assert store_timestamp_at(golden(COMMITLOG_V1)) == V1_PUT_1
    assert store_timestamp_at(golden(COMMITLOG_V2)) == PUT_1
    first = golden(COMMITLOG_V2)[:108]
    assert read_header(first) == RecordHeader(108, 0, 0, 0, 0, PUT_1, "orders", "TagA", ("order-1",))
    assert decode_message(first) == V2_LOG[0]


def test_v2_segment_passes_the_brokers_check_of_produced_records():
    produced = check_produced(golden(COMMITLOG_V2), b"orders", 100)
    assert produced == ProducedRecords(
        [108, 63, 99, 116, 84, 87, 103],
        [0, 1, 0, 1, 0, 0, 1],
        [
            b"KEYS\x01order-1\x02TAGS\x01TagA\x02color\x01blue\x02",
            b"",
            b"KEYS\x01order-2 order-3\x02TAGS\x01TagB\x02",
            "TAGS\x01TagA\x02note\x01ünïcode ✓\x02empty\x01\x02".encode(),
            b"KEYS\x01order-4\x02a b\x01c d\x02",
            b"KEYS\x01order-5\x02TAGS\x01TagC\x02",
            b"",
        ],
    )


def test_v1_segment_is_what_the_version_1_writer_wrote():
    assert make_golden.commitlog_v1() == golden(COMMITLOG_V1)


def test_v2_segment_and_its_tier_files_are_what_the_embedded_engine_writes(tmp_path):
    written = make_golden.embedded_files(tmp_path)
    assert written[COMMITLOG_V2] == golden(COMMITLOG_V2)
    assert written[TIER_COMMITLOG] == golden(TIER_COMMITLOG)
    assert written[TIER_CONSUMEQUEUE] == golden(TIER_CONSUMEQUEUE)


@pytest.mark.parametrize(("name", "log", "batches"), COMMIT_LOGS)
def test_the_embedded_engine_serves_a_golden_commit_log_it_recovers(tmp_path, name, log, batches):
    store = store_over(tmp_path / "store", golden(name))
    try:
        assert [(q.queue, q.min_offset, q.max_offset) for q in store.queue_offsets("orders")] == [
            (0, 0, len(queue_of(log, 0))),
            (1, 0, len(queue_of(log, 1))),
        ]
        for queue in (0, 1):
            assert store.get("orders", queue, 0, max_messages=100).messages == queue_of(log, queue)
            batch = store.read_records("orders", queue, 0)
            assert batch.records == records_of(golden(name), queue)
            assert codec.decode_consume(codec.encode_consume(batch))[0] == queue_of(log, queue)  # as a consumer
        assert [store.message_by_id(m.msg_id) for m in log] == log
        assert store.messages_by_key("orders", "order-3") == [log[2]]
        assert store.get("orders", 1, 0, message_filter="TagA").messages == [log[3]]
        assert store.offset_for_timestamp("orders", 0, log[4].store_timestamp) == 2
    finally:
        store.close()


# ---- the cold tier -------------------------------------------------------------------------------


@pytest.fixture
def tier_copy(tmp_path) -> Path:
    """A posix tier directory holding the golden files of queue orders:0 where the tier puts them."""
    root = tmp_path / "tier"
    for kind, name in (("commitlog", TIER_COMMITLOG), ("consumequeue", TIER_CONSUMEQUEUE)):
        directory = root / "orders" / "0" / kind
        directory.mkdir(parents=True)
        shutil.copyfile(GOLDEN / name, directory / "00000000000000000000")
    return root


def test_tier_segments_hold_the_queues_records_as_the_hot_log_holds_them():
    assert golden(TIER_COMMITLOG) == records_of(golden(COMMITLOG_V2), 0)
    assert list(CqEntries(golden(TIER_CONSUMEQUEUE))) == TIER_ENTRIES
    assert entries_of(golden(TIER_COMMITLOG)).data == golden(TIER_CONSUMEQUEUE)  # the serverless upload's way
    assert len(golden(TIER_CONSUMEQUEUE)) == 4 * ENTRY_SIZE


def test_the_tier_reads_its_golden_segments_by_offset_tag_and_time(tier_copy):
    tiered = TieredQueue(PosixDriver(tier_copy), "orders", 0, 64 * 1024 * 1024, writer=False)
    assert (tiered.min_offset, tiered.max_offset) == (0, 4)
    assert list(tiered.entries(0, 4)) == TIER_ENTRIES
    run = tiered.run(1, 4)
    assert decode_run(run.records, "orders", 0, 1) == queue_of(V2_LOG, 0)[1:]
    assert tiered.first_offset_stored_at(PUT_2, 0, 4) == 2
    cache = ReadAheadCache(0, 30.0)
    try:
        cold = read_cold(cache, tiered, 0, 10, 1024 * 1024, TagFilter.parse("TagB || TagC"))
        assert decode_records(cold.records()) == [V2_LOG[2], V2_LOG[5]]
        assert cold.selection.next_offset == 4
    finally:
        cache.close()


def test_tier_recovery_keeps_every_byte_of_complete_golden_segments(tier_copy):
    TieredQueue(PosixDriver(tier_copy), "orders", 0, 64 * 1024 * 1024)  # a writer recovers the queue first
    assert (tier_copy / "orders/0/commitlog/00000000000000000000").read_bytes() == golden(TIER_COMMITLOG)
    assert (tier_copy / "orders/0/consumequeue/00000000000000000000").read_bytes() == golden(TIER_CONSUMEQUEUE)


def test_the_serverless_backends_cold_reads_serve_the_golden_tier_segments(tmp_path, tier_copy):
    cold = ColdTier(StoreConfig(home=tmp_path, tier="posix", tier_path=tier_copy, tier_cache_bytes=0))
    try:
        read = cold.read("orders", 0, 0, 100, 1024 * 1024, None, hot_offset=4, max_offset=4)
        assert decode_records(read.records(), ("orders", 0, 0)) == queue_of(V2_LOG, 0)
        assert (read.selection.count, read.selection.next_offset) == (4, 4)
        assert cold.offset_for_timestamp("orders", 0, PUT_3, hot_offset=4) == 3
    finally:
        cold.close()


# ---- the serverless backend's segment files ----------------------------------------------------------


@pytest.fixture
def segments(tmp_path) -> Path:
    directory = tmp_path / "segments"
    directory.mkdir()
    shutil.copyfile(GOLDEN / SERVERLESS_SEGMENT, directory / SERVERLESS_FILE)
    return directory


@pytest.mark.parametrize("queue", [0, 1])
def test_serverless_segment_batches_read_with_their_sequenced_offsets(segments, queue):
    messages = []
    for first_offset, position, length in SERVERLESS_BATCHES[queue]:
        data = rebase(read_segment(segments, SERVERLESS_FILE, position, length), first_offset)
        messages += decode_records(data, ("orders", queue, first_offset))
    assert messages == SERVERLESS_QUEUES[queue]


def test_serverless_segment_records_are_found_by_id_with_offsets_within_their_batch(segments):
    def read(physical: int, length: int) -> bytes:
        return read_segment(segments, *split_physical(physical), length)

    every = [*SERVERLESS_QUEUES[0], *SERVERLESS_QUEUES[1]]
    within_batch = [0, 1, 0, 0, 0, 0, 0]  # the backend adds the batch's first offset, from its index
    expected = [replace(m, queue_offset=offset) for m, offset in zip(every, within_batch, strict=True)]
    assert [read_by_id(m.msg_id, MAX_MESSAGE_BYTES, read) for m in every] == expected


def test_serverless_segment_records_carry_the_batchs_flags_and_the_files_positions():
    data = golden(SERVERLESS_SEGMENT)
    headers, position = [], 0
    while position < len(data):
        header = read_header(data, position)
        headers.append(header)
        position += header.size
    assert [(h.flags, h.queue, h.queue_offset, h.physical_offset & 0xFFFFFFFFFF) for h in headers] == [
        (0, 0, 0, 0),
        (0, 0, 1, 108),
        (END_OF_BATCH, 1, 0, 207),
        (0, 0, 0, 270),
        (END_OF_BATCH, 1, 0, 354),
        (0, 0, 0, 470),
        (END_OF_BATCH, 1, 0, 557),
    ]
    assert {h.physical_offset >> 40 for h in headers} == {0x5EED01}


# ---- KV snapshots --------------------------------------------------------------------------------


def test_kv_snapshot_file_reads_into_the_namespace_it_was_exported_from():
    assert snapshot.read(str(GOLDEN / KV_SNAPSHOT)) == KV_EXPORTED


def test_kv_snapshot_of_the_same_namespace_is_written_byte_for_byte(tmp_path):
    assert b"".join(snapshot.lines(KV_EXPORTED)) == golden(KV_SNAPSHOT)
    assert make_golden.kv_snapshot(tmp_path) == golden(KV_SNAPSHOT)


def test_kv_snapshot_restores_every_key_with_its_version_and_expiry(tmp_path):
    store = open_store(StoreConfig(home=tmp_path / "store"))
    try:
        with fixed_clock(1_700_000_005_000):
            kv = store.kv
            assert kv.restore(snapshot.read(str(GOLDEN / KV_SNAPSHOT)), "restored") == 4
            assert kv.get("restored", "config/size").entry == Entry("config/size", "größe ✓".encode(), 3)
            assert kv.get("restored", "session/1").entry == Entry("session/1", bytes(range(8)), 7, 1_700_003_604_000)
            assert kv.revision("restored") == 7
    finally:
        store.close()
