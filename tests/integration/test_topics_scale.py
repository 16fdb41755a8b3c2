"""Metadata scales to many topics (RIP-66): each change is a small append, never a table rewrite."""

from __future__ import annotations

from pathlib import Path

from tidemq_store import StoreConfig, TopicConfig, open_store

TOPICS = 100_000


def wal_bytes(metadata: Path) -> int:
    return sum(p.stat().st_size for p in metadata.glob("*.log"))


def table_files(metadata: Path) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns) for p in metadata.glob("*.sst")}


def create(store, first: int, count: int) -> None:
    for i in range(first, first + count):
        store.create_topic(TopicConfig(name=f"topic-{i:07d}", queues=4))


def test_100k_topics_survive_a_reopen_and_each_change_only_appends(tmp_path):
    config = StoreConfig(home=tmp_path / "store")
    metadata = config.home / "metadata"
    with open_store(config) as store:
        wal_start = wal_bytes(metadata)
        create(store, 0, 1000)
        bytes_per_create_when_small = (wal_bytes(metadata) - wal_start) / 1000
        create(store, 1000, TOPICS - 2000)
        store.meta.flush()  # put what exists into immutable table files
        tables, wal_before = table_files(metadata), wal_bytes(metadata)
        create(store, TOPICS - 1000, 1000)
        bytes_per_create_when_large = (wal_bytes(metadata) - wal_before) / 1000
        assert table_files(metadata) == tables, "existing table files were rewritten by topic creation"
    assert bytes_per_create_when_large < 1024
    assert bytes_per_create_when_large <= 1.2 * bytes_per_create_when_small

    with open_store(config) as store:
        names, after = [], None
        while page := store.list_topics(after=after, limit=1000):
            names += [t.name for t in page]
            after = page[-1].name
        assert names == [f"topic-{i:07d}" for i in range(TOPICS)]
        assert store.get_topic("topic-0054321").queues == 4
