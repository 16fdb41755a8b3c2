"""Tiered storage against a moto S3 server over HTTP (and the POSIX driver): upload, hot removal, cold reads."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from tidemq_protocol.errors import OffsetOutOfRange
from tidemq_protocol.message import Message
from tidemq_protocol.record import decode_records
from tidemq_store import MessageStore, TieredStorageLevel, TopicConfig
from tidemq_store.tiered import TieredMessageStore

from ..tier_reads import read_all, read_all_records, wait_uploaded

COLD_LEVELS = [TieredStorageLevel.NOT_IN_DISK, TieredStorageLevel.NOT_IN_MEM, TieredStorageLevel.FORCE]


def tier_options(**overrides) -> dict:
    options = {
        "tier": "s3",
        "tier_bucket": f"tier-{uuid.uuid4().hex[:12]}",
        "tier_upload_age_ms": 100,
        "commitlog_segment_bytes": 64 * 1024,
        "hot_retention_ms": 0,
        "tier_in_memory_bytes": 0,
    }
    return options | overrides


def produce(store: MessageStore, topic: str, queues: int, batches: int = 40) -> None:
    """Messages of every shape: binary bodies of varied sizes, keys, tags A/B, user properties."""
    for b in range(batches):
        store.put(
            topic,
            [
                Message(
                    os.urandom(16 + (b * 37 + i * 11) % 900),
                    queue=(b + i) % queues,
                    keys=(f"k{b}-{i}",),
                    tag="A" if (b + i) % 5 == 0 else "B",
                    properties={"batch": str(b), "i": str(i)},
                )
                for i in range(25)
            ],
        )


@pytest.mark.parametrize("level", COLD_LEVELS)
def test_every_message_comes_back_from_s3_identical_after_its_hot_segments_are_removed(aws_env, open_test_store, level):
    store = open_test_store(**tier_options(tier_level=level))
    assert isinstance(store, TieredMessageStore)
    store.create_topic(TopicConfig(name="orders", queues=4))
    produce(store, "orders", 4)
    hot = {q: read_all(store.hot, "orders", q) for q in range(4)}
    hot_records = {q: read_all_records(store.hot, "orders", q) for q in range(4)}
    assert sum(map(len, hot.values())) == 1000

    wait_uploaded(store, "orders")
    report = store.clean_expired()
    assert report.segments_deleted > 0
    statuses = store.tier_status("orders")
    assert all(s.hot_min_offset > 0 and s.cold_min_offset == 0 for s in statuses), statuses
    assert all(s.cold_max_offset == s.max_offset == 250 for s in statuses), statuses
    with pytest.raises(OffsetOutOfRange):  # the hot tier alone no longer has them
        store.hot.get("orders", 0, 0)

    for queue in range(4):
        assert read_all(store, "orders", queue) == hot[queue]  # bytes, ids, properties, offsets
        assert read_all_records(store, "orders", queue) == hot_records[queue]
    assert [q.min_offset for q in store.queue_offsets("orders")] == [0, 0, 0, 0]
    assert store.cache.stats["misses"] > 0


def test_force_reads_cold_while_the_hot_tier_still_has_the_data_and_falls_back_to_hot_for_the_rest(
    aws_env, open_test_store
):
    store = open_test_store(**tier_options(tier_level="FORCE", tier_upload_age_ms=3_600_000, hot_retention_ms=None))
    store.create_topic(TopicConfig(name="t", queues=1))
    produce(store, "t", 1, batches=4)
    expected = read_all(store.hot, "t", 0)

    assert read_all(store, "t", 0) == expected  # nothing uploaded yet: served hot
    assert store.cache.stats["misses"] == 0
    assert store.upload_now("t") == 100
    produce(store, "t", 1, batches=2)  # in the hot tier only
    expected = read_all(store.hot, "t", 0)
    assert read_all(store, "t", 0) == expected  # 0..99 cold, 100..149 hot
    assert store.cache.stats["misses"] > 0


def test_disable_never_reads_cold_and_keeps_the_hot_segments(aws_env, open_test_store):
    store = open_test_store(**tier_options(tier_level="DISABLE"))
    store.create_topic(TopicConfig(name="t", queues=2))
    produce(store, "t", 2)
    expected = {q: read_all(store, "t", q) for q in range(2)}
    wait_uploaded(store, "t")
    assert store.clean_expired().segments_deleted == 0
    assert {q: read_all(store, "t", q) for q in range(2)} == expected
    assert store.cache.stats["misses"] == 0


def test_a_tag_filtered_cold_read_returns_only_matching_messages_and_a_next_offset_past_the_rest(
    aws_env, open_test_store
):
    store = open_test_store(**tier_options())
    store.create_topic(TopicConfig(name="t", queues=1))
    for b in range(10):
        store.put(
            "t",
            [Message(f"{b}-{i}".encode().ljust(300, b"."), queue=0, tag="A" if i == 7 else f"B{i}") for i in range(50)],
        )
    store.upload_now("t")
    store.clean_expired()
    assert store.tier_status("t")[0].hot_min_offset > 100

    result = store.get("t", 0, 0, max_messages=3, message_filter="A")
    found = [(m.queue_offset, m.body.rstrip(b"."), m.tag) for m in result.messages]
    assert found == [(7, b"0-7", "A"), (57, b"1-7", "A"), (107, b"2-7", "A")]
    assert result.next_offset == 108  # past the last match, not past what was fetched
    assert [m[1] for m in read_all(store, "t", 0, tag="A")] == [50 * b + 7 for b in range(10)]

    batch = store.read_records("t", 0, 0, max_messages=100, message_filter="A || B3")
    messages = decode_records(batch.records)
    assert {m.tag for m in messages} == {"A", "B3"} and batch.count == len(messages) == 20
    assert batch.next_offset == 500


def test_the_posix_driver_keeps_queues_as_segment_files(open_test_store, tmp_path):
    store = open_test_store(**tier_options(tier="posix", tier_path=tmp_path / "efs", tier_segment_bytes=8 * 1024))
    store.create_topic(TopicConfig(name="t", queues=2))
    for _ in range(4):  # four uploads: a segment fills up (8 KiB) and the next one starts
        produce(store, "t", 2, batches=10)
        store.upload_now("t")
    expected = {q: read_all(store.hot, "t", q) for q in range(2)}
    store.clean_expired()
    assert store.tier_status("t")[0].hot_min_offset > 0
    assert {q: read_all(store, "t", q) for q in range(2)} == expected
    files = sorted((tmp_path / "efs" / "t" / "0" / "commitlog").iterdir())
    assert len(files) > 1 and all(f.name.isdigit() and len(f.name) == 20 for f in files)
    assert files[0].name == "0" * 20


def test_upload_resumes_after_a_restart_and_stores_nothing_twice(aws_env, open_test_store, store_config):
    options = tier_options(tier_upload_age_ms=3_600_000, hot_retention_ms=None)
    store = open_test_store(**options)
    store.create_topic(TopicConfig(name="t", queues=2))
    produce(store, "t", 2, batches=8)
    store.upload_now("t")
    produce(store, "t", 2, batches=8)  # waiting when the store closes
    assert [s.upload_lag_messages for s in store.tier_status("t")] == [100, 100]
    store.close()

    store = open_test_store(**(options | {"tier_upload_age_ms": 50}))
    wait_uploaded(store, "t")
    for status in store.tier_status("t"):
        assert (status.cold_min_offset, status.cold_max_offset) == (0, 200)
        tiered = store.dispatcher.tiered_queue("t", status.queue)
        entries = tiered.entries(0, 200)
        positions = [position for position, *_ in entries]
        assert positions == sorted(set(positions))  # dense, each record once
        records = decode_records(tiered.read(0, entries[-1][0] + entries[-1][1]))
        assert [m.queue_offset for m in records] == list(range(200))


def test_tier_status_shows_the_upload_lag_until_an_upload_is_forced(aws_env, open_test_store):
    store = open_test_store(**tier_options(tier_upload_age_ms=3_600_000))
    store.create_topic(TopicConfig(name="t", queues=2))
    produce(store, "t", 2, batches=4)
    time.sleep(0.05)
    lagging = store.tier_status("t")
    assert [s.upload_lag_messages for s in lagging] == [50, 50]
    assert all(s.upload_lag_seconds > 0 and s.cold_max_offset is None for s in lagging)
    assert store.upload_now("t") == 100
    assert [(s.upload_lag_messages, s.cold_max_offset) for s in store.tier_status("t")] == [(0, 50), (0, 50)]


def test_topic_retention_deletes_expired_cold_segments(aws_env, open_test_store):
    store = open_test_store(**tier_options(hot_retention_ms=None))
    store.create_topic(TopicConfig(name="t", queues=1, retention_ms=60_000))
    produce(store, "t", 1, batches=4)
    store.upload_now("t")
    produced_at = time.time_ns() // 1_000_000
    produce(store, "t", 1, batches=4)
    store.upload_now("t")
    tiered = store.dispatcher.tiered_queue("t", 0)
    assert (tiered.min_offset, tiered.max_offset) == (0, 200)

    store.clean_expired(now_ms=produced_at + 60_000)  # only the first upload has expired
    assert (tiered.min_offset, tiered.max_offset) == (100, 200)
    assert tiered.commitlog.start > 0
    with pytest.raises(OffsetOutOfRange):
        store.get("t", 0, 0)


def test_offset_for_timestamp_searches_the_cold_tier(aws_env, open_test_store):
    store = open_test_store(**tier_options())
    store.create_topic(TopicConfig(name="t", queues=1))
    stamps = []
    for _ in range(6):
        stamps.append(store.put("t", [Message(b"x" * 500, queue=0)] * 50)[0].store_timestamp)
        time.sleep(0.01)
    store.upload_now("t")
    store.clean_expired()
    assert store.tier_status("t")[0].hot_min_offset > 100
    assert store.offset_for_timestamp("t", 0, stamps[1]) == 50
    assert store.offset_for_timestamp("t", 0, 0) == 0


def test_deleting_a_topic_deletes_its_objects_in_s3(aws_env, open_test_store):
    options = tier_options()
    store = open_test_store(**options)
    store.create_topic(TopicConfig(name="gone", queues=2))
    produce(store, "gone", 2, batches=4)
    store.upload_now("gone")
    client = store.driver.client
    listed = client.list_objects_v2(Bucket=options["tier_bucket"], Prefix="tidemq/gone/")
    assert listed["KeyCount"] == 6  # per queue: one commit-log and one ConsumeQueue segment, one index object
    store.delete_topic("gone")
    assert client.list_objects_v2(Bucket=options["tier_bucket"], Prefix="tidemq/gone/")["KeyCount"] == 0
    assert store.progress.get("gone", 0) is None
