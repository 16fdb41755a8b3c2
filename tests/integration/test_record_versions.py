"""Record format versions side by side: a store whose commit log holds version 1 records (written as the code
before version 2 wrote them, tests/legacy_records.py) reads them beside the version 2 records written since, hot
and cold, by offset, id, key, time and tag; and a version 2 record with any byte changed is refused when produced
and detected when read."""

from __future__ import annotations

import pytest

from tidemq_protocol import codec
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import CorruptStore, InvalidArgument
from tidemq_protocol.message import Message
from tidemq_protocol.record import PendingRecord, decode_run, encode_properties, rebase
from tidemq_store import StoreConfig, TieredStorageLevel, TopicConfig, open_store

from ..legacy_records import append_v1_put, encode_v1_batch
from ..tier_reads import read_all, wait_uploaded


def v2_put(store, first: int) -> None:
    store.put(
        "mixed",
        [Message(f"v2-{first + i}".encode(), i % 2, (f"k{first + i}",), "A" if i % 3 == 0 else "B") for i in range(6)],
    )


def test_version_1_records_read_beside_version_2_hot_and_cold(tmp_path):
    home = tmp_path / "store"
    store = open_store(StoreConfig(home=home))
    store.create_topic(TopicConfig(name="mixed", queues=2))
    v2_put(store, 0)  # offsets 0-2 of each queue
    store.close()
    old = [  # offsets 3-5 of each queue, written by the old code
        PendingRecord(i % 2, 3 + i // 2, 1000 + i, encode_properties((f"old{i}",), "A" if i % 3 == 0 else "B", {}), b"")
        for i in range(6)
    ]
    old = [r._replace(body=f"v1-{i}".encode()) for i, r in enumerate(old)]
    v1_time = now_ms()
    append_v1_put(home, "mixed", old, v1_time)

    tiered = StoreConfig(
        home=home, tier="posix", tier_path=tmp_path / "tier", tier_upload_age_ms=50, tier_level=TieredStorageLevel.FORCE
    )
    store = open_store(tiered)
    try:
        v2_put(store, 6)  # offsets 6-8 of each queue
        hot = read_all(store.hot, "mixed", 0)
        bodies = [body.decode() for _, _, body, *_ in hot]
        assert bodies == ["v2-0", "v2-2", "v2-4", "v1-0", "v1-2", "v1-4", "v2-6", "v2-8", "v2-10"]
        assert [offset for _, offset, *_ in hot] == list(range(9))
        assert [body.decode() for _, _, body, *_ in read_all(store.hot, "mixed", 0, tag="A")] == [
            "v2-0",
            "v1-0",
            "v2-6",
        ]

        old_message = store.get("mixed", 0, 3, max_messages=1).messages[0]
        assert (old_message.body, old_message.keys, old_message.tag, old_message.born_timestamp) == (
            b"v1-0",
            ("old0",),
            "A",
            1000,
        )
        assert old_message.store_timestamp == v1_time
        assert store.message_by_id(old_message.msg_id).body == b"v1-0"
        assert [m.body for m in store.messages_by_key("mixed", "old2")] == [b"v1-2"]
        assert store.offset_for_timestamp("mixed", 0, v1_time) <= 3

        batch = store.read_records("mixed", 0, 0, max_messages=100)
        decoded, next_offset, _, _ = codec.decode_consume(codec.encode_consume(batch))
        assert [m.body.decode() for m in decoded] == bodies and next_offset == 9

        wait_uploaded(store, "mixed")
        assert read_all(store, "mixed", 0) == hot  # FORCE: served from the tier, both versions
        assert read_all(store, "mixed", 1)[3][2] == b"v1-1"
    finally:
        store.close()


def test_serverless_files_of_version_1_records_get_their_offsets_when_read():
    """The serverless backend writes a batch with offsets 0, 1, ... and gives records their real offsets when it
    reads them (`rebase`): a version 1 batch gets a new CRC per record, a version 2 batch new broker fields."""
    records = [PendingRecord(0, i, 5, b"", f"m{i}".encode()) for i in range(3)]
    legacy = encode_v1_batch(b"t", records, 4096, 7)
    current = codec.encode_records("t", [Message(f"m{i}".encode(), 0, born_timestamp=5) for i in range(3)])
    for data in (legacy, current):
        messages = decode_run(rebase(data, 40), "t", 0, 40)
        assert [(m.queue_offset, m.body) for m in messages] == [(40, b"m0"), (41, b"m1"), (42, b"m2")]


@pytest.fixture
def produced() -> bytes:
    return codec.encode_records(
        "orders", [Message(b"x" * 40, -1, ("key-1",), "TagA", {"p": "v"}), Message(b"second", 1)]
    )


def test_any_changed_byte_of_a_produced_record_is_refused_and_nothing_is_stored(open_test_store, produced):
    store = open_test_store()
    store.create_topic(TopicConfig(name="orders", queues=2))
    first = int.from_bytes(produced[:4], "little")  # record 0's size
    for position in range(len(produced)):
        damaged = bytearray(produced)
        damaged[position] ^= 0x01
        with pytest.raises(InvalidArgument, match=f"record {0 if position < first else 1}"):
            store.put_records("orders", bytes(damaged))
    assert [q.max_offset for q in store.queue_offsets("orders")] == [0, 0]
    results = store.put_records("orders", produced, 1)
    assert [(r.queue, r.queue_offset) for r in results] == [(1, 0), (1, 1)]


def test_any_changed_byte_of_a_stored_record_is_detected_when_it_is_read(open_test_store, produced):
    store = open_test_store()
    store.create_topic(TopicConfig(name="orders", queues=2))
    store.put_records("orders", produced, 1)
    batch = store.read_records("orders", 1, 0)
    response = codec.encode_consume(batch)
    header = len(response) - len(batch.records)
    assert codec.decode_consume(response)[0][0].body == b"x" * 40
    for position in range(len(batch.records)):
        damaged = bytearray(response)
        damaged[header + position] ^= 0x01
        with pytest.raises(CorruptStore):
            codec.decode_consume(bytes(damaged))
