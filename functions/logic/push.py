"""Push delivery of one group (RocketMQ's push consumer): one pass over the queues of its topic.

For each queue, from the group's committed offset (the queue's oldest message if it has none): read up to
`batch_size` messages its filter (tag or SQL92) selects, call the target, and commit past them only after the target
succeeded. A failed call is retried after the group's backoff (its retry policy, tidemq_protocol.retry); once
`max_delivery_attempts` calls of a batch have failed, the batch is put to the group's dead-letter topic
`%DLQ%<group>` (created with one queue if missing; each message keeps its body, keys and tag, and gets its
origin as properties, as RocketMQ does: ORIGIN_MESSAGE_ID, RETRY_TOPIC, ...) and the offset moves past it; the
`PushNotifier` the caller gives is told the dead-letter topic has new messages (a group may push from it).

Guarantees: at least once (a crash between a call and its commit calls again with the same messages), and
each queue in order (a queue waits while its head batch is retried; the other queues go on). Retry counts and
due times are in the store (push_retries.py), so a restart goes on counting a batch's attempts where they were.

Resets are respected: each commit is a compare-and-set (`MessageStore.commit_offsets(..., expected=...)`) from
the offset the group had when this queue's delivery began, or that the previous commit left. If the offset
moved meanwhile (a reset to earliest to replay, to latest to skip a poison message, or another deliverer's
commit), the commit is refused, and delivery goes on from the offset the group has now: a replay is replayed,
a skip is skipped. The batch whose commit was refused was delivered all the same (at least once).

Nothing here sleeps or polls: `deliver` makes one pass up to the end each queue had when the pass began and
says when the next retry is due. The local worker sets a timer for it; the push function waits for it
(`push_invocations.PushEnvironment`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from functions.observability import logger
from tidemq_protocol.api.messages import MessageView
from tidemq_protocol.api.push import PushDelivery
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import InvalidArgument, OffsetConflict, OffsetOutOfRange, TopicExists, TopicNotFound
from tidemq_protocol.message import Message, StoredMessage
from tidemq_protocol.push_target import shown_target
from tidemq_protocol.record import (
    MESSAGE_GROUP,
    TIMER_DELAY_MS,
    TIMER_DELIVER_MS,
    addressed_to,
    encode_properties,
    message_group_of,
)
from tidemq_protocol.retry import RetryPolicy
from tidemq_store import MessageStore, TopicConfig
from tidemq_store.model import PushSubscription

from . import trace
from .notifier import PushNotifier
from .push_retries import PendingRetry, PushRetries
from .targets import Target, TargetFailed

DLQ_PREFIX = "%DLQ%"
"""RocketMQ's dead-letter topic prefix: a group's dead letters go to `%DLQ%<group>`."""

# Properties a dead-lettered message carries (RocketMQ's names where it has one).
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RETRY_TOPIC = "RETRY_TOPIC"  # the topic the message came from
ORIGIN_QUEUE_ID = "ORIGIN_QUEUE_ID"
ORIGIN_QUEUE_OFFSET = "ORIGIN_QUEUE_OFFSET"
RECONSUME_TIME = "RECONSUME_TIME"  # how many calls failed
DLQ_REASON = "DLQ_REASON"  # the last failure, shortened
ORIGIN_MESSAGE_GROUP = "ORIGIN_MESSAGE_GROUP"  # a FIFO message's group: a dead-letter topic takes no groups


def dead_letter_topic(group: str) -> str:
    return DLQ_PREFIX + group


@dataclass(slots=True)
class DeliveryReport:
    """What one pass did."""

    delivered: int = 0  # messages a target accepted
    failed_calls: int = 0
    dead_lettered: int = 0
    committed: int = 0  # commits made (progress, including past messages the tag filter skipped)
    retry_due_ms: int | None = None  # the earliest retry still waiting, if any
    interrupted: bool = False  # keep_going said stop before the end

    def retry_due(self, due_ms: int) -> None:
        self.retry_due_ms = due_ms if self.retry_due_ms is None else min(self.retry_due_ms, due_ms)

    @property
    def progressed(self) -> bool:
        return self.committed > 0

    def add(self, other: DeliveryReport) -> None:
        """Count `other`'s work in this report too (its retry and interruption are its own)."""
        self.delivered += other.delivered
        self.failed_calls += other.failed_calls
        self.dead_lettered += other.dead_lettered
        self.committed += other.committed


def deliver(
    store: MessageStore,
    group: str,
    subscription: PushSubscription,
    policy: RetryPolicy,
    target: Target,
    notifier: PushNotifier,
    keep_going: Callable[[], bool] = lambda: True,
) -> DeliveryReport:
    """One pass of `group`'s push delivery, retrying as `policy` (the group's, defaults filled in) says;
    `notifier` is told once if the pass put dead letters; `keep_going` is asked before each call (a closing
    worker, a Lambda running out of time)."""
    report = DeliveryReport()
    topic = subscription.topic
    committed = store.committed_offsets(group, topic)
    retries = PushRetries(store.pop_ledger, group, topic)
    for queue in store.queue_offsets(topic):
        position = QueuePosition(queue.queue, committed.get(queue.queue), queue.min_offset)
        if position.offset < queue.max_offset and not _deliver_queue(
            store, group, subscription, policy, target, position, queue.max_offset, retries, report, keep_going
        ):
            report.interrupted = True
            break
    if report.dead_lettered:
        notifier.messages_stored(dead_letter_topic(group))
    return report


@dataclass(slots=True)
class QueuePosition:
    """Where delivery of one queue is: the group's committed offset as last seen (None: none, the queue's
    oldest message is next), which each commit expects, and the offset to read from."""

    queue: int
    committed: int | None
    min_offset: int = 0

    @property
    def offset(self) -> int:
        return self.min_offset if self.committed is None else max(self.committed, self.min_offset)


def _deliver_queue(
    store: MessageStore,
    group: str,
    subscription: PushSubscription,
    policy: RetryPolicy,
    target: Target,
    position: QueuePosition,
    end: int,
    retries: PushRetries,
    report: DeliveryReport,
    keep_going: Callable[[], bool],
) -> bool:
    """Deliver one queue from `position` up to `end`, or until its head batch must wait; False if interrupted."""
    topic, queue, offset = subscription.topic, position.queue, position.offset
    pending = retries.pending(queue)
    if pending is not None and pending.offset != offset:  # done, reset or expired since: that batch is not the head
        retries.clear(pending)
        pending = None
    while offset < end:
        if pending is not None and pending.due_ms > now_ms():
            report.retry_due(pending.due_ms)
            return True
        if not keep_going():
            return False
        try:
            batch = store.get(topic, queue, offset, subscription.batch_size, message_filter=subscription.message_filter)
        except OffsetOutOfRange as error:  # retention passed the offset since the pass began
            offset = error.min_offset
            continue
        messages = [message for message in batch.messages if addressed_to(message.properties, group)]
        if messages:
            attempt = (pending.attempts if pending else 0) + 1
            delivery = PushDelivery(
                group=group,
                topic=topic,
                queue=queue,
                attempt=attempt,
                messages=[MessageView.of(m) for m in messages],
            )
            trace.delivered_by_push(store, group, topic, messages, attempt)
            try:
                target(delivery)
                report.delivered += len(messages)
            except TargetFailed as error:
                report.failed_calls += 1
                logger.warning(
                    "push to %s failed (group %s, %s:%d@%d, attempt %d of %d): %s",
                    shown_target(subscription.target),
                    group,
                    topic,
                    queue,
                    offset,
                    attempt,
                    policy.attempts,
                    error,
                )
                if attempt < policy.attempts:
                    pending = retries.record(queue, offset, attempt, now_ms() + policy.delay_ms(attempt))
                    report.retry_due(pending.due_ms)
                    return True
                dead_letter(store, group, messages, attempt, str(error))
                report.dead_lettered += len(messages)
        try:
            store.commit_offsets(group, topic, {queue: batch.next_offset}, expected={queue: position.committed})
        except OffsetConflict as moved:  # a reset (or another deliverer) moved the offset: go on from there
            logger.info(
                "group %s's offset on %s:%d moved from %s to %s while delivering; going on from there",
                group,
                topic,
                queue,
                position.committed,
                moved.actual,
            )
            pending = _cleared(retries, pending)
            position.committed = moved.actual
            offset = position.offset
            continue
        pending = _cleared(retries, pending)  # after the commit: a crash between leaves a stale record, cleared
        report.committed += 1
        position.committed = offset = batch.next_offset
    return True


def _cleared(retries: PushRetries, pending: PendingRetry | None) -> None:
    if pending is not None:
        retries.clear(pending)


NOT_IN_A_LETTER = frozenset({MESSAGE_GROUP, TIMER_DELIVER_MS, TIMER_DELAY_MS})
"""Properties of a message its dead letter leaves out: the letter's topic is neither FIFO nor DELAY."""


def letter(message: StoredMessage, origin: dict[str, str]) -> Message:
    """The dead letter of `message`: its body, keys, tag and properties, and `origin` as properties, within a
    record's bounds (a message may already have as many properties, or as many bytes of them, as a record
    holds). When they do not all fit, `origin` stays whole and the message's own properties are kept, in order,
    while they fit (then, in the extreme, its keys go too); `DLQ_REASON` says what was left out. The original
    (`ORIGIN_MESSAGE_ID`) still has it all. A message's group is kept as `ORIGIN_MESSAGE_GROUP`: the
    dead-letter topic is not FIFO. Nor is it DELAY: a delay message's due time is left out (its id is the
    origin's, ORIGIN_MESSAGE_ID)."""
    group = message_group_of(message.properties)
    if group is not None:
        origin = {**origin, ORIGIN_MESSAGE_GROUP: group}
    own = [(name, value) for name, value in message.properties.items() if name not in NOT_IN_A_LETTER]
    for keys in (message.keys, ()):
        for kept in range(len(own), -1, -1):
            properties = {**dict(own[:kept]), **origin}
            left_out = []
            if kept < len(own):
                left_out.append(f"{len(own) - kept} of its properties")
            if keys != message.keys:
                left_out.append("its keys")
            if left_out:
                properties[DLQ_REASON] = f"{origin[DLQ_REASON]} ({' and '.join(left_out)} left out of this letter)"
            try:
                encode_properties(keys, message.tag, properties)
            except InvalidArgument:
                continue
            return Message(message.body, 0, keys, message.tag, properties, message.born_timestamp)
    raise AssertionError("a tag and the origin alone fit a record")  # each far under the bounds


def dead_letter(store: MessageStore, group: str, messages: list[StoredMessage], attempts: int, reason: str) -> None:
    """Put `messages` to the group's dead-letter topic in one batch, each with its origin as properties."""
    topic = dead_letter_topic(group)
    letters = [
        letter(
            m,
            {
                ORIGIN_MESSAGE_ID: m.msg_id,
                RETRY_TOPIC: m.topic,
                ORIGIN_QUEUE_ID: str(m.queue),
                ORIGIN_QUEUE_OFFSET: str(m.queue_offset),
                RECONSUME_TIME: str(attempts),
                DLQ_REASON: reason,
            },
        )
        for m in messages
    ]
    try:
        results = store.put(topic, letters)
    except TopicNotFound:
        with contextlib.suppress(TopicExists):  # another deliverer may have created it meanwhile
            store.create_topic(TopicConfig(name=topic, queues=1))
        results = store.put(topic, letters)
    trace.dead_lettered(store, group, messages, results, attempts)
    logger.warning(
        "dead-lettered %d message(s) of group %s to %s after %d attempts", len(letters), group, topic, attempts
    )
