"""When each group's committed offsets last moved, as the console's sampler saw them: the store keeps a committed
offset but not when it was committed, so the sample job (console_series.record_sample) compares what it reads with
what it saw before and notes the time of each change.

One KV key a group (`moved/<group>` in the console's namespace), holding per topic and queue the committed offset and
the time the sampler first saw it there: `{"<topic>": {"<queue>": [<offset>, <ms>]}}`. Keys are read a hundred at a
time (`get_many`) and written only for a group whose offsets changed, so an idle cluster costs reads alone. The time
is as exact as the sampling (AWS: within a minute after the commit); an offset seen at the first sample shows that
sample's time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tidemq_protocol.errors import NamespaceNotFound
from tidemq_store import MessageStore

NAMESPACE = "tidemq-console"  # the console's (console_series.CONSOLE_NAMESPACE)
PREFIX = "moved/"
BATCH = 100

Positions = dict[str, dict[str, dict[int, int]]]
"""Committed offsets by group, topic and queue."""


@dataclass(frozen=True, slots=True)
class OffsetMove:
    """A queue's committed offset and when the sampler first saw it there."""

    offset: int
    moved_at_ms: int


def record_moves(store: MessageStore, positions: Positions, now_ms: int) -> int:
    """Note the time of every committed offset that changed since the last sample; how many groups were written."""
    names, written = sorted(positions), 0
    for start in range(0, len(names), BATCH):
        chunk = names[start : start + BATCH]
        found = store.kv.get_many(NAMESPACE, [PREFIX + name for name in chunk]).entries
        before = {entry.key.removeprefix(PREFIX): json.loads(entry.value) for entry in found}
        for name in chunk:
            seen = before.get(name, {})
            now = {
                topic: {
                    str(queue): _moved(seen.get(topic, {}).get(str(queue)), offset, now_ms)
                    for queue, offset in q.items()
                }
                for topic, q in positions[name].items()
            }
            if now != seen:
                store.kv.put(NAMESPACE, PREFIX + name, json.dumps(now).encode())
                written += 1
    return written


def _moved(seen: list[int] | None, offset: int, now_ms: int) -> list[int]:
    return seen if seen is not None and seen[0] == offset else [offset, now_ms]


def moves_of(store: MessageStore, group: str) -> dict[str, dict[int, OffsetMove]]:
    """What the sampler saw of a group: by topic and queue (empty before its first sample)."""
    try:
        read = store.kv.get(NAMESPACE, PREFIX + group)
    except NamespaceNotFound:
        return {}
    if read.entry is None:
        return {}
    return {
        topic: {int(queue): OffsetMove(*seen) for queue, seen in queues.items()}
        for topic, queues in json.loads(read.entry.value).items()
    }
