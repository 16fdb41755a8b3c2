"""A group's dead letters (`%DLQ%<group>`, one queue, written by push.dead_letter): list them, and resend chosen
ones, by id or a range of offsets, each to the topic it came from (its RETRY_TOPIC property) as a new message.

A resent message is its dead letter's body, keys, tag and own properties (the origin properties the letter got
are left out; ORIGIN_MESSAGE_ID names the first message, DLQ_MESSAGE_ID the letter, RESENT_FOR_GROUP the group),
stored on its origin queue when the topic still has it: a new message at a new offset, so a consumer receives it
with attempt 1 and the group's retry policy counts its deliveries from 0. It is resent for this group only: pop and
push hand a message with RESENT_FOR_GROUP to that group alone, and every other group passes over it
(tidemq_protocol/record/properties.py `addressed_to`). Readers by offset, which have no group, see it.

Resends are recorded, durably, so that a dead letter is not resent twice by accident: a second resend of it is
answered `already_resent` (with when it was), sends nothing, and is not an error, so a range resend cut short
(a crash, a timeout) can simply be sent again. The record is the group's pop ledger of its dead-letter topic
(tidemq_store/pop/api.py; a group may not pop its own dead letters, so the ledger is otherwise empty): one entry per
resent letter at its offset (attempt 1, visible_at_ms the time of the resend), and the cursor a version that every
record changes, so that of two resends racing for one letter only one records it (a claim is conditional on the
cursor it read). The record is written before the messages are put: a put that fails takes its record back, and
only a crash between the two leaves a letter recorded as resent without having been (at most once, never twice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidemq_protocol.api.dead_letters import (
    RESEND_MOST,
    DeadLetter,
    DeadLetterList,
    ResendRequest,
    ResendResponse,
    ResendResult,
)
from tidemq_protocol.api.messages import MessageView
from tidemq_protocol.codec import ProduceFrame
from tidemq_protocol.errors import (
    InvalidArgument,
    MessageNotFound,
    NotADeadLetter,
    OffsetOutOfRange,
    Overloaded,
    TopicNotFound,
)
from tidemq_protocol.message import Message, MessageType, StoredMessage
from tidemq_protocol.record import MESSAGE_GROUP, RESENT_FOR_GROUP
from tidemq_protocol.timer import delivery_properties
from tidemq_store import MessageStore
from tidemq_store.pop.api import Claim, Entry, PopLedger, Receipt, Settlement
from tidemq_store.pop.receive import new_nonce, now_ms

from . import trace
from .notifier import PushNotifier
from .produce import produce_frames
from .push import (
    DLQ_REASON,
    ORIGIN_MESSAGE_GROUP,
    ORIGIN_MESSAGE_ID,
    ORIGIN_QUEUE_ID,
    ORIGIN_QUEUE_OFFSET,
    RETRY_TOPIC,
    dead_letter_topic,
)

ORIGIN_PROPERTIES = (
    ORIGIN_MESSAGE_ID,
    RETRY_TOPIC,
    ORIGIN_QUEUE_ID,
    ORIGIN_QUEUE_OFFSET,
    "RECONSUME_TIME",
    DLQ_REASON,
    ORIGIN_MESSAGE_GROUP,
)
DLQ_MESSAGE_ID = "DLQ_MESSAGE_ID"  # the dead letter a resent message was made from
READ_BYTES = 4 * 1024 * 1024
RECORD_TRIES = 16
"""Records of one resend tried, each lost only to another resend recording meanwhile."""


class Resends:
    """Which dead letters of `group` were resent, and when (see the module docstring)."""

    def __init__(self, ledger: PopLedger, group: str) -> None:
        self.ledger, self.group, self.topic = ledger, group, dead_letter_topic(group)

    def read(self) -> dict[int, Entry]:
        """The resent letters' records, by offset."""
        return {entry.offset: entry for entry in self.ledger.read(self.group, self.topic, 0).entries}

    def record(self, offsets: Sequence[int], now: int) -> tuple[dict[int, Entry], dict[int, Entry]]:
        """Record `offsets` as resent now, those not recorded before: (the records made, those found)."""
        for _ in range(RECORD_TRIES):
            ledger = self.ledger.read(self.group, self.topic, 0)
            found = {entry.offset: entry for entry in ledger.entries if entry.offset in set(offsets)}
            made = {offset: Entry(offset, 1, new_nonce(), now) for offset in offsets if offset not in found}
            if not made:
                return {}, found
            claim = Claim(ledger.cursor, ledger.cursor + 1, tuple(made.values()))
            if self.ledger.claim(self.group, self.topic, 0, claim):
                return made, found
        raise Overloaded(f"dead letters of group {self.group!r} are being resent by others meanwhile: try again")

    def take_back(self, records: Sequence[Entry]) -> None:
        """Delete records whose resend failed (each only if it is still the one made)."""
        settlements = [Settlement(Receipt(0, entry.offset, entry.nonce)) for entry in records]
        self.ledger.settle(self.group, self.topic, settlements)


def list_dead_letters(store: MessageStore, group: str, offset: int, limit: int) -> DeadLetterList:
    """Up to `limit` dead letters of `group` from `offset` (from the oldest kept, if retention passed it)."""
    store.get_group(group)
    topic = dead_letter_topic(group)
    try:
        result = _read(store, topic, offset, limit)
    except TopicNotFound:  # no message of the group was ever dead-lettered
        return DeadLetterList(
            group=group, dead_letter_topic=topic, messages=[], next_offset=0, min_offset=0, max_offset=0
        )
    resent = Resends(store.pop_ledger, group).read()
    letters = [
        DeadLetter.model_construct(
            **MessageView.of(m).__dict__,
            resent_at_ms=resent[m.queue_offset].visible_at_ms if m.queue_offset in resent else None,
        )
        for m in result.messages
    ]
    return DeadLetterList(
        group=group,
        dead_letter_topic=topic,
        messages=letters,
        next_offset=result.next_offset,
        min_offset=result.min_offset,
        max_offset=result.max_offset,
    )


def _read(store: MessageStore, topic: str, offset: int, limit: int):
    try:
        return store.get(topic, 0, offset, limit, READ_BYTES)
    except OffsetOutOfRange as error:  # retention went past it: from what is left
        if offset >= error.min_offset:
            raise
        return store.get(topic, 0, error.min_offset, limit, READ_BYTES)


def chosen(store: MessageStore, group: str, request: ResendRequest) -> tuple[list[StoredMessage], int | None]:
    """The dead letters `request` names, oldest first, and where a range resend goes on (None: done). Refuses the
    whole request (nothing resent) when an id names no dead letter of the group."""
    store.get_group(group)
    topic = dead_letter_topic(group)
    if request.message_ids is not None:
        letters = {}
        for msg_id in request.message_ids:
            try:
                message = store.message_by_id(msg_id)
            except MessageNotFound:
                raise NotADeadLetter(f"no dead letter of group {group!r} has id {msg_id}") from None
            if message.topic != topic:
                raise NotADeadLetter(f"message {msg_id} is on topic {message.topic!r}, not a dead letter of {group!r}")
            letters[message.queue_offset] = message
        return [letters[offset] for offset in sorted(letters)], None
    try:
        end = store.queue_offsets(topic)[0].max_offset
    except TopicNotFound:  # no message of the group was ever dead-lettered: nothing to resend
        return [], None
    end = end if request.to_offset is None else min(request.to_offset, end)
    start = request.from_offset or 0
    if start >= end:
        return [], None
    result = _read(store, topic, start, min(RESEND_MOST, end - start))
    letters = [m for m in result.messages if m.queue_offset < end]
    return letters, (result.next_offset if result.next_offset < end else None)


def origin_topic(letter: StoredMessage) -> str:
    """The topic a dead letter came from (InvalidArgument if it does not say: not put there as a dead letter)."""
    topic = letter.properties.get(RETRY_TOPIC)
    if not topic:
        raise InvalidArgument(f"message {letter.msg_id} has no {RETRY_TOPIC} property: it is not a dead letter")
    return topic


def resend(
    store: MessageStore,
    group: str,
    letters: list[StoredMessage],
    next_offset: int | None,
    notifier: PushNotifier,
    may_publish: Callable[[str], None],
) -> ResendResponse:
    """Resend each of `letters` not resent before to its origin topic (see the module docstring); `may_publish`
    is asked for each origin topic first (raising AccessDenied), and each must exist, before anything changes."""
    origins = {letter.queue_offset: origin_topic(letter) for letter in letters}
    for topic in sorted(set(origins.values())):
        may_publish(topic)
        store.get_topic(topic)
    resends, now = Resends(store.pop_ledger, group), now_ms()
    made, found = resends.record([letter.queue_offset for letter in letters], now)
    fresh = [letter for letter in letters if letter.queue_offset in made]
    try:
        sent = _put(store, group, fresh, origins, notifier)
    except Exception:
        resends.take_back(list(made.values()))
        raise
    trace.resent(store, group, [origin for letter in fresh if (origin := _traced_origin(letter, sent)) is not None])
    results = []
    for letter in letters:
        offset = letter.queue_offset
        record = made.get(offset) or found[offset]
        results.append(
            ResendResult(
                msg_id=letter.msg_id,
                offset=offset,
                status="resent" if offset in made else "already_resent",
                topic=origins[offset],
                resent_msg_id=sent.get(offset),
                resent_at_ms=record.visible_at_ms,
            )
        )
    return ResendResponse(results=results, next_offset=next_offset)


def _put(
    store: MessageStore, group: str, letters: list[StoredMessage], origins: dict[int, str], notifier: PushNotifier
) -> dict[int, str]:
    """Put each letter's message on its origin topic, one batch a topic; the new ids by the letters' offsets. A
    TRANSACTION topic takes each as a transaction of its own, committed at once (its only way in)."""
    sent = {}
    for topic in sorted({origins[letter.queue_offset] for letter in letters}):
        batch = [letter for letter in letters if origins[letter.queue_offset] == topic]
        config = store.get_topic(topic)
        if config.message_type is MessageType.TRANSACTION:
            sent |= {letter.queue_offset: _committed(store, topic, config.queues, letter, group) for letter in batch}
            notifier.messages_stored(topic)
            continue
        at_once = delivery_properties(delay=0) if config.message_type is MessageType.DELAY else {}  # due: at once
        frames = [
            ProduceFrame(_message(letter, group, at_once), _origin_queue(letter, config.queues), None)
            for letter in batch
        ]
        results = produce_frames(store, topic, frames, notifier)
        sent |= {letter.queue_offset: result.msg_id for letter, result in zip(batch, results, strict=True)}
    return sent


def _committed(store: MessageStore, topic: str, queues: int, letter: StoredMessage, group: str) -> str:
    """Put a letter back on its TRANSACTION topic as a half message committed at once; its new id."""
    message = _message(letter, group, {})
    message.queue = _origin_queue(letter, queues) or 0
    half = store.transactions.prepare(topic, message, group, RESEND_CHECK_AFTER_MS)
    return store.transactions.end(topic, half.msg_id, True, "dead-letter resend").msg_id


def _traced_origin(letter: StoredMessage, sent: dict[int, str]) -> tuple[str, int, int, str, str] | None:
    """Where a resent letter's message was (topic, queue, offset, id) and its new id, for its trace (None: the letter
    does not say)."""
    queue, offset = letter.properties.get(ORIGIN_QUEUE_ID, ""), letter.properties.get(ORIGIN_QUEUE_OFFSET, "")
    if not (queue.isdigit() and offset.isdigit() and letter.queue_offset in sent):
        return None
    origin_id = letter.properties.get(ORIGIN_MESSAGE_ID, letter.msg_id)
    return letter.properties[RETRY_TOPIC], int(queue), int(offset), origin_id, sent[letter.queue_offset]


RESEND_CHECK_AFTER_MS = 3_600_000
"""A resent letter's transaction is committed as soon as it is prepared: no check-back is due meanwhile."""


def _message(letter: StoredMessage, group: str, more: dict[str, str]) -> Message:
    own = {name: value for name, value in letter.properties.items() if name not in ORIGIN_PROPERTIES}
    origin = letter.properties.get(ORIGIN_MESSAGE_ID, letter.msg_id)
    properties = {**own, ORIGIN_MESSAGE_ID: origin, DLQ_MESSAGE_ID: letter.msg_id, RESENT_FOR_GROUP: group, **more}
    if ORIGIN_MESSAGE_GROUP in letter.properties:  # a FIFO message's group, back from where the letter kept it
        properties[MESSAGE_GROUP] = letter.properties[ORIGIN_MESSAGE_GROUP]
    return Message(letter.body, 0, letter.keys, letter.tag, properties, letter.born_timestamp)


def _origin_queue(letter: StoredMessage, queues: int) -> int | None:
    """The queue the letter's message came from, if the topic still has it (else the produce route chooses, as it
    does for a FIFO message: its group's queue)."""
    if ORIGIN_MESSAGE_GROUP in letter.properties:
        return None
    queue = letter.properties.get(ORIGIN_QUEUE_ID, "")
    return int(queue) if queue.isdigit() and int(queue) < queues else None
