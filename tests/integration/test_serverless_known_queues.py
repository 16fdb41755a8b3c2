"""The serverless store's reads of what it knows is there (tidemq_store/serverless/known_queues.py), on a moto
server over HTTP: a backlog is read without a request for the queue once its item is known, what is produced later
is seen at once, and what this process's retention or another's deletion of files took is never served."""

from __future__ import annotations

import uuid

import pytest
from pynamodb.signals import pre_dynamodb_send

from tidemq_protocol.errors import OffsetOutOfRange
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

pytestmark = pytest.mark.local_aws


@pytest.fixture
def store(open_test_store, tmp_path, aws_env):
    store = open_test_store(backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=f"k{uuid.uuid4().hex[:8]}")
    store.create_topic(TopicConfig(name="t", queues=1))
    for first in range(0, 200, 10):  # 20 batches: some indexed into `batches` items, some pending
        store.put("t", [Message(b"%d" % i) for i in range(first, first + 10)])
    return store


def requests_of(read) -> tuple[list, list[str]]:
    sent: list[str] = []

    def count(_sender, *, operation_name: str, **_) -> None:
        sent.append(operation_name)

    pre_dynamodb_send.connect(count)
    try:
        return read(), sent
    finally:
        pre_dynamodb_send.disconnect(count)


def bodies(result) -> list[bytes]:
    return [m.body for m in result.messages]


def test_a_backlog_is_read_without_a_request_once_its_queue_is_known(store):
    first, sent = requests_of(lambda: store.get("t", 0, 0, 32))
    assert bodies(first) == [b"%d" % i for i in range(32)] and "BatchGetItem" in sent
    for offset in range(32, 160, 32):
        result, sent = requests_of(lambda offset=offset: store.get("t", 0, offset, 32))
        assert bodies(result) == [b"%d" % i for i in range(offset, offset + 32)]
        assert sent == []  # the first read learned the `batches` items ahead of it
    again, sent = requests_of(lambda: store.get("t", 0, 0, 160))
    assert len(again.messages) == 160 and sent == []


def test_a_read_reaching_the_end_it_knew_sees_what_came_since(store):
    store.get("t", 0, 0, 32)
    store.put("t", [Message(b"new")])
    tail, sent = requests_of(lambda: store.get("t", 0, 190, 32))
    assert bodies(tail) == [b"%d" % i for i in range(190, 200)] + [b"new"] and "BatchGetItem" in sent


def test_retention_in_this_process_is_seen_at_once(store):
    assert len(store.get("t", 0, 0, 32).messages) == 32
    store.index.drop_below("t", 0, 0)  # what retention calls once it moved the queue's low end
    store.tables.queues.get("t|0").update(actions=[store.tables.queues.min_offset.set(100)])
    with pytest.raises(OffsetOutOfRange):
        store.get("t", 0, 0, 32)


def test_a_segment_file_gone_since_is_read_again_afresh(store):
    assert len(store.get("t", 0, 0, 32).messages) == 32
    known = store.index.known.get("t", 0, 32)
    ref = known.tiling(0, 32)[0]
    known.batches[0] = ref._replace(file="gone")  # as if maintenance deleted its file meanwhile
    assert bodies(store.get("t", 0, 0, 10)) == [b"%d" % i for i in range(10)]
