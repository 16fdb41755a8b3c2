"""The compaction job on real PySpark local[2] against the moto server: a queue of many small objects becomes a
few large ones while a consumer reads it through the read-ahead cache and the uploader appends; the consumer gets
every message once, in order, byte for byte, before, during and after."""

from __future__ import annotations

import threading

import pytest

from spark_emr.jobs import compaction
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig
from tidemq_store.serverless.cold import ColdTier
from tidemq_store.tiered.index import index_prefix, parse_index_key
from tidemq_store.tiered.manifest import load_manifest

TARGET = 16 * 1024
QUEUES = 2


def tier_records(cold: ColdTier, topic: str, queue: int) -> list[bytes]:
    """Each record of the queue's tier, read as a consumer reads (one listing of the queue, kept for the pass)."""
    view = cold.view(topic, queue)
    high = view.max_offset or 0
    records, offset = [], view.min_offset or 0
    while offset < high:
        read = cold.read(topic, queue, offset, 37, 1 << 20, None, high, high)
        data, position = read.records(), 0
        while position < len(data):
            size = int.from_bytes(data[position : position + 4], "little")
            records.append(data[position : position + size])
            position += size
        assert read.selection.next_offset > offset
        offset = read.selection.next_offset
    return records


def segments(cold: ColdTier, topic: str, queue: int) -> tuple[list, list]:
    view = cold.view(topic, queue)
    return view.commitlog.first_segments(), view.consumequeue.first_segments()


def test_compaction_while_a_consumer_reads_and_the_uploader_appends(spark, serverless_backend, open_test_store):
    store, args = serverless_backend
    store.create_topic(TopicConfig(name="stream", queues=QUEUES))
    for b in range(24):  # an upload per batch: two small objects per queue each time
        store.put("stream", [Message(b"early %d-%d " % (b, i) + bytes(200), queue=i % QUEUES) for i in range(20)])
        store.maintenance().run()
    reader = ColdTier(store.config)
    before = {q: tier_records(reader, "stream", q) for q in range(QUEUES)}
    assert all(len(before[q]) == 240 for q in range(QUEUES))
    assert len(segments(reader, "stream", 0)[0]) == 24

    stop, errors, passes = threading.Event(), [], [0]
    writer = open_test_store(**store.config.model_dump())  # another process's view, as Lambda invocations are

    def upload() -> None:
        n = 0
        while not stop.is_set():
            writer.put("stream", [Message(b"late %d " % n + bytes(200), queue=q) for q in range(QUEUES)])
            writer.maintenance().run()
            n += 1

    def consume() -> None:
        cold = ColdTier(store.config)  # its own views and cache, listed once per pass
        try:
            while not stop.is_set():
                for queue in range(QUEUES):
                    seen = tier_records(cold, "stream", queue)
                    assert seen[:240] == before[queue]  # the same bytes, each once, in order
                    assert all(b"late" in record for record in seen[240:])
                passes[0] += 1
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            cold.close()

    threads = [threading.Thread(target=upload), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    try:
        during = compaction.run(spark, compaction.arguments([*args, "--target-bytes", str(TARGET), "--grace-s", "0"]))
        passes_during = passes[0]
        again = compaction.run(spark, compaction.arguments([*args, "--target-bytes", str(TARGET), "--grace-s", "0"]))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert during["queues_switched"] == QUEUES and during["objects_out"] < during["objects_in"]
    assert during["records_in"] == during["records_out"] >= 480 and during["objects_deleted"] > 0
    assert passes[0] > passes_during >= 0 and again["queues_in"] == QUEUES

    writer.maintenance().run()
    final = compaction.run(spark, compaction.arguments([*args, "--target-bytes", str(TARGET), "--grace-s", "0"]))
    assert final["records_removed"] == 0
    fresh = ColdTier(store.config)
    for queue in range(QUEUES):
        records = tier_records(fresh, "stream", queue)
        assert records[:240] == before[queue] and len(records) == store.queue_offsets("stream")[queue].max_offset
        manifest = load_manifest(fresh.driver, f"stream/{queue}")
        commitlog, consumequeue = segments(fresh, "stream", queue)
        assert [s.name for s in commitlog] == [s.name for s in manifest.commitlog]  # nothing small is left over
        assert all(s.size > TARGET // 2 for s in commitlog[:-1]) and len(commitlog) < 24
        assert all(s.size > TARGET // 32 for s in consumequeue[:-1])  # a ConsumeQueue's target is 1/16th
        listed = {
            f"stream/{queue}/{kind}/{s.name}" for kind in ("commitlog", "consumequeue") for s in manifest.segments(kind)
        }
        objects = [o.key for o in fresh.driver.objects(f"stream/{queue}/") if "/manifest/" not in o.key]
        objects = [key for key in objects if "/index/" not in key]  # the next test's
        assert sorted(objects) == sorted(listed)  # every replaced object is gone (grace 0)
        assert sum(key.rsplit("/", 1)[-1].isdigit() for key in objects) <= 2  # at most the tail of each kind
    fresh.close()
    reader.close()


def test_a_changed_byte_in_any_record_stops_segment_compaction_and_nothing_switches(spark, serverless_backend):
    store, args = serverless_backend
    store.create_topic(TopicConfig(name="damaged", queues=1))
    for b in range(12):  # an upload per batch
        store.put("damaged", [Message(b"m %d-%d " % (b, i) + bytes(200), queue=0) for i in range(20)])
        store.maintenance().run()
    reader = ColdTier(store.config)
    victim = segments(reader, "damaged", 0)[0][7]  # in the middle of the queue: earlier runs get merged first
    data, position = bytearray(victim.read(victim.base, victim.size)), 0
    while position + int.from_bytes(data[position : position + 4], "little") <= len(data) // 2:
        position += int.from_bytes(data[position : position + 4], "little")
    data[position + int.from_bytes(data[position : position + 4], "little") - 1] ^= 0x01  # a body's last byte
    driver = reader.driver
    driver.client.put_object(Bucket=driver.bucket, Key=victim.key, Body=bytes(data))
    before = {o.key: o.size for o in driver.objects("damaged/0/")}

    job = compaction.arguments([*args, "--topic", "damaged", "--target-bytes", str(TARGET), "--grace-s", "0"])
    with pytest.raises(
        Exception,
        match=rf"damaged:0: commit-log segment {victim.name}: record at byte {position} fails its CRC32C check",
    ):
        compaction.run(spark, job)
    after = {o.key: o.size for o in driver.objects("damaged/0/")}
    assert load_manifest(driver, "damaged/0") is None  # readers still read the plain segments
    assert {key: size for key, size in after.items() if key in before} == before  # every one of them is there
    assert all(".g1." in key for key in after.keys() - before.keys())  # the attempt's, listed by no manifest
    reader.close()


def test_compaction_merges_each_queues_index_objects_and_lookups_read_fewer(spark, serverless_backend):
    store, args = serverless_backend
    store.create_topic(TopicConfig(name="keyed", queues=QUEUES))
    ids = []
    for b in range(8):  # an upload per batch: one index object per queue each time
        put = store.put("keyed", [Message(b"m", queue=i % QUEUES, keys=(f"k{b}-{i}",)) for i in range(10)])
        ids += [result.msg_id for result in put]
        store.maintenance().run()
    driver = store.tier.driver
    assert all(len(index_objects(driver, "keyed", q)) == 8 for q in range(QUEUES))

    summary = compaction.run(spark, compaction.arguments([*args, "--grace-s", "0"]))
    assert (summary["index_objects_in"], summary["index_objects_out"]) == (8 * QUEUES, QUEUES)
    compaction.run(spark, compaction.arguments([*args, "--grace-s", "0"]))  # deletes what the merged ones cover
    assert all([(i.first, i.end) for i in index_objects(driver, "keyed", q)] == [(0, 40)] for q in range(QUEUES))

    cold = ColdTier(store.config)  # another process: nothing cached
    sent: list[str] = []
    cold.driver.client.meta.events.register("before-send.s3", lambda request, **_: sent.append(request.url))
    assert cold.message_by_id(ids[17], [("keyed", 7 % QUEUES)]).keys == ("k1-7",)  # the queue its record names
    # the queue's view (3 listings, 1 manifest) and index listing (1) and its one index object (2), the message's
    # entry and record (2): there were 8 index objects per queue, 2 reads each
    assert len(sent) <= 4 + 1 + 2 + 2, sent
    assert [m.msg_id for m in cold.messages_by_key("keyed", {0: 40, 1: 40}, "k7-4", 5)] == [ids[74]]
    cold.close()


def index_objects(driver, topic: str, queue: int) -> list:
    return [item for item in map(parse_index_key, driver.objects(index_prefix(f"{topic}/{queue}"))) if item]
