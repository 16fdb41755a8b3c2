"""SQL92-filtered reads from a store, both backends, hot and cold: the semantics table (tests/sql_filter_table.py)
read through `get` and `read_records` while the messages are in the hot tier and again once they are only in the
cold tier (S3 on the moto server), and a selective filter over many records paging as a consumer pages."""

from __future__ import annotations

import uuid

import pytest

from tidemq_protocol.filter import SqlFilter
from tidemq_protocol.message import Message
from tidemq_protocol.record import decode_records
from tidemq_store import MessageStore, TopicConfig
from tidemq_store.selection import SCAN_LIMIT

from ..sql_filter_table import MESSAGES, SELECTS, selected_names
from .test_tier import tier_options


@pytest.fixture(params=["embedded", "serverless"])
def store(request, aws_env, open_test_store, tmp_path) -> MessageStore:
    """A store of the backend with a cold tier on S3 (the moto server), holding topic `t` of 2 queues."""
    if request.param == "embedded":
        opened = open_test_store(**tier_options())
    else:
        bucket, prefix = f"tier-{uuid.uuid4().hex[:12]}", f"q{uuid.uuid4().hex[:8]}"
        opened = open_test_store(
            backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=prefix, tier="s3", tier_bucket=bucket
        )
    opened.create_topic(TopicConfig(name="t", queues=2))
    return opened


def make_cold(store: MessageStore, count: int) -> None:
    """Move the `count` messages of topic t's queue 0 to the cold tier, and out of the hot one (the embedded
    engine's: once queue 1's filler rolled queue 0's last commit-log segment over)."""
    if hasattr(store, "maintenance"):  # serverless: the maintenance run uploads, and reads go cold past it
        store.maintenance().run()
    else:  # embedded: upload, then remove the hot segments
        store.upload_now("t")
        store.clean_expired()
    status = store.tier_status("t")[0]
    assert status.hot_min_offset >= count and status.cold_max_offset == count, status


def roll_segments(store: MessageStore) -> None:
    """Filler on queue 1: the commit log moves on to a new segment, so queue 0's can be removed."""
    store.put("t", [Message(b"x" * 1024, queue=1, properties={"a": "5"}) for _ in range(100)])


def read_names(store: MessageStore, topic: str, sql: SqlFilter) -> tuple[set[str], set[str]]:
    """The names of the messages of queue 0 the filter selects, read through `get` and through `read_records`,
    each from offset 0 to the end, a few messages a read."""
    by_get, by_records = set(), set()
    offset = 0
    while True:
        result = store.get(topic, 0, offset, max_messages=2, message_filter=sql)
        by_get |= selected_names(result.messages)
        if result.next_offset >= result.max_offset:
            break
        offset = result.next_offset
    offset = 0
    while True:
        batch = store.read_records(topic, 0, offset, max_messages=3, message_filter=sql)
        messages = decode_records(batch.records)
        assert batch.count == len(messages)
        by_records |= selected_names(messages)
        if batch.next_offset >= batch.max_offset:
            break
        offset = batch.next_offset
    return by_get, by_records


@pytest.mark.local_aws
def test_every_expression_of_the_table_selects_the_same_messages_hot_and_cold(store):
    store.put("t", list(MESSAGES.values()))  # queue 0
    roll_segments(store)

    hot = {expression: read_names(store, "t", SqlFilter.parse(expression)) for expression, _ in SELECTS}
    make_cold(store, len(MESSAGES))
    cold = {expression: read_names(store, "t", SqlFilter.parse(expression)) for expression, _ in SELECTS}

    for expression, expected in SELECTS:
        assert hot[expression] == (expected, expected), f"hot: {expression}"
        assert cold[expression] == (expected, expected), f"cold: {expression}"


@pytest.mark.local_aws
def test_a_selective_filter_returns_its_matches_a_few_at_a_time_and_moves_past_what_it_skipped(store):
    count = 2 * SCAN_LIMIT + 100
    for start in range(0, count, 1000):
        store.put(
            "t",
            [
                Message(str(n).encode(), properties={"n": str(n), "region": "eu" if n % 1000 == 999 else "us"})
                for n in range(start, min(count, start + 1000))
            ],
        )
    eu = SqlFilter.parse("region = 'eu'")
    matches = [n for n in range(count) if n % 1000 == 999]

    first = store.get("t", 0, 0, max_messages=3, message_filter=eu)
    assert [int(m.body) for m in first.messages] == matches[:3]
    assert first.next_offset == matches[2] + 1  # past the last one returned, not past what was read
    nothing = store.get("t", 0, matches[-1] + 1, message_filter=eu)
    assert (nothing.messages, nothing.next_offset) == ([], count)  # examined to the end, none selected
    long_way = store.get("t", 0, 0, max_messages=100, message_filter=eu)
    assert [int(m.body) for m in long_way.messages] == matches[:4]  # one scan's worth, at most SCAN_LIMIT
    assert long_way.next_offset == SCAN_LIMIT

    roll_segments(store)
    make_cold(store, count)
    cold = store.read_records("t", 0, 0, max_messages=3, message_filter=eu)
    assert [int(m.body) for m in decode_records(cold.records)] == matches[:3]
    assert cold.next_offset == matches[2] + 1
    everything = SqlFilter.parse("n >= 0")
    assert len(store.get("t", 0, 0, max_messages=50, message_filter=everything).messages) == 50
