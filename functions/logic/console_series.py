"""The console's rolling series: cluster-wide totals (messages stored, messages consumed, lag) sampled on a schedule
and kept in the store, so that the overview's rate and lag charts cost one read, on Lambda as anywhere.

A sample walks every topic's queue offsets and every group's committed offsets once (pages of `PAGE`), which is why
it runs on the maintenance schedule (the `console` job: AWS every minute, the local servers every
`console_sample_interval_s`) and never on a page request. The series is one KV entry (namespace `CONSOLE_NAMESPACE`,
key `SERIES_KEY`): the last `SERIES_POINTS` samples as JSON, so it stays small (a few kB) however long it runs.
Rates are the differences of consecutive samples over their time apart; a total that went down (a topic deleted)
gives no negative rate but 0.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from itertools import pairwise

from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import NamespaceExists, NamespaceNotFound, TopicNotFound
from tidemq_protocol.kv import NamespaceConfig, is_kv_topic
from tidemq_store import MessageStore

from .offset_moves import NAMESPACE, Positions, record_moves

CONSOLE_NAMESPACE = NAMESPACE
"""The KV namespace the console keeps its state in (this series, and its sessions: functions/console/session.py)."""
SERIES_KEY = "series"
SERIES_POINTS = 120
"""Samples kept: an hour at the AWS schedule's one a minute (two at 30 s)."""
PAGE = 500


@dataclass(frozen=True, slots=True)
class Sample:
    """Cluster-wide totals at one time: messages stored (the sum of every queue's max offset), messages consumed
    (the sum of every group's committed offsets), lag (what groups have yet to consume, never negative), and how
    many topics (KV namespaces' own left out) and groups there were."""

    at_ms: int
    stored: int
    consumed: int
    lag: int
    topics: int = 0
    groups: int = 0


@dataclass(frozen=True, slots=True)
class RatePoint:
    """One point of the overview's charts: per-second rates since the sample before, and the lag then."""

    at_ms: int
    produced_per_s: float
    consumed_per_s: float
    lag: int


def ensure_namespace(store: MessageStore) -> None:
    """Create the console's namespace if it is not there yet."""
    try:
        store.kv.get_namespace(CONSOLE_NAMESPACE)
    except NamespaceNotFound:
        with contextlib.suppress(NamespaceExists):  # another process made it meanwhile
            store.kv.create_namespace(NamespaceConfig(CONSOLE_NAMESPACE))


def take_sample(store: MessageStore, positions: Positions | None = None) -> Sample:
    """Totals now, over every topic and group (a topic deleted meanwhile counts as empty); `positions`, when given,
    gets every group's committed offsets."""
    maxima: dict[str, dict[int, int]] = {}
    after = None
    while True:
        page = store.list_topics(after=after, limit=PAGE)
        for topic in page:
            if is_kv_topic(topic.name):
                continue
            try:
                maxima[topic.name] = {q.queue: q.max_offset for q in store.queue_offsets(topic.name)}
            except TopicNotFound:
                continue
        if page.next_after is None:
            break
        after = page.next_after
    consumed = lag = groups_seen = 0
    after = None
    while True:
        groups = store.list_groups(after=after, limit=PAGE)
        groups_seen += len(groups)
        for group in groups:
            for topic in store.group_topics(group.name):
                committed = store.committed_offsets(group.name, topic)
                if positions is not None:
                    positions.setdefault(group.name, {})[topic] = committed
                consumed += sum(committed.values())
                ends = maxima.get(topic, {})
                lag += sum(max(0, end - committed.get(queue, 0)) for queue, end in ends.items())
        if groups.next_after is None:
            break
        after = groups.next_after
    stored = sum(sum(ends.values()) for ends in maxima.values())
    return Sample(now_ms(), stored, consumed, lag, len(maxima), groups_seen)


def read_samples(store: MessageStore) -> list[Sample]:
    """The kept samples, oldest first (none before the first sample)."""
    try:
        read = store.kv.get(CONSOLE_NAMESPACE, SERIES_KEY)
    except NamespaceNotFound:
        return []
    if read.entry is None:
        return []
    return [Sample(*point) for point in json.loads(read.entry.value)]


def record_sample(store: MessageStore) -> Sample:
    """Take a sample and keep it, dropping the oldest past SERIES_POINTS, and note which committed offsets moved
    (offset_moves.py): what the console job runs."""
    ensure_namespace(store)
    positions: Positions = {}
    sample = take_sample(store, positions)
    record_moves(store, positions, sample.at_ms)
    kept = [*read_samples(store), sample][-SERIES_POINTS:]
    points = [[s.at_ms, s.stored, s.consumed, s.lag, s.topics, s.groups] for s in kept]
    store.kv.put(CONSOLE_NAMESPACE, SERIES_KEY, json.dumps(points).encode())
    return sample


def rates(samples: list[Sample], since_ms: int) -> list[RatePoint]:
    """Per-second rates between consecutive samples taken after `since_ms` (none from a single sample)."""
    points = []
    for before, after in pairwise(samples):
        if after.at_ms < since_ms or after.at_ms <= before.at_ms:
            continue
        seconds = (after.at_ms - before.at_ms) / 1000
        points.append(
            RatePoint(
                after.at_ms,
                max(0, after.stored - before.stored) / seconds,
                max(0, after.consumed - before.consumed) / seconds,
                after.lag,
            )
        )
    return points
