"""Pop consumption over a store and its pop ledger (api.py has the ledger's protocol): what a receive delivers,
and the acks, changes of invisible time and releases that settle it. Backend-neutral: messages are read with
`MessageStore.get`, and every change is a ledger claim or settlement.

A receive goes through the topic's queues from a different one each time (no queue belongs to a consumer), and
from each takes first the messages whose visible time has ended (delivered again, attempt + 1), then new ones from
the cursor (tag-filtered as a pull is: a message the filter skips is passed for good). It claims what it took in
one conditional write; if another receive claimed first, it reads the ledger again and takes again.

A FIFO receive (a `fifo` group on a FIFO topic: every message has a message group) keeps each message group in
order and holds at most one batch of a group at a time, while the other groups of the queue go on (SQS FIFO's way,
not RocketMQ's lock of a whole queue). A group is **held** while one of its entries is delivered and not yet
visible again; its other messages wait. From one queue a FIFO receive takes, in offset order:
- the entries of groups not held, each group's from its oldest on: its head again when its visible time ended
  (released, or not acked in time: attempt + 1, before any later message of its group), **alone** (the rest of
  its group waits for its ack: a poison message does not take the messages behind it to the dead letters, their
  attempts counting its failures), else its waiting entries; a group whose entry it does not take
  (`max_messages` reached) gives it nothing later;
- then new messages from the cursor: one of a group it may deliver is delivered; one of a held group, or of a
  group with an entry not taken, becomes a **waiting** entry (attempt 0, no nonce: never delivered, no handle can
  name it), and the cursor passes it, so the next group's messages behind it are delivered now rather than after
  the held group's. Passing is bounded: a claim writes at most FIFO_CLAIM_ENTRIES entries, and a queue holds at
  most FIFO_WAITING_MOST waiting entries, past which the cursor waits for a held group (RocketMQ's lock, then).
A message dead-lettered after its last attempt, or gone from the queue, leaves the ledger and its group goes on.

A settlement of a message that went to the dead letters without an ack says so (api.py's dead-letter marks): an
ack answers DEAD_LETTERED, and a change of invisible time, a release or a forward raises MessageDeadLettered.
"""

from __future__ import annotations

import itertools
import os
import secrets
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

from tidemq_protocol import filter as filters
from tidemq_protocol.errors import InvalidArgument, InvalidReceiptHandle, MessageDeadLettered, OffsetOutOfRange
from tidemq_protocol.filter import MessageFilter
from tidemq_protocol.message import MessageType, StoredMessage
from tidemq_protocol.record import addressed_to, message_group_of

from ..api import MessageStore
from .api import Claim, Entry, PopLedger, QueueLedger, Receipt, Settled, Settlement

CLAIM_TRIES = 8
"""Claims of one queue a receive tries before it goes on to the next (each lost to a receive that read the same)."""
READ_BYTES = 4 * 1024 * 1024
FIFO_CLAIM_ENTRIES = 64
"""Entries a FIFO claim writes at most (or `max_messages`, if more), delivered and waiting: within one DynamoDB
transaction (100 items) with the cursor."""
FIFO_WAITING_MOST = 1000
"""Waiting entries one queue's ledger holds at most: past them the cursor waits (each receive reads the ledger)."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What one receive asks of one queue: up to `want` messages for `group`, held until `until`, at `now`."""

    group: str
    topic: str
    queue: int
    want: int
    now: int
    until: int
    message_filter: MessageFilter | None


@dataclass(slots=True)
class Taken:
    """What a receive takes from one queue: entries delivered again (or, waiting, for the first time) with their
    messages, entries to drop (message gone), new messages, new waiting entries, and where the cursor goes."""

    again: list[tuple[Entry, StoredMessage]]
    gone: list[Entry]
    new: list[StoredMessage]
    waiting: list[Entry]
    cursor: int


@dataclass(frozen=True, slots=True)
class Popped:
    """One delivery: the message, the handle that acks or changes it, which delivery it is, and until when it is
    held."""

    message: StoredMessage
    receipt_handle: str
    attempt: int
    invisible_until_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Nonces:
    """63-bit random nonces from the OS's CSPRNG, drawn `BATCH` at a time: a draw per nonce is a system call that
    gives up the GIL, and under load a receive of 32 waited to get it back 32 times."""

    BATCH = 512

    def __init__(self) -> None:
        self._lock, self._left = threading.Lock(), iter(())
        os.register_at_fork(after_in_child=self._forget)  # a forked child must not draw its parent's nonces

    def _forget(self) -> None:
        self._lock, self._left = threading.Lock(), iter(())

    def __call__(self) -> int:
        with self._lock:
            nonce = next(self._left, None)
            if nonce is None:
                self._left = iter(NONCES.unpack(secrets.token_bytes(NONCES.size)))
                nonce = next(self._left)
        return (nonce >> 1) or 1


NONCES = struct.Struct(f"<{Nonces.BATCH}Q")
new_nonce = Nonces()


DeadLetters = Callable[[str, list[StoredMessage], int], None]
"""`dead_letters(group, messages, attempts)` puts `messages`, each delivered `attempts` times to `group`, where the
group's dead letters go (functions/logic/push.py: `%DLQ%<group>`)."""


class PopConsumption:
    """Pop consumption of `store`'s topics, its state in `ledger` (see the module docstring). A message delivered
    `max_attempts` times and still not acked when its invisible time ends goes to `dead_letters` instead of back to
    a consumer, and leaves the ledger (None: every message is delivered again until acked). A release that names
    no delay waits `backoff(attempt)` after the delivery's attempt (None: no wait)."""

    def __init__(
        self,
        store: MessageStore,
        ledger: PopLedger,
        max_attempts: int | None = None,
        dead_letters: DeadLetters | None = None,
        turns: Iterator[int] | None = None,
        backoff: Callable[[int], int] | None = None,
    ) -> None:
        """`turns` numbers the receives, each starting at the next queue: pass one count to consumptions made
        per request, so that they go on rotating (default: a count of this one's own)."""
        if (max_attempts is None) != (dead_letters is None) or (max_attempts is not None and max_attempts < 1):
            raise InvalidArgument("max_attempts (at least 1) and dead_letters go together")
        self.store, self.ledger = store, ledger
        self.max_attempts, self.dead_letters = max_attempts, dead_letters
        self._turn = itertools.count() if turns is None else turns
        self.backoff = backoff

    def receive(
        self,
        group: str,
        topic: str,
        max_messages: int,
        invisible_ms: int,
        message_filter: str | MessageFilter | None = None,
        now: int | None = None,
        fifo: bool = False,
    ) -> list[Popped]:
        """Up to `max_messages` messages of `topic` the group holds none of, each held for `invisible_ms`; `fifo`
        (the group's flag) on a FIFO topic: in order per message group (see the module docstring).
        `message_filter` is the subscription's (tag or SQL92; a string is a tag expression), as `MessageStore.get`
        takes it."""
        if max_messages < 1 or invisible_ms < 1:
            raise InvalidArgument(f"max_messages and invisible_ms must be positive, got {max_messages}, {invisible_ms}")
        config = self.store.cached_topic(topic)
        queues, ordered = config.queues, fifo and config.message_type is MessageType.FIFO
        now = now_ms() if now is None else now
        selector = filters.message_filter(message_filter)
        first = next(self._turn)
        popped: list[Popped] = []
        for index in range(queues):
            if len(popped) == max_messages:
                break
            queue = (first + index) % queues
            asked = Asked(group, topic, queue, max_messages - len(popped), now, now + invisible_ms, selector)
            popped += self._receive_queue(asked, ordered)
        return popped

    def _receive_queue(self, asked: Asked, ordered: bool) -> list[Popped]:
        group, topic, queue, until = asked.group, asked.topic, asked.queue, asked.until
        for _ in range(CLAIM_TRIES):
            ledger = self.ledger.read(group, topic, queue)
            taken = self._take_in_order(asked, ledger) if ordered else self._take(asked, ledger)
            again, gone, new, waiting = taken.again, taken.gone, taken.new, taken.waiting
            if not again and not gone and not new and not waiting and taken.cursor == ledger.cursor:
                return []
            delivered = [
                (message, Entry(entry.offset, entry.attempt + 1, new_nonce(), until, entry.group))
                for entry, message in again
            ]
            delivered += [
                (message, Entry(message.queue_offset, 1, new_nonce(), until, _group(message, ordered)))
                for message in new
            ]
            claim = Claim(
                ledger.cursor,
                taken.cursor,
                tuple(entry for _, entry in delivered),
                {entry.offset: entry.nonce for entry, _ in again} | {entry.offset: entry.nonce for entry in gone},
                tuple(gone),
                tuple(waiting),
            )
            if self.ledger.claim(group, topic, queue, claim):
                return [
                    Popped(message, Receipt(queue, entry.offset, entry.nonce).handle(), entry.attempt, until)
                    for message, entry in delivered
                ]
        return []

    def _take(self, asked: Asked, ledger: QueueLedger) -> Taken:
        """Up to `want` entries whose visible time has ended, with their messages, then new messages from the
        cursor; the entries whose message the queue no longer holds (retention took it) are dropped, and those at
        their last attempt go to the dead letters."""
        taken = Taken([], [], [], [], ledger.cursor)
        for entry in ledger.entries:
            if len(taken.again) == asked.want:
                break
            if entry.visible_at_ms > asked.now:
                continue
            message = self._message_at(asked, entry.offset)
            if message is None:
                taken.gone.append(entry)
            elif not self._spent(entry):
                taken.again.append((entry, message))
            else:
                self._dead_letter(asked, entry, message)
        taken.new, taken.cursor = self._new(asked, ledger.cursor, asked.want - len(taken.again))
        return taken

    def _take_in_order(self, asked: Asked, ledger: QueueLedger) -> Taken:
        """A FIFO receive's take from one queue (see the module docstring)."""
        now = asked.now
        closed = {entry.group for entry in ledger.entries if entry.attempt and entry.visible_at_ms > now}
        closed.discard(None)  # an entry without a group (made before its group was FIFO) holds only itself
        taken = Taken([], [], [], [], ledger.cursor)
        for entry in ledger.entries:
            if len(taken.again) == asked.want:
                return taken  # no new message either: a group with an entry left must not overtake it
            if entry.group in closed or (entry.attempt and entry.visible_at_ms > now):
                continue
            message = self._message_at(asked, entry.offset)
            if message is None:
                taken.gone.append(entry)  # gone from the queue: its group goes on
            elif not self._spent(entry):
                taken.again.append((entry, message))
                if entry.attempt and entry.group is not None:  # delivered again: alone
                    closed.add(entry.group)
            elif not self._dead_letter(asked, entry, message) and entry.group is not None:
                closed.add(entry.group)  # another receive letters it: its group waits for that
        self._pass_new(asked, ledger, closed, taken)
        return taken

    def _pass_new(self, asked: Asked, ledger: QueueLedger, closed: set[str | None], taken: Taken) -> None:
        """New messages from the cursor into `taken`, every entry of a group not `closed` being taken already: a
        closed group's message waits, any other is delivered; bounded by FIFO_CLAIM_ENTRIES and
        FIFO_WAITING_MOST."""
        want = asked.want
        budget = max(want, FIFO_CLAIM_ENTRIES) - len(taken.again)
        room = FIFO_WAITING_MOST - sum(1 for entry in ledger.entries if not entry.attempt)
        while (left := budget - len(taken.new) - len(taken.waiting)) > 0 and len(taken.again) + len(taken.new) < want:
            messages, next_offset = self._new(asked, taken.cursor, left)
            for message in messages:
                group = message_group_of(message.properties)
                if group is not None and group in closed:
                    if len(taken.waiting) >= room:
                        return  # the cursor waits here for a held group
                    taken.waiting.append(Entry(message.queue_offset, 0, 0, 0, group))
                elif len(taken.again) + len(taken.new) == want:
                    return
                else:
                    taken.new.append(message)
                taken.cursor = message.queue_offset + 1
            taken.cursor = max(taken.cursor, next_offset)  # past what the tag filter skipped
            if len(messages) < left:  # the queue's end (or the read's bytes): the next receive goes on
                return

    def _spent(self, entry: Entry) -> bool:
        """Whether the entry, due again, was delivered its last time."""
        return self.max_attempts is not None and entry.attempt >= self.max_attempts

    def dead_letter(self, group: str, topic: str, handle: str, hold_ms: int, now: int | None = None) -> None:
        """Put the message of the delivery `handle` names to the dead letters now, its consumer having given up on
        it (RocketMQ's ForwardMessageToDeadLetterQueue), and settle the delivery, as a spent entry is
        (`_dead_letter`: held for `hold_ms` meanwhile); InvalidReceiptHandle if the handle names no current one
        (MessageDeadLettered if its message is among the dead letters already)."""
        if self.dead_letters is None:
            raise InvalidArgument("this pop consumption has no dead letters to forward a message to")
        receipt = Receipt.of(handle)
        current = self._current(group, topic, receipt, handle)
        now = now_ms() if now is None else now
        asked = Asked(group, topic, receipt.queue, 1, now, now + hold_ms, None)
        message = self._message_at(asked, receipt.offset)
        if message is None:  # gone from the queue (retention): nothing to letter
            self.ledger.settle(group, topic, [Settlement(receipt)])
        elif not self._dead_letter(asked, current, message, current.attempt):
            self._refuse(group, topic, receipt, handle, Settled.STALE)

    def _current(self, group: str, topic: str, receipt: Receipt, handle: str) -> Entry:
        """The entry `receipt` names, if it is the delivery the handle was given for (MessageDeadLettered if its
        message went to the dead letters, else InvalidReceiptHandle, if not)."""
        ledger = self.ledger.read(group, topic, receipt.queue)
        current = next((entry for entry in ledger.entries if entry.offset == receipt.offset), None)
        if current is None or current.nonce != receipt.nonce:
            self._refuse(group, topic, receipt, handle, Settled.STALE)
        return current

    def _refuse(self, group: str, topic: str, receipt: Receipt, handle: str, settled: Settled) -> NoReturn:
        """Refuse a handle that names no current delivery: MessageDeadLettered if the ledger says its message went to
        the dead letters (`settled`, or its mark read now), else InvalidReceiptHandle."""
        lettered = settled is Settled.DEAD_LETTERED
        if lettered or self.ledger.was_dead_lettered(group, topic, receipt.queue, receipt.offset):
            raise MessageDeadLettered(
                f"receipt handle {handle!r} names a message that went to the dead letters of group {group!r} "
                "without an ack: it is no longer the group's to settle"
            )
        raise InvalidReceiptHandle(f"receipt handle {handle!r} names no message the group holds")

    def _dead_letter(self, asked: Asked, entry: Entry, message: StoredMessage, attempts: int | None = None) -> bool:
        """Put a spent entry's message to the dead letters (as delivered `attempts` times, default the most), once,
        and delete the entry, marking its offset; False (nothing done) if another receive does it. First the entry
        is held for this receive, on its nonce (of receives that read it spent, one wins; an ack after this is
        refused as stale), then the message is put, then the entry deleted and its offset marked in one write, on
        the nonce it was held with. A crash between leaves the entry held, unmarked: when its hold ends it is
        lettered again (at least once, never lost), and never marked before it was put (api.py says why)."""
        assert self.dead_letters is not None and self.max_attempts is not None  # _spent, or dead_letter, said so
        mine = Entry(entry.offset, entry.attempt, new_nonce(), asked.until, entry.group)
        held = Settlement(Receipt(asked.queue, entry.offset, entry.nonce), mine)
        if self.ledger.settle(asked.group, asked.topic, [held]) != [Settled.DONE]:
            return False
        self.dead_letters(asked.group, [message], attempts or self.max_attempts)
        lettered = Settlement(Receipt(asked.queue, entry.offset, mine.nonce), dead_lettered=True)
        self.ledger.settle(asked.group, asked.topic, [lettered])
        return True

    def _message_at(self, asked: Asked, offset: int) -> StoredMessage | None:
        """The message at `offset`, or None if the queue no longer holds it (retention took it)."""
        try:
            found = self.store.get(asked.topic, asked.queue, offset, 1, READ_BYTES).messages
        except OffsetOutOfRange:
            return None
        return found[0] if found and found[0].queue_offset == offset else None

    def _new(self, asked: Asked, cursor: int, want: int) -> tuple[list[StoredMessage], int]:
        """Up to `want` messages from the cursor, and where the cursor goes past them (and what the filter skipped, and
        the messages resent for another group)."""
        if want <= 0:
            return [], cursor
        topic, queue, chosen_by = asked.topic, asked.queue, asked.message_filter
        try:
            result = self.store.get(topic, queue, cursor, want, READ_BYTES, chosen_by)
        except OffsetOutOfRange as error:  # retention went past the cursor: go on from what is left
            if cursor >= error.min_offset:
                raise
            result = self.store.get(topic, queue, error.min_offset, want, READ_BYTES, chosen_by)
        return [m for m in result.messages if addressed_to(m.properties, asked.group)], result.next_offset

    def ack(self, group: str, topic: str, handles: Sequence[str]) -> list[Settled]:
        """Ack each delivery a handle names: what became of each (an ack of an acked message succeeds again; one of
        a message that went to the dead letters unacked answers DEAD_LETTERED, changing nothing)."""
        return self.ledger.settle(group, topic, [Settlement(Receipt.of(handle)) for handle in handles])

    def change_invisible(self, group: str, topic: str, handle: str, invisible_ms: int, now: int | None = None) -> str:
        """Hold the delivery `handle` names for `invisible_ms` from now; its new handle (the old one is spent)."""
        if invisible_ms < 1:
            raise InvalidArgument(f"invisible_ms must be positive, got {invisible_ms}")
        return self._hold(group, topic, handle, invisible_ms, now)

    def release(self, group: str, topic: str, handle: str, delay_ms: int | None = 0, now: int | None = None) -> None:
        """Give the delivery `handle` names back: visible again after `delay_ms` (None: the backoff for its attempt,
        a nack), its next delivery attempt + 1."""
        if delay_ms is not None and delay_ms < 0:
            raise InvalidArgument(f"delay_ms must not be negative, got {delay_ms}")
        self._hold(group, topic, handle, delay_ms, now)

    def _hold(self, group: str, topic: str, handle: str, hold_ms: int | None, now: int | None) -> str:
        receipt = Receipt.of(handle)
        current = self._current(group, topic, receipt, handle)
        if hold_ms is None:
            hold_ms = self.backoff(current.attempt) if self.backoff else 0
        until = (now_ms() if now is None else now) + hold_ms
        then = Entry(receipt.offset, current.attempt, new_nonce(), until, current.group)
        (settled,) = self.ledger.settle(group, topic, [Settlement(receipt, then)])
        if settled is not Settled.DONE:
            self._refuse(group, topic, receipt, handle, settled)
        return Receipt(receipt.queue, receipt.offset, then.nonce).handle()


def _group(message: StoredMessage, ordered: bool) -> str | None:
    """The message group an entry of `message` keeps: its own in a FIFO receive, else none (no order to keep)."""
    return message_group_of(message.properties) if ordered else None
