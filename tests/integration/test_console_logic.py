"""The console's logic over a real embedded store: the message browser's scan examines at most its bound whatever
the filter and says where to continue; the kept series stays bounded and its rates are never negative."""

from __future__ import annotations

import pytest

from functions.logic import browse, console_series, offset_moves
from functions.logic.console_series import Sample, rates
from tidemq_protocol.errors import QueueOutOfRange
from tidemq_protocol.filter import subscription_filter
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, TopicConfig
from tidemq_store.selection import SCAN_LIMIT

MESSAGES = SCAN_LIMIT * 2 + 500


@pytest.fixture
def queue(store):
    store.create_topic(TopicConfig(name="orders", queues=1))
    tags = ["rare" if n % 3000 == 2999 else "bulk" for n in range(MESSAGES)]
    for start in range(0, MESSAGES, 1000):
        batch = [
            Message(b"m", tag=tags[n], properties={"n": str(n)}) for n in range(start, min(MESSAGES, start + 1000))
        ]
        store.put("orders", batch)
    return store


@pytest.mark.parametrize(
    ("tag", "sql"), [(None, None), ("rare", None), (None, "n = '2999' OR n = '5999'"), ("absent", None)]
)
@pytest.mark.parametrize("bound", [100, SCAN_LIMIT + 1, SCAN_LIMIT * 2 + 7])
def test_a_scan_examines_at_most_its_bound_whatever_the_filter(queue, tag, sql, bound):
    chosen = subscription_filter(tag, sql)
    scan = browse.scan_queue(queue, "orders", 0, 0, chosen, 1000, bound)
    assert scan.scanned <= bound and scan.start_offset == 0
    assert scan.stopped_at_bound == (scan.next_offset < MESSAGES and len(scan.messages) < 1000)
    selects = {None: lambda m: True, "rare": lambda m: m % 3000 == 2999, "absent": lambda m: False}
    selected = selects[tag] if sql is None else selects["rare"]
    expected = [m for m in range(min(bound, MESSAGES)) if selected(m)]
    assert [m.offset for m in scan.messages] == expected[:1000]
    if chosen is not None:  # nothing wanted was left behind: every selected offset before where it stopped is there
        assert scan.scanned == bound


def test_a_scan_that_finds_what_it_wants_stops_just_past_the_last_and_continues_from_there(queue):
    first = browse.scan_queue(queue, "orders", 0, 0, subscription_filter("rare"), 1, 100_000)
    assert [m.offset for m in first.messages] == [2999] and first.next_offset == 3000 and not first.stopped_at_bound
    then = browse.scan_queue(queue, "orders", 0, first.next_offset, subscription_filter("rare"), 1, 100_000)
    assert [m.offset for m in then.messages] == [5999]


def test_a_queue_the_topic_does_not_have_is_refused(queue):
    with pytest.raises(QueueOutOfRange):
        browse.scan_queue(queue, "orders", 1, 0, None, 10, 100)


def test_the_series_keeps_its_last_points_and_counts_topics_groups_and_lag(store):
    store.create_topic(TopicConfig(name="orders", queues=2))
    store.create_group(GroupConfig(name="billing"))
    store.put("orders", [Message(b"a", queue=0), Message(b"b", queue=0), Message(b"c", queue=1)])
    store.commit_offsets("billing", "orders", {0: 1})
    for _ in range(console_series.SERIES_POINTS + 3):
        sample = console_series.record_sample(store)
    kept = console_series.read_samples(store)
    assert len(kept) == console_series.SERIES_POINTS and kept[-1] == sample
    assert (sample.topics, sample.groups, sample.stored, sample.consumed, sample.lag) == (1, 1, 3, 1, 2)


def test_rates_are_per_second_and_never_negative():
    samples = [Sample(0, 0, 0, 0), Sample(2000, 100, 10, 90), Sample(4000, 40, 20, 20), Sample(4000, 50, 20, 30)]
    assert [(p.produced_per_s, p.consumed_per_s, p.lag) for p in rates(samples, 0)] == [(50.0, 5.0, 90), (0.0, 5.0, 20)]
    assert rates(samples, 3000) == rates(samples, 0)[1:]


def test_the_sampler_notes_when_each_committed_offset_moved_and_writes_only_what_changed(store):
    store.create_topic(TopicConfig(name="orders", queues=2))
    store.create_group(GroupConfig(name="billing"))
    store.put("orders", [Message(b"a", queue=0), Message(b"b", queue=1)])
    store.commit_offsets("billing", "orders", {0: 1, 1: 0})
    first = console_series.record_sample(store)
    store.commit_offsets("billing", "orders", {1: 1})
    second = console_series.record_sample(store)
    moves = offset_moves.moves_of(store, "billing")["orders"]
    assert (moves[0].offset, moves[0].moved_at_ms) == (1, first.at_ms)
    assert (moves[1].offset, moves[1].moved_at_ms) == (1, second.at_ms)
    revision = store.kv.revision(console_series.CONSOLE_NAMESPACE)
    console_series.record_sample(store)  # nothing moved: only the series is written
    assert store.kv.revision(console_series.CONSOLE_NAMESPACE) == revision + 1
    assert offset_moves.moves_of(store, "nobody") == {}
