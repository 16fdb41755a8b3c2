"""Every bad input gets a specific error that says what was wrong, and changes nothing."""

from __future__ import annotations

import pytest

from tidemq_protocol.errors import (
    GroupNotFound,
    InvalidArgument,
    InvalidBatch,
    InvalidName,
    MessageNotFound,
    MessageTooLarge,
    OffsetOutOfRange,
    QueueOutOfRange,
    QueuesCannotShrink,
    TopicExists,
    TopicNotFound,
)
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, TopicConfig


def snapshot(store) -> tuple:
    """Everything a bad request could have changed: topics, groups, offsets, bytes in the log."""
    topics = store.list_topics(limit=1000)
    return (
        topics,
        store.list_groups(limit=1000),
        {t.name: store.queue_offsets(t.name) for t in topics},
        {t.name: store.committed_offsets("g", t.name) for t in topics},
        store.commitlog.written_position,
    )


@pytest.fixture
def busy_store(open_test_store):
    store = open_test_store(max_message_bytes=4096, max_batch_messages=10, max_batch_bytes=20_000)
    store.create_topic(TopicConfig(name="t", queues=2))
    store.create_group(GroupConfig(name="g"))
    store.put("t", [Message(b"a"), Message(b"b", queue=1)])
    store.commit_offsets("g", "t", {0: 1})
    return store


BAD_CALLS = [
    ("topic name with a dot", lambda s: s.put("bad.topic", [Message(b"x")]), InvalidName, "'.'"),
    ("topic name too long", lambda s: s.create_topic(TopicConfig.model_construct(name="x" * 128)), InvalidName, "128"),
    ("group name with a space", lambda s: s.get_group("my group"), InvalidName, "' '"),
    ("unknown topic", lambda s: s.put("nope", [Message(b"x")]), TopicNotFound, "'nope' does not exist"),
    ("existing topic", lambda s: s.create_topic(TopicConfig(name="t")), TopicExists, "already exists"),
    ("unknown group", lambda s: s.commit_offsets("nobody", "t", {0: 0}), GroupNotFound, "'nobody'"),
    ("empty batch", lambda s: s.put("t", []), InvalidBatch, "at least one"),
    ("batch of too many", lambda s: s.put("t", [Message(b"x")] * 11), InvalidBatch, "at most 10 messages, got 11"),
    (
        "message too large",
        lambda s: s.put("t", [Message(b"x"), Message(b"y" * 5000)]),
        MessageTooLarge,
        "message 1 is 5000 bytes",
    ),
    ("batch too large", lambda s: s.put("t", [Message(b"y" * 4000)] * 6), MessageTooLarge, "the batch is"),
    (
        "queue out of range on put",
        lambda s: s.put("t", [Message(b"x"), Message(b"x", queue=2)]),
        QueueOutOfRange,
        "valid queues are 0..1",
    ),
    ("negative queue", lambda s: s.get("t", -1, 0), QueueOutOfRange, "queue -1"),
    ("offset past the end", lambda s: s.get("t", 0, 2), OffsetOutOfRange, "valid offsets are 0..1"),
    ("negative offset", lambda s: s.get("t", 0, -1), OffsetOutOfRange, "offset -1"),
    ("commit past the end", lambda s: s.commit_offsets("g", "t", {1: 5}), OffsetOutOfRange, "0..1"),
    ("body not bytes", lambda s: s.put("t", [Message("text")]), InvalidArgument, "body must be bytes"),
    (
        "bad key inside a batch",
        lambda s: s.put("t", [Message(b"x"), Message(b"x", keys=("a b",))]),
        InvalidArgument,
        "message 1",
    ),
    ("reserved property", lambda s: s.put("t", [Message(b"x", properties={"TAGS": "x"})]), InvalidArgument, "reserved"),
    ("bad tag filter", lambda s: s.get("t", 0, 0, message_filter="A ||"), InvalidArgument, "tag filter"),
    ("zero max_messages", lambda s: s.get("t", 0, 0, max_messages=0), InvalidArgument, "max_messages"),
    ("shrinking queues", lambda s: s.update_topic("t", queues=1), QueuesCannotShrink, "grow, not shrink"),
    ("not a message", lambda s: s.put("t", [b"raw bytes"]), InvalidArgument, "not a Message"),
    (
        "too many properties",
        lambda s: s.put("t", [Message(b"x", properties={f"p{i}": "" for i in range(129)})]),
        InvalidArgument,
        "at most 128 properties, got 129",
    ),
    (
        "too many attributes",
        lambda s: s.update_topic("t", attributes={f"a{i}": "" for i in range(33)}),
        InvalidArgument,
        "attributes: Dictionary should have at most 32 items",
    ),
    (
        "group attribute too long",
        lambda s: s.update_group(GroupConfig.model_construct(name="g", attributes={"a": "v" * 257})),
        InvalidArgument,
        "attributes.a",
    ),
    ("forged message id", lambda s: s.message_by_id(f"{0:016x}{0xFFFFFFFF:08x}"), MessageNotFound, "no message"),
]


@pytest.mark.parametrize(("call", "error", "says"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_is_refused_and_changes_nothing(busy_store, call, error, says):
    before = snapshot(busy_store)
    with pytest.raises(error, match=says):
        call(busy_store)
    assert snapshot(busy_store) == before


def test_a_refused_batch_leaves_no_partial_message_visible(busy_store):
    with pytest.raises(MessageTooLarge):
        busy_store.put("t", [Message(b"first"), Message(b"z" * 5000)])
    assert [m.body for m in busy_store.get("t", 0, 0).messages] == [b"a"]
    busy_store.put("t", [Message(b"next")])
    assert [m.body for m in busy_store.get("t", 0, 0).messages] == [b"a", b"next"]
