"""The tier's IndexFile format (tidemq_store/tiered/index.py) over the POSIX driver: what an object holds, how a
reader finds an entry in at most two reads, damage refused, and which objects cover which offsets."""

from __future__ import annotations

import pytest

from tidemq_protocol.errors import CorruptStore
from tidemq_store.tiered.index import (
    MAX_SLOTS,
    IndexRange,
    IndexReader,
    SlotTables,
    cover,
    decode_entries,
    encode_index,
    gaps,
    id_hash,
    index_key,
    key_hash,
    parse_index_key,
    slot_count,
    table_size,
)
from tidemq_store.tiered.posix import PosixDriver
from tidemq_store.tiered.segment import StoredObject


class CountingDriver(PosixDriver):
    """A POSIX driver that counts its ranged reads."""

    ranged = 0

    def read_range(self, key: str, start: int, length: int) -> bytes | None:
        self.ranged += 1
        return super().read_range(key, start, length)


def written(driver, first: int, end: int, entries) -> IndexRange:
    key = index_key("t/0", first, end)
    assert driver.create_object(key, encode_index(first, end, entries))
    item = parse_index_key(StoredObject(key, 0, 0.0))
    assert item is not None
    return item


def test_a_lookup_reads_the_slot_table_once_and_one_slot_and_finds_every_offset_of_a_hash(tmp_path):
    driver = CountingDriver(tmp_path)
    entries = [(id_hash(f"id-{o}"), o) for o in range(100, 200)] + [(key_hash("k"), 150), (key_hash("k"), 170)]
    item = written(driver, 100, 200, entries)
    reader = IndexReader(driver, SlotTables())

    assert reader.offsets(item, key_hash("k")) == [170, 150]  # newest first
    assert driver.ranged == 2  # the header and slot table, then the slot
    assert reader.offsets(item, id_hash("id-123")) == [123]
    assert driver.ranged == 3  # the table is cached: one read
    assert sorted(decode_entries(driver.read_object(item.key))) == sorted(entries)
    missing = [h for h in (id_hash(f"none-{i}") for i in range(50)) if not reader.offsets(item, h)]
    assert len(missing) == 50


def test_a_damaged_header_or_slot_table_is_refused(tmp_path):
    driver = PosixDriver(tmp_path)
    item = written(driver, 0, 10, [(id_hash("a"), 3)])
    path = tmp_path / item.key
    data = bytearray(path.read_bytes())
    data[table_size(item.slots) - 1] ^= 0xFF  # the slot table's last byte
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStore, match="slot table is damaged"):
        IndexReader(driver, SlotTables()).offsets(item, id_hash("a"))
    data[8] ^= 0xFF  # the first offset, in the header
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStore, match="header is damaged"):
        IndexReader(driver, SlotTables()).offsets(item, id_hash("a"))


def test_slots_are_about_four_per_offset_and_the_table_stays_within_64_kib():
    assert slot_count(1) == 4 and slot_count(100) == 512
    assert slot_count(10_000_000) == MAX_SLOTS and table_size(MAX_SLOTS) <= 64 * 1024 + 64


def test_a_reader_takes_the_object_reaching_furthest_and_sees_what_no_object_covers():
    small = [IndexRange(f"s{i}", i * 10, i * 10 + 10) for i in range(5)]  # [0, 50) in five
    merged = IndexRange("m", 0, 30)
    assert [i.key for i in cover([*small, merged])] == ["m", "s3", "s4"]
    assert gaps(cover([small[0], small[3]]), 0, 60) == [(10, 30), (40, 60)]
    assert gaps(cover(small), 5, 50) == []
    assert parse_index_key(StoredObject("t/0/index/.scratch", 1, 0.0)) is None
