"""Listings racing deletions, for the tests of both sides (in process against the engine:
tests/integration/test_listing_concurrency.py; over HTTP through a gateway: tests/e2e/test_gateway_concurrency.py).

Entries of one kind are made, some kept and the rest churned: deleter threads delete each of theirs and make it
again, round after round, while lister threads page through the listing, pass after pass, until the deleters are
done; some listers ask for small pages (many page boundaries to get right), others for larger ones (more entries in
one page for a delete to hit while it is read). A barrier starts every thread at once.

Each pass must list the names in strictly increasing order (none twice), every kept entry, and nothing that was
never made; any error a listing raises ends its thread and fails the race. The report says how much the threads
overlapped: deletes that completed while a page was being read are the race itself, so a test can check that it
really happened rather than trust the timing.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

SWITCH_INTERVAL_S = 0.0001
"""How often CPython hands the GIL between runnable threads during a race (its default: every 5 ms). A listing of
an embedded store holds the GIL while it runs: switching often interleaves the threads at more points, and keeps
the listers from starving the deleters, which give the GIL up at every fsync and wait for it back."""

PageOfNames = tuple[list[str], str | None]
"""A page of a listing as the race reads it: the names, and where the next page starts (None: nothing follows)."""


@dataclass(frozen=True)
class Entries:
    """One kind of entry, as the race makes, deletes and lists it (`page(after, limit)`)."""

    create: Callable[[str], object]
    delete: Callable[[str], object]
    page: Callable[[str | None, int], PageOfNames]


@dataclass(frozen=True)
class RaceReport:
    deletes: int
    passes: int  # complete page-by-page listings
    passes_racing_deletes: int  # ... during which some delete completed
    pages_racing_deletes: int  # single pages during whose reading some delete completed


class DeleteCount:
    """Deletes completed so far, counted across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self) -> None:
        with self._lock:
            self.value += 1


@contextlib.contextmanager
def switching_threads_often() -> Iterator[None]:
    """Meanwhile, CPython switches threads every SWITCH_INTERVAL_S."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def race_listings(
    entries: Entries,
    prefix: str,
    *,
    kept: int = 10,
    churned: int = 20,
    deleters: int = 4,
    listers: int = 4,
    rounds: int = 2,
    limits: Sequence[int] = (3, 20, 1000, 20),
) -> RaceReport:
    """Make `kept` + `churned` entries named `prefix` + a number (kept and churned ones interleaved in name order),
    race `deleters` threads deleting and remaking the churned ones `rounds` times each against `listers` threads
    paging through the listing (each lister at one of `limits` names a page); raise AssertionError with every
    thread's failure."""
    names = [f"{prefix}{n:03d}" for n in range(kept + churned)]
    keep = set(names[:: len(names) // kept][:kept])
    churn = [name for name in names if name not in keep]
    for name in names:
        entries.create(name)

    start = threading.Barrier(deleters + listers)
    deleted_all = threading.Event()  # every deleter is done: the listers finish their pass and stop
    deletes = DeleteCount()

    def deleter(mine: list[str]) -> None:
        start.wait()
        for _ in range(rounds):
            for name in mine:
                entries.delete(name)
                deletes.add()
                entries.create(name)

    def lister(limit: int) -> tuple[int, int, int]:
        start.wait()
        passes = racing_passes = racing_pages = 0
        while passes == 0 or not deleted_all.is_set():
            listed, after, deletes_before_pass = [], None, deletes.value
            while True:
                before = deletes.value
                page, after = entries.page(after, limit)
                racing_pages += deletes.value > before
                listed += [name for name in page if name.startswith(prefix)]
                if after is None:
                    break
            passes += 1
            racing_passes += deletes.value > deletes_before_pass
            assert listed == sorted(set(listed)), f"a pass listed names out of order or twice: {listed}"
            assert keep <= set(listed), f"a pass left out entries never deleted: {sorted(keep - set(listed))}"
            assert set(listed) <= set(names), f"a pass listed entries never made: {sorted(set(listed) - set(names))}"
        return passes, racing_passes, racing_pages

    with switching_threads_often(), ThreadPoolExecutor(deleters + listers) as pool:
        deleting_threads = [pool.submit(deleter, churn[n::deleters]) for n in range(deleters)]
        listing_threads = [pool.submit(lister, limits[n % len(limits)]) for n in range(listers)]
        for thread in deleting_threads:
            thread.exception()  # waits for it to end, however it ends
        deleted_all.set()
    failures = [repr(t.exception()) for t in deleting_threads + listing_threads if t.exception() is not None]
    assert not failures, f"{len(failures)} of {deleters + listers} threads failed:\n" + "\n".join(failures)
    counts = [t.result() for t in listing_threads]
    return RaceReport(
        deletes=deletes.value,
        passes=sum(c[0] for c in counts),
        passes_racing_deletes=sum(c[1] for c in counts),
        pages_racing_deletes=sum(c[2] for c in counts),
    )
