"""Consumer groups: lifecycle, their retry policy, lag per queue, committing and resetting offsets."""

from __future__ import annotations

from tidemq_protocol.api.groups import (
    CommittedOffsets,
    GroupChange,
    GroupDescription,
    GroupList,
    GroupSpec,
    GroupView,
    OffsetReset,
    QueueLag,
    TopicLag,
)
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.retry import RetryPolicy
from tidemq_store import GroupConfig, MessageStore

from .push import dead_letter_topic


def create_group(store: MessageStore, spec: GroupSpec) -> GroupView:
    return GroupView(**store.create_group(GroupConfig(**spec.model_dump())).model_dump())


def change_group(store: MessageStore, name: str, change: GroupChange) -> GroupView:
    """Apply the fields `change` sets (its attributes unless null, its retry policy); the others stay."""
    config = store.get_group(name)
    given = change.model_fields_set - ({"attributes"} if change.attributes is None else set())
    changed = config.model_copy(update={field: getattr(change, field) for field in given})
    return GroupView(**store.update_group(changed).model_dump())


def check_may_pop(config: GroupConfig, topic: str) -> None:
    """InvalidArgument if the group may not pop `topic`: the topic it pushes from, or its own dead letters (its
    ledger of those holds its push retries, push_retries.py, and its resends, dead_letters.py)."""
    if config.push is not None and config.push.topic == topic:
        raise InvalidArgument(f"group {config.name!r} pushes from {topic!r}: it cannot pop it too (clear its push)")
    if topic == dead_letter_topic(config.name):
        raise InvalidArgument(f"group {config.name!r} cannot pop its own dead letters: resend them, or pop as another")


def retry_policy(config: GroupConfig, defaults: RetryPolicy) -> RetryPolicy:
    """The group's retry policy, each field it leaves unset taken from `defaults` (the server's settings)."""
    return (config.retry or RetryPolicy()).over(defaults)


def list_groups(store: MessageStore, after: str | None, limit: int) -> GroupList:
    groups = store.list_groups(after=after, limit=limit)
    return GroupList(
        groups=[GroupView(**g.model_dump()) for g in groups],
        next_after=groups.next_after,
    )


def topic_lag(store: MessageStore, group: str, topic: str) -> TopicLag:
    committed = store.committed_offsets(group, topic)
    queues = []
    for q in store.queue_offsets(topic):
        position = committed.get(q.queue)
        start = q.min_offset if position is None else max(position, q.min_offset)
        queues.append(
            QueueLag(
                queue=q.queue,
                committed_offset=position,
                min_offset=q.min_offset,
                max_offset=q.max_offset,
                lag=max(0, q.max_offset - start),
            )
        )
    return TopicLag(topic=topic, lag=sum(q.lag for q in queues), queues=queues)


def describe_group(store: MessageStore, name: str, topic: str | None) -> GroupDescription:
    """The group with its lag on `topic`, or on every topic it has committed offsets on."""
    config = store.get_group(name)
    topics = [topic] if topic else store.group_topics(name)
    lags = [topic_lag(store, name, t) for t in topics]
    return GroupDescription(**config.model_dump(), lag=sum(t.lag for t in lags), topics=lags)


def delete_group(store: MessageStore, name: str) -> None:
    store.delete_group(name)


def commit_offsets(store: MessageStore, group: str, topic: str, offsets: dict[int, int]) -> CommittedOffsets:
    store.commit_offsets(group, topic, offsets)
    return CommittedOffsets(group=group, topic=topic, offsets=store.committed_offsets(group, topic))


def reset_offsets(store: MessageStore, group: str, reset: OffsetReset) -> CommittedOffsets:
    store.get_group(group)
    ranges = store.queue_offsets(reset.topic)
    if reset.to == "earliest":
        offsets = {q.queue: q.min_offset for q in ranges}
    elif reset.to == "latest":
        offsets = {q.queue: q.max_offset for q in ranges}
    else:
        offsets = {q.queue: store.offset_for_timestamp(reset.topic, q.queue, reset.timestamp) for q in ranges}
    return commit_offsets(store, group, reset.topic, offsets)
