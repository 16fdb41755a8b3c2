"""Pop consumption over a store and its pop ledger (api.py has the ledger's protocol): what a receive delivers,
and the acks, changes of invisible time and releases that settle it. Backend-neutral: messages are read with
`MessageStore.get`, and every change is a ledger claim or settlement.

A receive goes through the topic's queues from a different one each time (no queue belongs to a consumer), and
from each takes first the messages whose visible time has ended (delivered again, attempt + 1), then new ones from
the cursor (tag-filtered as a pull is: a message the filter skips is passed for good). It claims what it took in
one conditional write; if another receive claimed first, it reads the ledger again and takes again.
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

from tidemq_protocol.errors import InvalidArgument, InvalidReceiptHandle, OffsetOutOfRange
from tidemq_protocol.message import StoredMessage, TagFilter

from ..api import MessageStore
from .api import Claim, Entry, PopLedger, QueueLedger, Receipt, Settled, Settlement

CLAIM_TRIES = 8
"""Claims of one queue a receive tries before it goes on to the next (each lost to a receive that read the same)."""
READ_BYTES = 4 * 1024 * 1024


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
    a consumer, and leaves the ledger (None: every message is delivered again until acked)."""

    def __init__(
        self,
        store: MessageStore,
        ledger: PopLedger,
        max_attempts: int | None = None,
        dead_letters: DeadLetters | None = None,
        turns: Iterator[int] | None = None,
    ) -> None:
        """`turns` numbers the receives, each starting at the next queue: pass one count to consumptions made
        per request, so that they go on rotating (default: a count of this one's own)."""
        if (max_attempts is None) != (dead_letters is None) or (max_attempts is not None and max_attempts < 1):
            raise InvalidArgument("max_attempts (at least 1) and dead_letters go together")
        self.store, self.ledger = store, ledger
        self.max_attempts, self.dead_letters = max_attempts, dead_letters
        self._turn = itertools.count() if turns is None else turns

    def receive(
        self,
        group: str,
        topic: str,
        max_messages: int,
        invisible_ms: int,
        tag_filter: str | TagFilter | None = None,
        now: int | None = None,
    ) -> list[Popped]:
        """Up to `max_messages` messages of `topic` the group holds none of, each held for `invisible_ms`."""
        if max_messages < 1 or invisible_ms < 1:
            raise InvalidArgument(f"max_messages and invisible_ms must be positive, got {max_messages}, {invisible_ms}")
        queues = self.store.cached_topic(topic).queues
        now = now_ms() if now is None else now
        tag_filter = TagFilter.parse(tag_filter) if isinstance(tag_filter, str) else tag_filter
        first = next(self._turn)
        popped: list[Popped] = []
        for index in range(queues):
            if len(popped) == max_messages:
                break
            queue = (first + index) % queues
            want = max_messages - len(popped)
            popped += self._receive_queue(group, topic, queue, want, now + invisible_ms, tag_filter, now)
        return popped

    def _receive_queue(
        self, group: str, topic: str, queue: int, want: int, until: int, tag_filter: TagFilter | None, now: int
    ) -> list[Popped]:
        for _ in range(CLAIM_TRIES):
            ledger = self.ledger.read(group, topic, queue)
            again, gone = self._due(topic, queue, ledger, want, now)
            if self.max_attempts is not None:
                spent = [(entry, message) for entry, message in again if entry.attempt >= self.max_attempts]
                if spent:  # put first: a crash before the claim letters them again, never loses them
                    self.dead_letters(group, [message for _, message in spent], self.max_attempts)
                    again = [pair for pair in again if pair not in spent]
                    gone += [entry for entry, _ in spent]
            new, cursor = self._new(topic, queue, ledger.cursor, want - len(again), tag_filter)
            if not again and not gone and not new and cursor == ledger.cursor:
                return []
            delivered = [
                (message, Entry(entry.offset, entry.attempt + 1, new_nonce(), until)) for entry, message in again
            ]
            delivered += [(message, Entry(message.queue_offset, 1, new_nonce(), until)) for message in new]
            claim = Claim(
                ledger.cursor,
                cursor,
                tuple(entry for _, entry in delivered),
                {entry.offset: entry.nonce for entry, _ in again} | {entry.offset: entry.nonce for entry in gone},
                tuple(gone),
            )
            if self.ledger.claim(group, topic, queue, claim):
                return [
                    Popped(message, Receipt(queue, entry.offset, entry.nonce).handle(), entry.attempt, until)
                    for message, entry in delivered
                ]
        return []

    def _due(
        self, topic: str, queue: int, ledger: QueueLedger, want: int, now: int
    ) -> tuple[list[tuple[Entry, StoredMessage]], list[Entry]]:
        """Up to `want` entries whose visible time has ended, with their messages; and the entries whose message
        the queue no longer holds (retention took it)."""
        again, gone = [], []
        for entry in ledger.entries:
            if len(again) == want:
                break
            if entry.visible_at_ms > now:
                continue
            try:
                found = self.store.get(topic, queue, entry.offset, 1, READ_BYTES).messages
            except OffsetOutOfRange:
                found = []
            if found and found[0].queue_offset == entry.offset:
                again.append((entry, found[0]))
            else:
                gone.append(entry)
        return again, gone

    def _new(
        self, topic: str, queue: int, cursor: int, want: int, tag_filter: TagFilter | None
    ) -> tuple[list[StoredMessage], int]:
        """Up to `want` messages from the cursor, and where the cursor goes past them (and what the filter skipped)."""
        if want <= 0:
            return [], cursor
        try:
            result = self.store.get(topic, queue, cursor, want, READ_BYTES, tag_filter)
        except OffsetOutOfRange as error:  # retention went past the cursor: go on from what is left
            if cursor >= error.min_offset:
                raise
            result = self.store.get(topic, queue, error.min_offset, want, READ_BYTES, tag_filter)
        return result.messages, result.next_offset

    def ack(self, group: str, topic: str, handles: Sequence[str]) -> list[Settled]:
        """Ack each delivery a handle names: what became of each (an ack of an acked message succeeds again)."""
        return self.ledger.settle(group, topic, [Settlement(Receipt.of(handle)) for handle in handles])

    def change_invisible(self, group: str, topic: str, handle: str, invisible_ms: int, now: int | None = None) -> str:
        """Hold the delivery `handle` names for `invisible_ms` from now; its new handle (the old one is spent)."""
        if invisible_ms < 1:
            raise InvalidArgument(f"invisible_ms must be positive, got {invisible_ms}")
        return self._hold(group, topic, handle, invisible_ms, now)

    def release(self, group: str, topic: str, handle: str, delay_ms: int = 0, now: int | None = None) -> None:
        """Give the delivery `handle` names back: visible again after `delay_ms`, its next delivery attempt + 1."""
        if delay_ms < 0:
            raise InvalidArgument(f"delay_ms must not be negative, got {delay_ms}")
        self._hold(group, topic, handle, delay_ms, now)

    def _hold(self, group: str, topic: str, handle: str, hold_ms: int, now: int | None) -> str:
        receipt = Receipt.of(handle)
        ledger = self.ledger.read(group, topic, receipt.queue)
        current = next((entry for entry in ledger.entries if entry.offset == receipt.offset), None)
        if current is None or current.nonce != receipt.nonce:
            raise InvalidReceiptHandle(f"receipt handle {handle!r} names no message the group holds")
        until = (now_ms() if now is None else now) + hold_ms
        then = Entry(receipt.offset, current.attempt, new_nonce(), until)
        (settled,) = self.ledger.settle(group, topic, [Settlement(receipt, then)])
        if settled is not Settled.DONE:
            raise InvalidReceiptHandle(f"receipt handle {handle!r} names no message the group holds")
        return Receipt(receipt.queue, receipt.offset, then.nonce).handle()
