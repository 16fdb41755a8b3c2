"""Lookups by id and key that reach the cold tier (tiered/index.py, tiered/lookup.py), on both backends, against a
moto S3 server over HTTP: found once the hot segments are gone, a bounded number of object reads each, the index
rebuilt when an object is lost, and deleted with its segments."""

from __future__ import annotations

import time

import pytest

from tidemq_protocol.errors import MessageNotFound
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig
from tidemq_store.tiered.directory import DIRECTORY_PREFIX
from tidemq_store.tiered.index import index_prefix, parse_index_key
from tidemq_store.tiered.lookup import REBUILD_OFFSETS

from .test_tier import tier_options

DIRECTORY_READS = 4
"""What the id directory costs a lookup by id at most (directory.py): one listing of one key and three reads."""


class S3Requests:
    """Counts the S3 requests a client sends, by operation (botocore's own event: the real client, unchanged)."""

    def __init__(self, client) -> None:
        self.calls: list[str] = []
        client.meta.events.register("before-send.s3", self._sent)

    def _sent(self, request, **_) -> None:
        self.calls.append("list" if "list-type=2" in request.url else request.method)

    def during(self, action):
        self.calls.clear()
        result = action()
        return result, list(self.calls)


def keyed_batches(store, topic: str, queues: int, batches: int, per_batch: int = 20, start: int = 0) -> list:
    """Put `batches` batches, numbered from `start`, each message keyed `order-<batch>-<i>` (and every one
    `shared`); return the results."""
    results = []
    for b in range(start, start + batches):
        messages = [
            Message(
                b"body %d-%d" % (b, i),
                queue=(b + i) % queues,
                keys=(f"order-{b}-{i}", "shared"),
                properties={"padding": "p" * 400},  # hot segments of 64 KiB fill and are released
            )
            for i in range(per_batch)
        ]
        results += store.put(topic, messages)
    return results


def index_objects(driver, topic: str, queue: int) -> list:
    return [item for item in map(parse_index_key, driver.objects(index_prefix(f"{topic}/{queue}"))) if item]


def embedded_cold(open_test_store, **overrides):
    """An embedded store on S3 whose hot segments are removed once uploaded."""
    return open_test_store(**tier_options(commitlog_segment_bytes=64 * 1024, **overrides))


def release_hot(store, topic: str) -> None:
    """Upload the topic and run retention until its queues' oldest hot segments are gone (a round releases only
    segments older than the clock's current millisecond, and keeps one whose id directory object was not written)."""
    store.upload_now(topic)
    deadline = time.monotonic() + 60
    store.clean_expired()
    while not all(s.hot_min_offset > 0 for s in store.tier_status(topic)):
        assert time.monotonic() < deadline, store.tier_status(topic)
        time.sleep(0.05)
        store.clean_expired()


def test_a_message_whose_hot_segments_are_gone_is_found_by_id_and_by_key_in_s3(aws_env, open_test_store):
    store = embedded_cold(open_test_store)
    store.create_topic(TopicConfig(name="orders", queues=2))
    results = keyed_batches(store, "orders", 2, batches=30)
    first = results[0]
    before = store.message_by_id(first.msg_id)
    release_hot(store, "orders")

    with pytest.raises(MessageNotFound):
        store.hot.message_by_id(first.msg_id)  # the hot tier alone no longer has it
    assert store.message_by_id(first.msg_id) == before
    assert store.message_by_id(first.msg_id.upper()) == before
    assert store.messages_by_key("orders", "order-0-0") == [before]
    shared = store.messages_by_key("orders", "shared", limit=1000)
    assert len(shared) == len(results)  # both tiers, each message once
    newest = store.messages_by_key("orders", "shared", limit=5)
    assert len(newest) == 5 and {m.msg_id for m in newest} <= {r.msg_id for r in results[-20:]}  # the last batch
    with pytest.raises(MessageNotFound):
        store.message_by_id("0" * 24)
    assert store.messages_by_key("orders", "no-such-key") == []


def test_a_lookup_reads_at_most_a_listing_two_reads_per_index_object_and_two_per_candidate(aws_env, open_test_store):
    store = embedded_cold(open_test_store, tier_upload_age_ms=3_600_000)
    store.create_topic(TopicConfig(name="t", queues=1))
    results = []
    for upload in range(6):  # six uploads: six index objects
        results += keyed_batches(store, "t", 1, batches=5, start=upload * 5)
        store.upload_now("t")
    release_hot(store, "t")
    objects = len(index_objects(store.driver, "t", 0))
    assert objects == 6
    requests = S3Requests(store.driver.client)

    wanted = results[3]
    found, calls = requests.during(lambda: store.message_by_id(wanted.msg_id))
    assert found.msg_id == wanted.msg_id
    # the id directory (one listing of one key, its table, slot and queue name), then the queue's index: listing,
    # per object header+table and slot, one candidate's entry and record
    bound = DIRECTORY_READS + 1 + 2 * objects + 2
    assert len(calls) <= bound, calls
    assert calls.count("list") == 2

    # The slot tables are cached now (objects never change): a lookup reads a slot only where it holds entries.
    found, calls = requests.during(lambda: store.messages_by_key("t", "order-2-7"))
    assert [m.keys for m in found] == [("order-2-7", "shared")]
    assert len(calls) <= 1 + objects + 2 * 1, calls

    _, calls = requests.during(lambda: store.messages_by_key("t", "shared", limit=3))
    assert len(calls) <= 1 + objects + 2 * 3, calls  # stops once `limit` are found, newest first


def test_an_index_object_deleted_is_rebuilt_from_the_tiers_own_files(aws_env, open_test_store):
    store = embedded_cold(open_test_store, tier_upload_age_ms=3_600_000)
    store.create_topic(TopicConfig(name="t", queues=1))
    early = keyed_batches(store, "t", 1, batches=3, per_batch=40)
    store.upload_now("t")
    keyed_batches(store, "t", 1, batches=3, per_batch=40, start=3)
    store.upload_now("t")
    release_hot(store, "t")
    lost = index_objects(store.driver, "t", 0)[0]
    assert (lost.first, lost.end) == (0, 120)
    store.driver.delete_object(lost.key)
    store.lookup.reader.tables = type(store.lookup.reader.tables)()  # another process: nothing cached

    assert store.message_by_id(early[0].msg_id).keys == ("order-0-0", "shared")
    rebuilt = index_objects(store.driver, "t", 0)
    assert [(item.first, item.end) for item in rebuilt] == [(0, 120), (120, 240)]
    assert store.messages_by_key("t", "order-1-7")[0].msg_id == early[47].msg_id
    assert REBUILD_OFFSETS >= 120


def test_retention_deletes_index_objects_with_their_segments_and_expired_messages_are_not_found(
    aws_env, open_test_store
):
    store = embedded_cold(open_test_store, tier_upload_age_ms=3_600_000)
    store.create_topic(TopicConfig(name="t", queues=1, retention_ms=60_000))
    old = keyed_batches(store, "t", 1, batches=2)
    store.upload_now("t")
    produced_at = time.time_ns() // 1_000_000
    time.sleep(0.002)
    keyed_batches(store, "t", 1, batches=2, start=2)
    store.upload_now("t")
    assert len(index_objects(store.driver, "t", 0)) == 2

    store.clean_expired(now_ms=produced_at + 60_000)  # the first upload has expired, hot and cold
    assert [(i.first, i.end) for i in index_objects(store.driver, "t", 0)] == [(40, 80)]
    with pytest.raises(MessageNotFound):
        store.message_by_id(old[0].msg_id)
    assert store.messages_by_key("t", "order-0-0") == []
    assert len(store.messages_by_key("t", "shared", limit=1000)) == 40


def test_the_posix_tier_finds_by_id_and_key_too(open_test_store, tmp_path):
    store = open_test_store(
        tier="posix",
        tier_directory=tmp_path / "tier",
        commitlog_segment_bytes=64 * 1024,
        hot_retention_ms=0,
        tier_upload_age_ms=100,
    )
    store.create_topic(TopicConfig(name="t", queues=3))
    results = keyed_batches(store, "t", 3, batches=30)
    release_hot(store, "t")
    assert store.message_by_id(results[1].msg_id).body == b"body 0-1"
    assert [m.body for m in store.messages_by_key("t", "order-4-2")] == [b"body 4-2"]


def test_serverless_finds_by_id_and_key_in_s3_once_the_segment_files_are_deleted(serverless):
    store = serverless(efs_segment_grace_s=0.5)
    store.create_topic(TopicConfig(name="orders", queues=2))
    results = keyed_batches(store, "orders", 2, batches=10)
    before = store.message_by_id(results[5].msg_id)
    delete_segment_files(store)

    with pytest.raises(MessageNotFound):
        store._hot_message_by_id(results[5].msg_id)
    assert store.message_by_id(results[5].msg_id) == before
    assert store.messages_by_key("orders", "order-0-5") == [before]
    assert len(store.messages_by_key("orders", "shared", limit=1000)) == len(results)

    other = serverless(efs_segment_grace_s=0.5)  # another process: its own views of the tier, nothing cached
    requests = S3Requests(other.tier.driver.client)
    found, calls = requests.during(lambda: other.message_by_id(results[5].msg_id))
    assert found == before
    objects = len(index_objects(other.tier.driver, "orders", results[5].queue))
    # the id directory, the one queue's view (3 listings; no manifest: never compacted) and index listing, 2 reads
    # per index object, 2 per candidate
    assert len(calls) <= DIRECTORY_READS + 3 + 1 + 2 * objects + 2, calls


def test_while_the_hot_tier_holds_every_message_a_lookup_makes_no_s3_request(aws_env, open_test_store):
    store = embedded_cold(open_test_store, hot_retention_ms=None)
    store.create_topic(TopicConfig(name="t", queues=2))
    results = keyed_batches(store, "t", 2, batches=10)
    store.upload_now("t")
    requests = S3Requests(store.driver.client)
    found, calls = requests.during(
        lambda: (store.message_by_id(results[0].msg_id), store.messages_by_key("t", "shared"))
    )
    assert found[0].msg_id == results[0].msg_id and len(found[1]) == 32
    assert calls == []
    with pytest.raises(MessageNotFound):  # nothing below the hot minimum: the tier is not asked
        requests.during(lambda: store.message_by_id("f" * 24))
    assert requests.calls == []


def made_up_id(real_id: str) -> str:
    """An id naming the place of a real record but another size: it names no message."""
    return f"{real_id[:16]}{int(real_id[16:], 16) + 1:08x}"


def lookup_costs(store, lookup, client, known: str, unknown: str) -> tuple[list[str], list[str]]:
    """The S3 requests of a lookup by a known and by an unknown id, with nothing read before, then of a lookup by
    the known message's key in its topic."""
    lookup.forget()
    requests = S3Requests(client)
    found, known_calls = requests.during(lambda: store.message_by_id(known))
    assert found.msg_id == known
    with pytest.raises(MessageNotFound):
        requests.during(lambda: store.message_by_id(unknown))
    unknown_calls = list(requests.calls)
    found, key_calls = requests.during(lambda: store.messages_by_key("t0", "order-0-5"))  # its topic's queues only
    assert [m.msg_id for m in found] == [known]
    return known_calls, unknown_calls, key_calls


def test_lookups_by_id_and_key_cost_the_same_s3_requests_with_50_topics_as_with_2(aws_env, open_test_store):
    store = embedded_cold(open_test_store, tier_upload_age_ms=3_600_000)
    for n in range(50):
        store.create_topic(TopicConfig(name=f"t{n}", queues=1))
    first = keyed_batches(store, "t0", 1, batches=4)
    keyed_batches(store, "t1", 1, batches=4)
    for topic in ("t0", "t1"):
        store.upload_now(topic)
    release_hot(store, "t0")
    known, unknown = first[5].msg_id, made_up_id(first[5].msg_id)
    with_2 = lookup_costs(store, store.lookup, store.driver.client, known, unknown)

    for n in range(2, 50):  # 48 topics more, each in the tier, their hot segments gone too
        keyed_batches(store, f"t{n}", 1, batches=4)
        store.upload_now(f"t{n}")
    release_hot(store, "t49")
    assert len({topic for topic, _ in store.driver.queues()}) == 50
    assert len(store.driver.objects(DIRECTORY_PREFIX)) > 1
    with_50 = lookup_costs(store, store.lookup, store.driver.client, known, unknown)

    assert with_50 == with_2
    objects = len(index_objects(store.driver, "t0", 0))
    for calls in with_50:
        assert len(calls) <= DIRECTORY_READS + 1 + 2 * objects + 2, calls
    assert len(with_50[1]) <= DIRECTORY_READS  # the made-up id's size differs from the record's: no queue searched
    requests = S3Requests(store.driver.client)  # an id naming no record at all: the directory's listing, no more
    with pytest.raises(MessageNotFound):
        requests.during(lambda: store.message_by_id(f"{1:016x}{100:08x}"))
    assert len(requests.calls) <= DIRECTORY_READS, requests.calls


def delete_segment_files(store) -> None:
    """Run maintenance until every segment file is deleted (once idle for the grace period)."""
    deadline = time.monotonic() + 60
    store.maintenance().run()
    while any(store.segments.iterdir()):
        assert time.monotonic() < deadline, list(store.segments.iterdir())
        time.sleep(0.2)
        store.maintenance().run()


@pytest.mark.long  # 50 topics through the tier: 20 s on the moto server
def test_serverless_lookups_by_id_and_key_cost_the_same_s3_requests_with_50_topics_as_with_2(serverless):
    store = serverless(efs_segment_grace_s=0.5)
    for n in range(50):
        store.create_topic(TopicConfig(name=f"t{n}", queues=1))
    first = keyed_batches(store, "t0", 1, batches=2)
    keyed_batches(store, "t1", 1, batches=2)
    delete_segment_files(store)
    known, unknown = first[5].msg_id, made_up_id(first[5].msg_id)
    # another process for each count: its own views of the tier, nothing cached
    reader = serverless(efs_segment_grace_s=0.5)
    with_2 = lookup_costs(reader, reader.tier.lookup, reader.tier.driver.client, known, unknown)

    for n in range(2, 50):
        keyed_batches(store, f"t{n}", 1, batches=2)
    delete_segment_files(store)
    assert len({topic for topic, _ in store.tier.driver.queues()}) == 50
    reader = serverless(efs_segment_grace_s=0.5)
    with_50 = lookup_costs(reader, reader.tier.lookup, reader.tier.driver.client, known, unknown)

    assert with_50 == with_2
    objects = len(index_objects(store.tier.driver, "t0", 0))
    for calls in with_50:  # the directory, the queue's view (3 listings, no manifest), its index, one candidate
        assert len(calls) <= DIRECTORY_READS + 3 + 1 + 2 * objects + 2, calls
    assert len(with_50[1]) <= DIRECTORY_READS
