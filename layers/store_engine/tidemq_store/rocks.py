"""One RocksDB instance with named column families, as the ConsumeQueue, the metadata and the tier's upload
progress use it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocksdict import BlockBasedOptions, ColumnFamily, Options, Rdict

from .errors import StoreClosed


def family_options() -> Options:
    """Bytes keys and values, with a Bloom filter so point lookups of absent keys stay cheap at scale."""
    options = Options(raw_mode=True)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options


class _ByName(dict):
    """Families' views or handles by name: once the database is closed (and this emptied), a use of any of them is
    StoreClosed, what a thread still at work when its store closes is to get, rather than a KeyError."""

    def __missing__(self, name: str) -> Any:
        if not self:
            raise StoreClosed(f"the store is closed (column family {name!r})")
        raise KeyError(name)


class Families:
    """`views[name]` reads and writes one family; `handles[name]` targets it inside a WriteBatch."""

    def __init__(
        self,
        path: Path,
        names: tuple[str, ...],
        *,
        atomic_flush: bool = False,
        retired: tuple[str, ...] = (),
        tuned: Callable[[], Options] = family_options,
    ) -> None:
        """Open (or create) the database with the families `names`; families in `retired` (kept by an older
        version, no longer used) are dropped if the database has them. `tuned` makes the options of the database and
        of each family (default: `family_options`)."""
        options = tuned()
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        options.set_atomic_flush(atomic_flush)
        found = set(Rdict.list_cf(str(path))) if (path / "CURRENT").exists() else set()
        present = [name for name in retired if name in found]  # RocksDB opens only with every family named
        families = {name: tuned() for name in (*names, *present)}
        self.db = Rdict(str(path), options, column_families=families)
        for name in present:
            self.db.drop_column_family(name)
        self.views: dict[str, Rdict] = _ByName((name, self.db.get_column_family(name)) for name in names)
        self.handles: dict[str, ColumnFamily] = _ByName((n, self.db.get_column_family_handle(n)) for n in names)

    def flush(self) -> None:
        """Persist every family's memtable."""
        for view in self.views.values():
            view.flush(True)

    def close(self) -> None:
        # Each family view holds a reference to the database: drop them all so RocksDB really closes.
        for view in self.views.values():
            view.close()
        self.views.clear()
        self.handles.clear()
        self.db.close()
