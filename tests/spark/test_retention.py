"""The retention job on real PySpark local[2] against the moto server: each queue of a topic with a retention loses
its expired cold segments and moves its minimum, under the maintenance run's lease; a topic without one keeps
everything; a rerun changes nothing more; a dry run changes nothing."""

from __future__ import annotations

import time

import pytest

from spark_emr.jobs import retention
from tidemq_protocol.errors import OffsetOutOfRange
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

from ..tier_reads import read_all


@pytest.fixture
def backend(serverless_backend):
    """Two topics in the S3 tier: `short` (1 s retention, 3 queues) and `forever` (no retention)."""
    store, args = serverless_backend
    store.create_topic(TopicConfig(name="short", queues=3, retention_ms=1000))
    store.create_topic(TopicConfig(name="forever", queues=1, retention_ms=None))
    for b in range(4):
        store.put("short", [Message(b"old %d-%d" % (b, i), queue=i % 3) for i in range(30)])
        store.put("forever", [Message(b"kept %d-%d" % (b, i)) for i in range(10)])
        store.maintenance().run()  # one cold segment per queue and batch
    return store, args


def ranges(store, topic: str) -> list[tuple[int, int]]:
    return [(q.min_offset, q.max_offset) for q in store.queue_offsets(topic)]


def test_retention_deletes_what_expired_per_queue_and_keeps_topics_without_retention(spark, backend):
    store, args = backend
    later = str(time.time_ns() // 1_000_000 + 10_000)
    dry = retention.run(spark, retention.arguments([*args, "--now-ms", later, "--dry-run"]))
    assert dry["queues_in"] == 3 and ranges(store, "short") == [(0, 40)] * 3  # a dry run changes nothing

    summary = retention.run(spark, retention.arguments([*args, "--now-ms", later]))
    assert summary["messages_expired"] == 120 and summary["segments_deleted"] >= 12 and summary["queues_skipped"] == 0
    assert ranges(store, "short") == [(40, 40)] * 3
    with pytest.raises(OffsetOutOfRange):
        store.get("short", 0, 0)
    assert ranges(store, "forever") == [(0, 40)]
    assert [body for _, _, body, *_ in read_all(store, "forever", 0)] == [
        b"kept %d-%d" % (b, i) for b in range(4) for i in range(10)
    ]

    again = retention.run(spark, retention.arguments([*args, "--now-ms", later]))
    assert (again["messages_expired"], again["segments_deleted"]) == (0, 0)
    store.put("short", [Message(b"fresh", queue=0)])
    assert [m.body for m in store.get("short", 0, 40).messages] == [b"fresh"]


def test_retention_measured_from_now_keeps_what_has_not_expired(spark, backend):
    store, args = backend
    summary = retention.run(spark, retention.arguments([*args, "--topic", "short"]))
    assert summary["messages_expired"] <= 120  # what expired by now, at most everything
    kept = sum(maximum - minimum for minimum, maximum in ranges(store, "short"))
    assert kept + summary["messages_expired"] == 120
