"""The serverless backend's consumer offsets: one `offsets` item per group and queue (tables.py), filed under the
topic so a topic's deletion finds them with one Query, and listed by group through the `by_group` index.

A commit is one TransactWriteItems: a condition that the group's item exists (so no commit outlives its group's
deletion), for a compare-and-set a condition on each queue's offset item, and the puts.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Mapping

from pynamodb.exceptions import TransactWriteError
from pynamodb.transactions import TransactWrite

from tidemq_protocol.errors import GroupNotFound, InvalidArgument, OffsetConflict, OffsetOutOfRange

from ..model import check_queue
from .conditions import raced
from .metadata import Metadata
from .queue_index import BACKOFF_S, MAX_BACKOFF_S, QueueIndex
from .tables import Tables

COMMIT_QUEUES = 99  # offsets in one commit transaction (DynamoDB's limit of 100 items, less the group's condition)
COMMIT_ATTEMPTS = 8  # a commit that met a concurrent transaction on its items tries this many times more
CONDITION_FAILED = "ConditionalCheckFailed"


class ConsumerOffsets:
    """The groups' committed offsets, checked against the topics (`metadata`) and their queues (`index`)."""

    def __init__(self, tables: Tables, metadata: Metadata, index: QueueIndex) -> None:
        self.tables, self.metadata, self.index = tables, metadata, index

    def commit(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        """One transaction (the module docstring), with `expected` a condition on each of those queues' offset
        items. More than COMMIT_QUEUES queues go in several transactions (a compare-and-set is refused beyond that)."""
        config = self.metadata.get_topic(topic)
        for queue, offset in offsets.items():
            check_queue(config, queue)
            state = self.index.state(topic, queue)
            if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= state.next_offset:
                raise OffsetOutOfRange(topic, queue, offset, state.min_offset, state.next_offset)
        expected = dict(expected or {})
        queues = sorted(set(offsets) | set(expected))
        if expected and len(queues) > COMMIT_QUEUES:
            raise InvalidArgument(f"a compare-and-set commit covers at most {COMMIT_QUEUES} queues, not {len(queues)}")
        for start in range(0, len(queues), COMMIT_QUEUES):
            chunk = queues[start : start + COMMIT_QUEUES]
            self._commit(group, topic, {q: offsets[q] for q in chunk if q in offsets}, expected, chunk)

    def _commit(
        self, group: str, topic: str, offsets: dict[int, int], expected: dict[int, int | None], queues: list[int]
    ) -> None:
        groups, items = self.tables.groups, self.tables.offsets
        for attempt in itertools.count():
            try:
                with TransactWrite(connection=self.tables.connection) as transaction:
                    transaction.condition_check(groups, "group", group, condition=groups.name.exists())
                    for queue in queues:
                        condition = None
                        if queue in expected:
                            seen = expected[queue]
                            condition = items.slot.does_not_exist() if seen is None else items.offset == seen
                        if queue in offsets:
                            item = items(topic, _slot(group, queue), group=group, queue=queue, offset=offsets[queue])
                            transaction.save(item, condition=condition)
                        else:
                            transaction.condition_check(items, topic, _slot(group, queue), condition=condition)
                return
            except TransactWriteError as error:
                failed = [i for i, r in enumerate(error.cancellation_reasons or []) if r and r.code == CONDITION_FAILED]
                if failed and failed[0] == 0:
                    raise GroupNotFound(group) from None
                if failed:
                    queue = queues[failed[0] - 1]
                    actual = self.committed(group, topic).get(queue)
                    raise OffsetConflict(group, topic, queue, expected.get(queue), actual) from None
                if not raced(error) or attempt >= COMMIT_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0, min(MAX_BACKOFF_S, BACKOFF_S * 2**attempt)))  # a concurrent commit

    def committed(self, group: str, topic: str) -> dict[int, int]:
        self.metadata.get_group(group)
        self.metadata.get_topic(topic)
        offsets = self.tables.offsets
        items = offsets.query(topic, offsets.slot.startswith(f"{group}/"), consistent_read=True)
        return {int(item.queue): int(item.offset) for item in items}

    def group_topics(self, group: str) -> list[str]:
        """The group's topics, from the `by_group` index (eventually consistent: a first commit shows up
        within a second or so)."""
        self.metadata.get_group(group)
        return sorted({item.topic for item in self.tables.offsets.by_group.query(group)})

    def forget_topic(self, topic: str) -> None:
        """Delete every group's offsets of the topic (one Query, then BatchWriteItem)."""
        with self.tables.offsets.batch_write() as writer:
            for item in self.tables.offsets.query(topic):
                writer.delete(item)

    def forget_group(self, group: str) -> None:
        """Delete the group's offsets of every topic (the `by_group` index, then BatchWriteItem)."""
        offsets = self.tables.offsets
        with offsets.batch_write() as writer:
            for item in offsets.by_group.query(group):
                writer.delete(offsets(item.topic, item.slot))


def _slot(group: str, queue: int) -> str:
    return f"{group}/{queue:04d}"  # "/" is in no group name (model.NAME_RULE): one group's slots share a prefix


__all__ = ["ConsumerOffsets"]
