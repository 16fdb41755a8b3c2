"""The cold tier over an in-memory hot store (memory_hot_store.py): the tier needs nothing of the hot store but
its interface (`tidemq_store.hot.HotStore`). POSIX tier files in tmp_path; the tier's own progress database."""

from __future__ import annotations

import shutil

import pytest

from tidemq_protocol.errors import OffsetOutOfRange
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TieredStorageLevel, TopicConfig
from tidemq_store.tiered import PosixDriver, TieredMessageStore

from ..tier_reads import read_all, read_all_records, wait_uploaded
from .memory_hot_store import MemoryHotStore


@pytest.fixture
def config(tmp_path):
    def build(**overrides) -> StoreConfig:
        return StoreConfig(
            home=tmp_path / "home", tier="posix", tier_path=tmp_path / "tier", tier_upload_age_ms=50, **overrides
        )

    return build


@pytest.fixture
def tiered(config):
    """Tier stores over one in-memory hot store (a second one opened later sees the same hot data)."""
    opened: list[TieredMessageStore] = []
    hot = MemoryHotStore(config())

    def open_tier(**overrides) -> TieredMessageStore:
        store = TieredMessageStore(hot, PosixDriver(config().tier_directory), config(**overrides))
        opened.append(store)
        return store

    yield open_tier
    for store in opened:
        store.close()


def produce(store, topic: str = "t", queues: int = 2, batches: int = 10) -> None:
    for b in range(batches):
        store.put(
            topic,
            [
                Message(
                    f"{b}-{i}".encode() * (1 + i % 7),
                    queue=(b + i) % queues,
                    keys=(f"k{b}{i}",),
                    tag="A" if i % 3 == 0 else "B",
                )
                for i in range(20)
            ],
        )


def test_the_dispatcher_uploads_every_acknowledged_message_it_is_told_of_by_the_put_listener(tiered):
    store = tiered()
    store.create_topic(TopicConfig(name="t", queues=2))
    produce(store)
    wait_uploaded(store, "t")
    assert [(s.cold_min_offset, s.cold_max_offset) for s in store.tier_status("t")] == [(0, 100), (0, 100)]
    assert store.dispatcher.uploaded_messages == 200


def test_reads_below_the_hot_minimum_come_from_the_tier_identical_to_what_was_stored(tiered):
    store = tiered()
    store.create_topic(TopicConfig(name="t", queues=2))
    produce(store)
    expected = {q: read_all(store.hot, "t", q) for q in range(2)}
    records = read_all_records(store.hot, "t", 0)
    wait_uploaded(store, "t")
    for queue in range(2):
        store.hot.expire("t", queue, 60)  # hot retention removed the first 60 messages of each queue
    with pytest.raises(OffsetOutOfRange):
        store.hot.get("t", 0, 0)
    assert [q.min_offset for q in store.queue_offsets("t")] == [0, 0]  # the tier still holds them
    assert {q: read_all(store, "t", q) for q in range(2)} == expected
    assert read_all_records(store, "t", 0) == records  # byte for byte
    assert read_all(store, "t", 1, tag="A") == [m for m in expected[1] if m[4] == "A"]


def test_force_reads_cold_wherever_the_tier_holds_the_offset_and_hot_beyond_it(tiered):
    store = tiered(tier_level=TieredStorageLevel.FORCE)
    store.create_topic(TopicConfig(name="t", queues=1))
    produce(store, queues=1, batches=5)
    wait_uploaded(store, "t")
    produce(store, queues=1, batches=1)  # not uploaded yet: read hot
    expected = read_all(store.hot, "t", 0)
    assert read_all(store, "t", 0) == expected
    assert store.cache.stats["misses"] > 0  # the first 100 came through the read-ahead cache


def test_upload_progress_is_the_tiers_own_and_a_restart_resumes_without_uploading_twice(tiered, config):
    store = tiered()
    store.create_topic(TopicConfig(name="t", queues=1))
    produce(store, queues=1, batches=3)
    wait_uploaded(store, "t")
    assert store.progress.get("t", 0).commit_offset == 60
    store.close()
    produce(store.hot, queues=1, batches=2)  # written while no tier listened
    again = tiered()
    wait_uploaded(again, "t")
    tiered_queue = again.dispatcher.tiered_queue("t", 0)
    assert (tiered_queue.min_offset, tiered_queue.max_offset) == (0, 100)
    assert again.dispatcher.uploaded_messages == 40  # only what was new


def test_lost_progress_is_rebuilt_from_the_tier_files(tiered, config):
    store = tiered()
    store.create_topic(TopicConfig(name="t", queues=2))
    produce(store)
    wait_uploaded(store, "t")
    store.close()
    shutil.rmtree(config().home / "tier-progress")
    again = tiered()
    assert [again.progress.get("t", q).commit_offset for q in range(2)] == [100, 100]
    assert [s.upload_lag_messages for s in again.tier_status("t")] == [0, 0]
    assert again.dispatcher.uploaded_messages == 0


def test_hot_release_is_offered_only_what_the_tier_holds(tiered):
    store = tiered(hot_retention_ms=0)
    policy = store.hot.release_policy
    assert policy is not None and policy.min_age_ms == 0
    store.create_topic(TopicConfig(name="t", queues=1))
    produce(store, queues=1, batches=2)
    wait_uploaded(store, "t")
    assert policy.uploaded_before() == store.hot.written_position  # everything is in the tier
    store.dispatcher.close()  # no more uploads
    produce(store, queues=1, batches=1)
    first_waiting = store.hot.entries("t", 0, 40, 41)[0]
    assert policy.uploaded_before() == first_waiting.position


def test_a_forcible_release_is_offered_only_what_the_tier_holds_and_never_under_disable(tiered):
    store = tiered()
    store.create_topic(TopicConfig(name="t", queues=1))
    produce(store, queues=1, batches=2)
    wait_uploaded(store, "t")
    store.dispatcher.close()  # no more uploads
    produce(store, queues=1, batches=1)
    store.release_to_tier(1000)
    assert store.hot.released == [(1000, store.hot.entries("t", 0, 40, 41)[0].position)]
    store.hot.released.clear()
    store.close()
    assert tiered(tier_level=TieredStorageLevel.DISABLE).release_to_tier(1000).segments_deleted == 0
    assert store.hot.released == []  # DISABLE never reads them back: none is offered


def test_deleting_a_topic_forgets_its_tier_files_and_progress(tiered, config):
    store = tiered()
    store.create_topic(TopicConfig(name="t", queues=1))
    produce(store, queues=1, batches=2)
    wait_uploaded(store, "t")
    store.delete_topic("t")
    assert store.progress.get("t", 0) is None
    assert not (config().tier_directory / "t").exists()
