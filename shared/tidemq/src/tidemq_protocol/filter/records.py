"""A SQL92 filter applied to records as stored, without decoding them into messages: what a broker's read (hot
or cold) and any other reader of commit-log records use to pass over the records a subscription does not select.

A run of records is walked by its size fields alone (`record.record_starts`). When the filter has needles (what a
selected record's encoded properties must hold: evaluation.py), one `bytes.find` per needle over the whole run finds
the few records that can be selected, and only those are evaluated; otherwise each record is, on its encoded
properties where they lie (`record.PropertiesView`), reading only the properties the expression names. An expression
that reads one property (`amount < 10`, `region IN (...)`) is evaluated on the value right after each needle found,
before anything else of the record is read, once per distinct value of a run, and only a needle that lies in its
record's properties, at a name's start, can select the record. Nothing here checks a record's CRC: the records
chosen are checked as every record is, by whoever decodes them (the broker's `get`, or the client of
`read_records`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator

from ..record import PropertiesView, properties_at, record_starts
from .sql import SqlFilter

_VALUE_END = 0x02  # what ends a property's value, and so what precedes every name but the first


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
        chosen: Iterable[int] = _evaluated(data, starts, range(len(starts)), sql)
    elif len(sql.reads) == 1:
        chosen = _by_one_property(data, starts, sql)
    else:
        candidates = sorted({bisect_right(starts, hit) - 1 for hit in _hits(data, sql.needles)})
        chosen = _evaluated(data, starts, candidates, sql)
    last = len(starts) - 1
    for index in chosen:
        yield starts[index], starts[index + 1] if index < last else len(data)


def _evaluated(data: bytes, starts: list[int], candidates: Iterable[int], sql: SqlFilter) -> Iterator[int]:
    """The candidates (indexes into `starts`) `sql` selects, each evaluated on its properties where they lie."""
    for index in candidates:
        if sql.selects(PropertiesView(data, *properties_at(data, starts[index]))):
            yield index


def _by_one_property(data: bytes, starts: list[int], sql: SqlFilter) -> list[int]:
    """The records `sql`, which reads one property, selects: evaluated on the value after each needle found (every
    needle starts with that property's `name\\x01`), a record kept only once the needle is found to be its property
    (a needle can lie in a body, or end a longer name)."""
    (name,) = sql.reads
    value_at = len(name.encode()) + 1
    find, selects, as_integer = data.find, sql.selects, sql.integer_test
    verdicts: dict[bytes, bool] = {}  # the same value, the same verdict: values repeat (regions, amounts, flags)
    chosen: set[int] = set()
    for hit in _hits(data, sql.needles or frozenset()):
        value = hit + value_at
        value_end = find(b"\x02", value)
        if value_end < 0:
            continue
        raw = data[value:value_end]
        if as_integer is not None and raw.isdigit() and len(raw) < 19:  # ASCII digits, within 64 bits
            verdict = as_integer(int(raw))
        else:
            verdict = verdicts.get(raw)
            if verdict is None:
                verdict = verdicts[raw] = selects({name: raw.decode(errors="replace")})
        if not verdict:
            continue
        index = bisect_right(starts, hit) - 1
        start, end = properties_at(data, starts[index])
        if start <= hit and value_end < end and (hit == start or data[hit - 1] == _VALUE_END):
            chosen.add(index)
    return sorted(chosen)
