"""The tier's id directory: which queue a message id's record belongs to, once the hot file that held it is gone.

A message id names where its record was written in the hot tier (tidemq_protocol.record.ids): a commit-log
position on the embedded engine, a segment file's key and a position in it on the serverless backend. It does not
name the topic or the queue, and the tier's index (index.py) is kept per queue. While the hot file is there, the
record's header names its topic and queue, so a lookup goes straight to that queue's index. Before a hot file is
deleted (embedded: a commit-log segment, by hot retention; serverless: an idle segment file, by maintenance), the
store writes one directory object for it here, listing each record's physical offset with its topic and queue:

    .ids/<end:020d>-<first:020d>     the records of physical offsets [first, end): one hot file

An object is an IndexFile (index.py's format, read the same way) whose entries map `position_hash(physical)` to the
record's size and a reference into a table of queue names ("<topic>/<queue>", UTF-8) that follows the entries:
`size << 32 | at << 8 | length`. The size is the other half of the id: an id naming a record's place with another
size (made up) is told apart there, before any queue's index is read. Names begin with a dot, which no topic's can
(tidemq_protocol.names), so the directory is never taken for a queue.

A lookup by id whose position is below the hot tier's files costs, whatever the number of topics and queues:

    1 listing of one key     the first object whose name sorts after ".ids/<position:020d>-~": the one object
                             whose end lies past the position, which covers it if any does
    1 read                   its header and slot table
    1 ranged read            the slot's entries, when the slot holds any
    1 ranged read            the queue's name

(in a process that found the object and read the name before, both kept since objects never change: the slot's
entries alone), then the lookup in that one queue's index (lookup.py). An id whose place no object covers
(nothing was ever written there, or the object was deleted by hand) is not found after the listing, and one whose
place holds no record of its size (a made-up id) after the slot's entries: neither reaches a queue.

Why this and not a directory of ids sharded by a hash of the id, written with each upload: uploads are per queue,
so such a shard gains an object per queue uploaded, and a lookup would read them all until compaction merged them;
a hot file is deleted once, and its one object says everything about the ids that name it. Nor the topic and queue
in the id itself: ids are RocketMQ's fixed 24 digits of place and size (clients parse and keep them), and a record's
place is already unique across the store.

Ids that name no place in a hot file (a timer's id, a half message's id that its committed message keeps) are
looked up where they are kept (the timers, the transactions), not here.

Retention deletes a directory object once it is older than the longest retention of any topic (no record it lists
can be held still); a lookup checks the message it finds against its topic anyway. Places are one store's, so one
tier (bucket and prefix) holds one store's directory: a master and its slaves write the same objects (their logs are
the same), two brokers need prefixes of their own. An object lost (deleted by hand) is not rebuilt: the ids naming
its file's places are not found by id then (they still are by key, offset and time).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

from tidemq_protocol.errors import CorruptStore
from tidemq_protocol.record import SHORTEST_HEADER, read_header, size_at

from .index import IndexGone, IndexRange, IndexReader, encode_index, position_hash
from .segment import NAME_DIGITS, StoredObject, TierDriver, segment_name

DIRECTORY_PREFIX = ".ids/"
SCAN_BYTES = 8 * 1024 * 1024
"""How much of a hot file is read at a time while its directory object is made."""

Read = Callable[[int, int], bytes]
"""Reads `length` bytes of a hot file at a physical offset (fewer at its end)."""
RecordPlace = tuple[int, int, str, int]
"""A record's physical offset, its size, its topic and its queue."""
MAX_NAMES_BYTES = 1 << 24
"""The most bytes of queue names one object can hold (an entry's reference has 24 bits for where a name starts)."""

log = logging.getLogger("tidemq.tier")


def directory_key(first: int, end: int) -> str:
    return f"{DIRECTORY_PREFIX}{segment_name(end)}-{segment_name(first)}"


def parse_directory_key(item: StoredObject) -> IndexRange | None:
    """The physical offsets an object's name says it covers (None: not a directory object)."""
    end, dash, first = item.key.removeprefix(DIRECTORY_PREFIX).partition("-")
    if dash and len(end) == len(first) == NAME_DIGITS and end.isdigit() and first.isdigit() and int(first) < int(end):
        return IndexRange(item.key, int(first), int(end), item.modified_s)
    return None


def records_of(read: Read, first: int, end: int) -> Iterator[RecordPlace]:
    """Where each record of the hot file holding physical offsets [first, end) is, in order: read SCAN_BYTES at a
    time, every record checked (`read_header`); a damaged record ends the scan (logged), as recovery would end the
    file there."""
    at, data, position = first, b"", 0
    while True:
        while len(data) - position >= SHORTEST_HEADER and position + size_at(data, position) <= len(data):
            try:
                header = read_header(data, position)
            except CorruptStore as error:
                log.warning("hot file at %s: records from %s left out of the id directory (%s)", first, at, error)
                return
            yield header.physical_offset, header.size, header.topic, header.queue
            position += header.size
        if at >= end:
            if position < len(data):
                log.warning("hot file at %s: its last record is cut short; left out of the id directory", first)
            return
        chunk = read(at, min(SCAN_BYTES, end - at))
        if not chunk:
            return
        at += len(chunk)
        data, position = data[position:] + chunk, 0


def encode_directory(first: int, end: int, places: Iterable[RecordPlace]) -> bytes:
    """The directory object of the hot file holding physical offsets [first, end) whose records are `places`."""
    names: dict[bytes, int] = {}  # a queue's name: where it is in the table
    table_bytes, entries = 0, []
    for physical, size, topic, queue in places:
        name = f"{topic}/{queue}".encode()  # at most 127 + 1 + 5 bytes: a length in 8 bits
        at = names.get(name)
        if at is None:
            at = names[name] = table_bytes
            table_bytes += len(name)
            if table_bytes > MAX_NAMES_BYTES:
                raise ValueError(f"hot file at {first}: its records' queue names pass {MAX_NAMES_BYTES} bytes")
        entries.append((position_hash(physical), size << 32 | at << 8 | len(name)))
    return encode_index(first, end, entries) + b"".join(names)


def write_directory(driver: TierDriver, first: int, end: int, read: Read) -> None:
    """Write the directory object of the hot file holding physical offsets [first, end), before it is deleted
    (an object already there, from a run that stopped before the deletion, is kept)."""
    driver.create_object(directory_key(first, end), encode_directory(first, end, records_of(read, first, end)))


class IdDirectory:
    """Which queue a physical offset's record is of, from the directory objects on `reader`'s medium. The objects
    found and the queue names read are kept (up to KEPT of each): an object never changes, and one covering a place
    is the one that covers it for as long as it exists, so a warm lookup reads only the slot's entries."""

    KEPT = 4096

    def __init__(self, reader: IndexReader) -> None:
        self.reader = reader
        self._objects: OrderedDict[str, IndexRange] = OrderedDict()  # by key, least recently used first
        self._names: OrderedDict[tuple[str, int], tuple[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def queues_at(self, physical: int, size: int) -> list[tuple[str, int]]:
        """The queues the directory lists a record of `size` bytes at `physical` under (one, unless hashes collide;
        none when no object covers the place, or its record has another size)."""
        item = self._covering(physical)
        if item is None:
            return []
        try:
            listed = self.reader.offsets(item, position_hash(physical))
            return [self._name(item, value & 0xFFFF_FFFF) for value in listed if value >> 32 == size]
        except IndexGone:
            self._forget(item)  # retention deleted it: the place's records have expired
            return []

    def _covering(self, physical: int) -> IndexRange | None:
        with self._lock:
            for item in self._objects.values():
                if item.first <= physical < item.end:
                    self._objects.move_to_end(item.key)
                    return item
        after = f"{DIRECTORY_PREFIX}{segment_name(physical)}-~"  # past every object ending at `physical`
        listed = self.reader.driver.first_object_after(DIRECTORY_PREFIX, after)
        item = parse_directory_key(listed) if listed is not None else None
        if item is None or not item.first <= physical < item.end:
            return None
        self._keep(self._objects, item.key, item)
        return item

    def _name(self, item: IndexRange, reference: int) -> tuple[str, int]:
        """The queue an entry's reference (`at << 8 | length` in the object's name table) names."""
        with self._lock:
            known = self._names.get((item.key, reference))
        if known is not None:
            return known
        at, length = reference >> 8, reference & 0xFF
        name = self.reader.driver.read_range(item.key, self.reader.entries_end(item) + at, length)
        if name is None:
            raise IndexGone(f"tier id directory object {item.key} is gone")
        if len(name) != length:
            raise CorruptStore(f"{item.key}: a queue name past the object's end")
        topic, _, queue = name.decode().rpartition("/")
        self._keep(self._names, (item.key, reference), (topic, int(queue)))
        return topic, int(queue)

    def _keep(self, kept: OrderedDict, key, value) -> None:
        with self._lock:
            kept[key] = value
            while len(kept) > self.KEPT:
                kept.popitem(last=False)

    def _forget(self, item: IndexRange) -> None:
        with self._lock:
            self._objects.pop(item.key, None)


def expire_directories(driver: TierDriver, before_s: float) -> int:
    """Delete the directory objects written before `before_s` (seconds since the epoch); how many."""
    doomed = [item for item in driver.objects(DIRECTORY_PREFIX) if item.modified_s < before_s]
    for item in doomed:
        driver.delete_object(item.key)
    return len(doomed)
