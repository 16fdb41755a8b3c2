"""Retention: each topic expires on its own clock; a segment goes once no topic can need it."""

from __future__ import annotations

import pytest

from tidemq_protocol.errors import MessageNotFound, OffsetOutOfRange
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

HOUR = 3_600_000


@pytest.fixture
def aged_store(open_test_store):
    store = open_test_store(commitlog_segment_bytes=64 * 1024)
    store.create_topic(TopicConfig(name="short", queues=1, retention_ms=HOUR))
    store.create_topic(TopicConfig(name="long", queues=1, retention_ms=2 * HOUR))
    ids = []
    for i in range(30):
        for topic in ("short", "long"):
            ids += store.put(topic, [Message(b"x" * 1000, keys=(f"k{i}",)) for _ in range(5)])
    store.put("long", [Message(b"fresh")])  # fills the active segment so older ones are sealed
    return store, ids


def test_each_topic_expires_by_its_own_retention(aged_store):
    store, _ = aged_store
    now = store.get("long", 0, 150).messages[0].store_timestamp
    report = store.clean_expired(now_ms=now + HOUR + 1)
    assert report.segments_deleted == 0 and report.messages_expired == 150  # "long" still needs every segment
    with pytest.raises(OffsetOutOfRange) as raised:
        store.get("short", 0, 0)
    assert raised.value.min_offset == 150
    assert store.queue_offsets("short")[0].min_offset == 150
    assert len(store.get("long", 0, 0, max_messages=500).messages) == 151
    assert store.messages_by_key("short", "k3") == []


def test_segments_go_when_every_topic_is_past_retention(aged_store, open_test_store):
    store, ids = aged_store
    segments_before = store.commitlog.segments()
    now = store.get("long", 0, 150).messages[0].store_timestamp
    report = store.clean_expired(now_ms=now + 2 * HOUR + 1)
    assert report.segments_deleted == len(segments_before) - 1
    assert store.commitlog.segments() == segments_before[-1:]
    with pytest.raises(OffsetOutOfRange) as raised:
        store.get("long", 0, 0)
    assert raised.value.min_offset == raised.value.max_offset == 151  # everything is past retention now
    assert store.messages_by_key("long", "k3") == []
    with pytest.raises(MessageNotFound):
        store.message_by_id(ids[0].msg_id)
    deleted = [start for start, _ in segments_before[:-1]]
    assert store.cq.key_lookup(deleted, "long", "k3") == []  # the key index dropped their entries
    store.close()
    reopened = open_test_store(commitlog_segment_bytes=64 * 1024)
    assert reopened.queue_offsets("long")[0].min_offset == 151
    assert reopened.put("long", [Message(b"next")])[0].queue_offset == 151
    assert [m.body for m in reopened.get("long", 0, 151).messages] == [b"next"]
