"""A SQL92 filter applied to records as stored, without decoding them into messages: what a broker's read (hot
or cold) and any other reader of commit-log records use to pass over the records a subscription does not select.

A run of records is walked by its size fields alone (`record.record_starts`). When the filter has needles (what a
selected record's encoded properties must hold: sql.py), one `bytes.find` per needle over the whole run finds the
few records that can be selected, and only those are evaluated; otherwise each record is. Either way a record is
evaluated on its encoded properties where they lie (`record.PropertiesView`), reading only the properties the
expression names. Nothing here checks a record's CRC: the records chosen are checked as every record is, by
whoever decodes them (the broker's `get`, or the client of `read_records`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from ..record import PropertiesView, properties_at, record_starts
from .sql import SqlFilter


def _hits(data: bytes, needles: frozenset[bytes]) -> Iterator[int]:
    """Every position in `data` where one of `needles` starts."""
    find = data.find
    for needle in needles:
        found = find(needle)
        while found >= 0:
            yield found
            found = find(needle, found + 1)


def selected_records(data: bytes, sql: SqlFilter) -> Iterator[tuple[int, int]]:
    """(start, end) in `data` (records back to back, as a read chose them) of each record `sql` selects, in order."""
    if sql.needles is not None and not sql.needles:
        return  # the expression is never true
    starts = record_starts(data)
    if sql.needles is None:
        candidates: list[int] | range = range(len(starts))
    else:
        candidates = sorted({bisect_right(starts, hit) - 1 for hit in _hits(data, sql.needles)})
    last = len(starts) - 1
    for index in candidates:
        start = starts[index]
        if sql.selects(PropertiesView(data, *properties_at(data, start))):
            yield start, starts[index + 1] if index < last else len(data)
