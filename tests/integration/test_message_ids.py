"""A message id comes from the client: a lookup by id reads at most the largest record the store writes, and only
once the header at the position it names agrees with it (`record.read_by_id`), on each backend. What a lookup
reads is counted by the kernel (`rchar` in /proc/self/io: bytes this process read from files)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tidemq_protocol.errors import MessageNotFound
from tidemq_protocol.limits import MIB
from tidemq_protocol.message import Message
from tidemq_protocol.record import max_record_size
from tidemq_store import TopicConfig

BODY = 4 * MIB - 1024  # near the largest message (TIDEMQ_MAX_MESSAGE_BYTES, 4 MiB)


@pytest.fixture(params=["embedded", "serverless"])
def store(request, open_test_store, tmp_path):
    if request.param == "embedded":
        return open_test_store()
    request.getfixturevalue("aws_env")
    return open_test_store(backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=f"i{uuid.uuid4().hex[:8]}")


def bytes_read() -> int:
    return int(Path("/proc/self/io").read_text().split("rchar:")[1].split()[0])


def test_a_forged_id_reads_at_most_a_record_header_and_finds_nothing(store):
    store.create_topic(TopicConfig(name="big", queues=1))
    ids = [store.put("big", [Message(bytes([n]) * BODY)])[0].msg_id for n in range(5)]  # 20 MiB in the log
    position, size = int(ids[0][:16], 16), int(ids[0][16:], 16)
    forged = [
        f"{position:016x}{16 * MIB:08x}",  # 16 MiB from the first message: over the largest record
        f"{position:016x}{max_record_size(4 * MIB):08x}",  # as large as a record may be, but not this one's size
        f"{position + 53:016x}{size:08x}",  # inside the first record, where its body holds no header
    ]
    for msg_id in forged:
        before = bytes_read()
        with pytest.raises(MessageNotFound):
            store.message_by_id(msg_id)
        assert bytes_read() - before < 64 * 1024, msg_id  # a header at most, never what the id claims

    before = bytes_read()
    assert store.message_by_id(ids[2]).body == bytes([2]) * BODY  # a real id reads its record
    assert BODY <= bytes_read() - before < 2 * BODY


def test_a_message_put_in_the_same_millisecond_its_topic_was_created_is_found_by_its_id(store):
    """A topic created in the millisecond of the last put is stamped a millisecond later (its messages' store
    times are never before it); the next put must be stamped no earlier, or a lookup by id takes its message for
    one of a deleted topic of the same name (dead letters are put the moment their topic is made)."""
    store.create_topic(TopicConfig(name="busy", queues=1))
    for n in range(200):  # many in one millisecond: the create and the put right after a put
        store.put("busy", [Message(b"tick")])
        store.create_topic(TopicConfig(name=f"new-{n}", queues=1))
        (put,) = store.put(f"new-{n}", [Message(b"first")])
        assert store.message_by_id(put.msg_id).body == b"first"
