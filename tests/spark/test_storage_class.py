"""The storage-class job on real PySpark local[2] against the moto server: a topic that asks for a cheaper class
gets its old segments there, reads still return every message, a rerun moves nothing; other topics, and a dry
run, change nothing; a topic asking for a class that does not serve reads is refused."""

from __future__ import annotations

import time

import boto3

from spark_emr.jobs import storage_class
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

from ..tier_reads import read_all


def classes(store, bucket: str, topic: str) -> set[str]:
    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"tidemq/{topic}/")["Contents"]
    assert listed, f"no {topic} objects"
    return {s3.head_object(Bucket=bucket, Key=item["Key"]).get("StorageClass", "STANDARD") for item in listed}


def test_old_segments_move_to_the_class_their_topic_asks_and_still_read(spark, serverless_backend, open_test_store):
    store, args = serverless_backend
    bucket = args[args.index("--bucket") + 1]
    store.create_topic(
        TopicConfig(
            name="archive",
            queues=2,
            attributes={"tier.storage_class": "GLACIER_IR", "tier.storage_class_after_ms": "1000"},
        )
    )
    store.create_topic(TopicConfig(name="plain", queues=1))
    store.create_topic(TopicConfig(name="wrong", queues=1, attributes={"tier.storage_class": "GLACIER"}))
    for b in range(3):
        store.put("archive", [Message(b"a %d-%d" % (b, i), queue=i % 2) for i in range(20)])
        store.put("plain", [Message(b"p %d-%d" % (b, i)) for i in range(5)])
        store.put("wrong", [Message(b"w %d-%d" % (b, i)) for i in range(5)])
        store.maintenance().run()
    expected = [read_all(store, "archive", q) for q in range(2)]
    later = str(time.time_ns() // 1_000_000 + 60_000)

    dry = storage_class.run(spark, storage_class.arguments([*args, "--now-ms", later, "--dry-run"]))
    assert dry["objects_to_move"] == dry["objects_in"] > 0 and classes(store, bucket, "archive") == {"STANDARD"}

    summary = storage_class.run(spark, storage_class.arguments([*args, "--now-ms", later]))
    assert summary["objects_moved"] == summary["objects_in"] == dry["objects_in"]
    assert summary["topics_refused"] == ["wrong"]
    assert classes(store, bucket, "archive") == {"GLACIER_IR"}
    assert classes(store, bucket, "plain") == classes(store, bucket, "wrong") == {"STANDARD"}
    fresh = open_test_store(**store.config.model_dump())  # no read-ahead cache from before: reads the moved objects
    assert [read_all(fresh, "archive", q) for q in range(2)] == expected

    again = storage_class.run(spark, storage_class.arguments([*args, "--now-ms", later]))
    assert again["objects_moved"] == 0


def test_segments_younger_than_the_age_stay(spark, serverless_backend):
    store, args = serverless_backend
    attributes = {"tier.storage_class": "STANDARD_IA", "tier.storage_class_after_ms": str(3_600_000)}
    store.create_topic(TopicConfig(name="young", queues=1, attributes=attributes))
    store.put("young", [Message(b"y %d" % i) for i in range(10)])
    store.maintenance().run()
    summary = storage_class.run(spark, storage_class.arguments(args))
    assert summary["objects_in"] > 0 and summary["objects_moved"] == 0
