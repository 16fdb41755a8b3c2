"""The tier's id directory (tidemq_store/tiered/directory.py) over the POSIX driver: a hot file's records listed
with their queues, found again from a physical offset in one listing and at most three reads, whatever else the
directory holds; a damaged record ends the listing; old objects expire."""

from __future__ import annotations

import time

import pytest

from tidemq_protocol.record import encode_stored
from tidemq_store.tiered import directory
from tidemq_store.tiered.directory import (
    DIRECTORY_PREFIX,
    IdDirectory,
    directory_key,
    expire_directories,
    records_of,
    write_directory,
)
from tidemq_store.tiered.index import IndexReader, SlotTables
from tidemq_store.tiered.posix import PosixDriver


class CountingDriver(PosixDriver):
    """A POSIX driver that counts what a lookup asks of it."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.asked: list[str] = []

    def read_range(self, key: str, start: int, length: int) -> bytes | None:
        self.asked.append("read")
        return super().read_range(key, start, length)

    def first_object_after(self, prefix: str, after: str):
        self.asked.append("list")
        return super().first_object_after(prefix, after)


def hot_file(first: int, queues: list[tuple[str, int]]) -> tuple[bytes, list[int], list[int]]:
    """Records of `queues` (one each, in order, of various sizes) back to back from physical offset `first`, where
    each is and its size."""
    data, places, sizes = b"", [], []
    for n, (topic, queue) in enumerate(queues):
        record = encode_stored(topic.encode(), queue, 0, first + len(data), 1, 1, b"", b"x" * (n % 50))
        places.append(first + len(data))
        sizes.append(len(record))
        data += record
    return data, places, sizes


def reader_of(data: bytes, first: int):
    return lambda at, length: data[at - first : at - first + length]


@pytest.fixture
def driver(tmp_path):
    return CountingDriver(tmp_path / "tier")


def test_a_hot_files_records_are_found_by_their_place_in_at_most_a_listing_and_three_reads(driver, monkeypatch):
    monkeypatch.setattr(directory, "SCAN_BYTES", 1000)  # records cross the windows the file is read in
    queues = [(f"topic-{n % 7}", n % 3) for n in range(300)]
    first = 5 << 40
    data, places, sizes = hot_file(first, queues)
    write_directory(driver, first, first + len(data), reader_of(data, first))
    other, _, _ = hot_file(7 << 40, [("elsewhere", 0)] * 50)  # another file's object beside it
    write_directory(driver, 7 << 40, (7 << 40) + len(other), reader_of(other, 7 << 40))

    for place, size, queue in zip(places, sizes, queues, strict=True):
        ids = IdDirectory(IndexReader(driver, SlotTables()))  # another process each time: nothing kept
        driver.asked.clear()
        assert ids.queues_at(place, size) == [queue]
        assert driver.asked.count("list") == 1 and driver.asked.count("read") <= 3, driver.asked
        driver.asked.clear()
        assert ids.queues_at(place, size) == [queue]
        assert driver.asked == ["read"]  # the object, its table and the name kept: the slot's entries alone
        driver.asked.clear()
        assert ids.queues_at(place, size + 1) == []  # a made-up id: the place of a record, another size
        assert driver.asked == ["read"]  # no name read: the entry's size differs
    ids = IdDirectory(IndexReader(driver, SlotTables()))
    assert ids.queues_at(places[0] + 1, sizes[1]) == []  # no record starts there
    assert ids.queues_at(first + len(data), sizes[0]) == []  # past the file: no object covers it
    assert ids.queues_at(3 << 40, sizes[0]) == []
    assert ids.queues_at((7 << 40) + 10**6, sizes[0]) == []


def test_a_damaged_record_ends_the_listing_there(driver):
    first = 1 << 20
    data, places, _ = hot_file(first, [("t", 0), ("t", 1), ("t", 2)])
    damaged = bytearray(data)
    damaged[places[2] - first - 1] ^= 0xFF  # the second record's last byte: its CRC fails
    listed = records_of(reader_of(bytes(damaged), first), first, first + len(data))
    assert [place for place, _, _, _ in listed] == [places[0]]
    cut = records_of(reader_of(data[:-1], first), first, first + len(data) - 1)  # the last record cut short
    assert [place for place, _, _, _ in cut] == places[:2]


def test_an_object_already_written_is_kept_and_old_objects_expire(driver):
    first = 1 << 20
    data, places, sizes = hot_file(first, [("t", 0)])
    write_directory(driver, first, first + len(data), reader_of(data, first))
    write_directory(driver, first, first + len(data), reader_of(data, first))  # a run that stopped before deleting
    assert [item.key for item in driver.objects(DIRECTORY_PREFIX)] == [directory_key(first, first + len(data))]
    assert expire_directories(driver, time.time() - 3600) == 0
    assert expire_directories(driver, time.time() + 1) == 1
    assert IdDirectory(IndexReader(driver, SlotTables())).queues_at(places[0], sizes[0]) == []
