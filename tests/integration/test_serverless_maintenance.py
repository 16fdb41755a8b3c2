"""The serverless backend's maintenance run against a moto server over HTTP: upload of every dirty queue to S3,
cold reads below the hot boundary, deleting files nothing references, retention, doing nothing when idle."""

from __future__ import annotations

import threading
import time

import pytest

from tidemq_protocol.errors import OffsetOutOfRange
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig
from tidemq_store.tiered.container import TieredQueue

from .test_tier import produce, read_all, read_all_records


def segment_files(store) -> list[str]:
    return sorted(path.name for path in store.segments.iterdir())


def test_maintenance_moves_every_queue_to_s3_and_cold_reads_return_the_same_messages(serverless):
    store = serverless(efs_segment_grace_s=1.0)
    store.create_topic(TopicConfig(name="orders", queues=3))
    produce(store, "orders", 3)
    before = {q: read_all(store, "orders", q) for q in range(3)}
    records = {q: read_all_records(store, "orders", q) for q in range(3)}
    tagged = {q: read_all(store, "orders", q, tag="A") for q in range(3)}

    first = store.maintenance().run()
    assert (first.messages, first.failed) == (1000, [])
    for q in range(3):
        state = store.index.state("orders", q)
        assert state.hot_offset == state.next_offset == len(before[q]) and not state.dirty
        assert list(store.index.indexed_batches("orders", q)) == []  # the hot index is gone: reads go cold
        tier = TieredQueue(store.tier.driver, "orders", q, store.config.tier_segment_bytes)
        assert (tier.min_offset, tier.max_offset) == (0, len(before[q]))

    time.sleep(1.1)  # every file is idle for the grace period by now: this run or the last deleted them
    assert first.files_deleted + store.maintenance().run().files_deleted >= 1
    assert segment_files(store) == []
    for q in range(3):  # served from S3 alone now: byte for byte what the hot tier served
        assert read_all(store, "orders", q) == before[q]
        assert read_all(store, "orders", q, tag="A") == tagged[q]
        assert read_all_records(store, "orders", q) == records[q]
    other = serverless()  # another process: its own views of the tier
    assert all(read_all(other, "orders", q) == before[q] for q in range(3))

    store.put("orders", [Message(b"after %d" % i, queue=1) for i in range(5)])  # hot again above the boundary
    after = read_all(store, "orders", 1)
    assert after[: len(before[1])] == before[1]
    assert [m[1] for m in after] == list(range(len(before[1]) + 5))
    assert [m[2] for m in after[-5:]] == [b"after %d" % i for i in range(5)]


def test_a_run_with_nothing_new_makes_no_dynamodb_or_s3_request(serverless):
    store = serverless()
    store.create_topic(TopicConfig(name="idle", queues=2))
    produce(store, "idle", 2, batches=4)
    s3_requests = []
    store.tier.driver.client.meta.events.register("before-send.s3", lambda **_: s3_requests.append(1))
    maintenance = store.maintenance(skip_margin_s=0.2)
    time.sleep(0.3)  # past the margin a put may take to be sequenced after its append
    assert maintenance.run().messages == 100
    assert s3_requests, "the upload went to S3"
    s3_requests.clear()
    dynamodb_before = store.tables.requests
    report = maintenance.run()
    assert report.skipped
    assert (store.tables.requests - dynamodb_before, len(s3_requests)) == (0, 0)

    store.put("idle", [Message(b"new", queue=0)])
    report = maintenance.run()
    assert not report.skipped and report.messages == 1


def test_maintenance_deletes_bytes_no_batch_references_and_keeps_every_sequenced_one(serverless):
    store = serverless(efs_segment_grace_s=0.5)
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"kept %d" % i) for i in range(10)])
    # a writer that died between its append and its sequencing: bytes in its own file, no batch entry
    orphan = serverless(efs_segment_grace_s=0.5)
    orphaned = orphan.writer.append(lambda start: b"\x00" * 4096).file
    orphan.writer.close()
    assert len(segment_files(store)) == 2
    time.sleep(0.6)
    store.maintenance().run()  # spares the file whose entries it indexed itself (the index lags in AWS)
    assert orphaned not in segment_files(store)
    store.maintenance().run()
    assert segment_files(store) == []
    assert [m[2] for m in read_all(store, "t", 0)] == [b"kept %d" % i for i in range(10)]


def test_overlapping_runs_upload_each_message_exactly_once(serverless):
    writer = serverless()
    writer.create_topic(TopicConfig(name="race", queues=4))
    produce(writer, "race", 4, batches=60)
    expected = {q: read_all(writer, "race", q) for q in range(4)}
    runners = [serverless() for _ in range(3)]
    reports = []
    threads = [threading.Thread(target=lambda s=s: reports.append(s.maintenance().upload())) for s in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.messages for r in reports) == 1500  # each message uploaded by one run only
    for q in range(4):
        tier = TieredQueue(writer.tier.driver, "race", q, writer.config.tier_segment_bytes)
        entries = tier.entries(0, tier.max_offset)
        assert len(entries) == len(expected[q])
        assert read_all(writer, "race", q) == expected[q]


def test_retention_expires_cold_and_hot_messages_and_moves_the_minimum(serverless):
    store = serverless()
    store.create_topic(TopicConfig(name="short", queues=1, retention_ms=1000))
    store.put("short", [Message(b"old %d" % i) for i in range(20)])
    store.maintenance().run()  # these go cold
    store.put("short", [Message(b"hot %d" % i) for i in range(5)])  # these stay hot
    report = store.clean_expired(now_ms=time.time_ns() // 1_000_000 + 10_000)
    assert report.messages_expired == 25
    offsets = store.queue_offsets("short")[0]
    assert (offsets.min_offset, offsets.max_offset) == (25, 25)
    with pytest.raises(OffsetOutOfRange):
        store.get("short", 0, 0)
    store.put("short", [Message(b"fresh")])
    assert [m.body for m in store.get("short", 0, 25).messages] == [b"fresh"]


def test_upload_now_and_tier_status_show_the_cold_range(serverless):
    store = serverless()
    store.create_topic(TopicConfig(name="status", queues=2))
    store.put("status", [Message(b"m", queue=0)] * 30)
    lagging = store.tier_status("status")[0]
    assert (lagging.cold_max_offset, lagging.upload_lag_messages) == (None, 30)
    assert store.upload_now("status") == 30
    done = store.tier_status("status")
    assert [(s.cold_min_offset, s.cold_max_offset, s.upload_lag_messages) for s in done] == [
        (0, 30, 0),
        (None, None, 0),
    ]


def test_without_a_cold_tier_a_run_indexes_the_queue_and_then_leaves_it_alone(serverless):
    store = serverless(tier="off")
    store.create_topic(TopicConfig(name="plain", queues=1))
    for i in range(3):
        store.put("plain", [Message(b"m%d" % i)])
    time.sleep(0.3)
    maintenance = store.maintenance(skip_margin_s=0.2)
    report = maintenance.run()
    assert (report.queues, report.messages) == (1, 0)
    state = store.index.state("plain", 0)
    assert (state.indexed, state.next_offset, state.pending, state.dirty) == (3, 3, [], False)
    assert maintenance.run().skipped
    assert [m.body for m in store.get("plain", 0, 0).messages] == [b"m0", b"m1", b"m2"]


def test_a_run_reports_how_long_its_oldest_waiting_message_has_waited_until_it_is_uploaded(serverless, monkeypatch):
    store = serverless()
    store.create_topic(TopicConfig(name="lagging", queues=2))
    store.put("lagging", [Message(b"old", queue=0)])
    time.sleep(0.5)
    store.put("lagging", [Message(b"new", queue=1)])

    def refused(self):
        raise OSError("S3 refused the upload")

    with monkeypatch.context() as patched:
        patched.setattr(TieredQueue, "commit", refused)
        failing = store.maintenance().run().summary()
    assert sorted(failing.failed) == ["lagging|0", "lagging|1"]
    assert failing.upload_lag_seconds >= 0.5  # the older message, still waiting
    time.sleep(0.2)
    done = store.maintenance().run().summary()
    assert (done.messages_uploaded, done.failed) == (2, ())
    assert done.upload_lag_seconds >= failing.upload_lag_seconds + 0.2  # it had waited since its put
    assert store.maintenance().upload().summary().upload_lag_seconds == 0.0  # nothing waits now
