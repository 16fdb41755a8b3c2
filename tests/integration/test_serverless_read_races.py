"""Reads of the serverless backend racing the maintenance run of another process, on a moto server over HTTP: a read
whose view of a queue predates a move of its hot boundary (the `batches` items below it deleted) reads the moved
messages from the tier, and never answers from past the offset it was asked for."""

from __future__ import annotations

import pytest

from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

pytestmark = pytest.mark.local_aws


def test_a_read_behind_a_boundary_another_process_just_moved_reads_the_tier_and_skips_nothing(serverless):
    reader, maintainer = serverless(), serverless()
    reader.create_topic(TopicConfig(name="t", queues=1))
    for first in range(0, 200, 10):  # 20 batches: 16 indexed into `batches` items by the writer, 4 pending
        reader.put("t", [Message(b"%d" % i) for i in range(first, first + 10)])
    assert [m.body for m in reader.get("t", 0, 190, 10).messages] == [b"%d" % i for i in range(190, 200)]

    maintainer.maintenance().run()  # another process moves the queue's hot boundary past it all
    assert maintainer.index.state("t", 0).hot_offset == 200

    for offset in (150, 20):  # consumers behind the boundary, in the process that read the tail lately
        behind = reader.get("t", 0, offset, 20)
        assert [m.queue_offset for m in behind.messages] == list(range(offset, offset + 20))
        assert [m.body for m in behind.messages] == [b"%d" % i for i in range(offset, offset + 20)]
