"""`PopLedger`: what a consumer group in pop mode holds of each queue of a topic, the one API every backend serves
(embedded: embedded/pop.py, RocksDB); receive.py decides with it what to deliver.

A pop group does not own queues, and it does not commit an offset: the broker hands out messages from any queue,
each to one consumer at a time, until it is acked. What the group holds of one queue is

    cursor      the first offset the group has never passed: every message from here on is new to it
    entries     one per message below the cursor that is neither acked nor filtered out, by offset:
                attempt         deliveries so far (0: a FIFO message waiting behind its group, never delivered)
                nonce           the current delivery's: a receipt handle names (queue, offset, nonce); 0 waiting
                visible_at_ms   held by its consumer until then; from then on it is delivered again, attempt + 1
                group           the message's message group, kept by a FIFO receive (None otherwise)

so the group's progress on the queue (what lag counts from) is its lowest entry, or the cursor when it has none.

The protocol. Every change to a queue's ledger is conditional, and each is one atomic write:
- a **claim** (a receive) moves the cursor from what the receiver read to past the messages it delivers, adds an
  entry for each, and gives each entry it delivers again a new nonce and visible time, on condition that the
  cursor is still where it read it and each of those entries still has the nonce it read: of two consumers that
  read the same state, one claim wins and the other reads again. A message is therefore held by one delivery at
  a time: its entry names one nonce, and only a claim that saw the entry expire replaces it.
- a **settlement** names an entry by (queue, offset, nonce): an ack deletes it, a change of invisible time or a
  release gives it a new nonce and visible time, and a dead-lettering (its message put to the group's dead
  letters) deletes it and marks its offset, each on condition that the nonce is still the one named. A handle
  whose entry is gone names a message that went to the dead letters without an ack if its offset is marked
  (DEAD_LETTERED, to an ack and to a change alike: the work is not settled, the message waits in `%DLQ%<group>`),
  else, if its offset is below the cursor, a message already acked (an ack of it again succeeds and changes
  nothing); any other mismatch is a stale or forged handle, refused, changing nothing.

FIFO (receive.py says what a FIFO receive takes). A message group is held while one of its entries is delivered
and not yet visible again, and the cursor may pass a held group's messages, leaving a **waiting** entry for each.
The same two kinds of write keep a group to one batch in flight: any claim that delivers a message of a group
either gives its oldest entry a new nonce (the group had entries: every receive starts a group at its oldest, so
two such claims condition on that one entry's nonce, and one loses) or moves the cursor past its new messages (the
group had none: two such claims condition on one cursor, and one loses; and the group can only have come to have
entries by a claim that moved that cursor). A claim that read a group as held and made its new messages wait is
written only if the cursor is still where it read it; that the group's delivery was acked or released meanwhile
only leaves waiting entries that the next receive delivers, in order. A waiting entry's nonce is 0, which no
receipt handle names, so no settlement can touch it. A release, or an invisible time that ends, makes the
message visible where it is, below its group's waiting entries: it is its group's oldest entry, delivered again
(attempt + 1) before any later message of its group. Waiting entries are written in the claims as every entry
is, so they are there after a crash or a reopen as the rest of the ledger is.

Why it is crash-safe: the ledger is the only state (no in-memory holding), every write is durable before it is
answered (RocksDB with its WAL synced, DynamoDB), and each is atomic, so a crash at any moment leaves the ledger
before or after each write. A receive answered has its claim written: its messages come back, attempt + 1, when
their visible time ends, whether or not the consumer lived. A receive whose claim was written but whose answer was
lost is the same as a consumer that died holding its messages. An ack answered has deleted its entry, so the
message is never delivered again. Nonces are 63 random bits: a handle cannot be guessed, and one that named an
earlier delivery never matches the entry's current nonce.

Dead-letter marks. Apart from its entries, a queue's ledger has MARK_SLOTS mark slots: the mark of offset o is in
slot o % MARK_SLOTS and names o. A dead-lettering puts its mark unconditionally, taking the slot from any mark that
held it, so a mark is kept until a message of its queue a multiple of MARK_SLOTS offsets away is dead-lettered
after it, or the group's ledger of the topic is deleted (which deletes marks as it deletes entries): a queue never
has more than MARK_SLOTS marks, whatever its traffic, and they need no sweep. A read of a queue's ledger does not
see them and a claim does not write them: they cost a dead-lettering's write one more item, and a settlement
refused for a gone entry one more point read. A message whose mark was taken by a later one is answered as one
whose entry retention dropped is: ALREADY_ACKED to an ack below the cursor (the ledger no longer knows it).
Ledgers written before there were marks have none, and read as before. The order makes marks crash-safe: a
dead-lettering (receive.py `_dead_letter`) first holds the entry on the nonce the consumer's handle names, then
puts the message to the dead letters, then deletes the entry and writes its mark in one write, on the nonce it
held the entry with. So no crash leaves a message marked that is not among the dead letters (the put came first),
an entry deleted without its mark (one write), or a message both acked and marked: an ack and the hold condition
on the same nonce, and whichever is written first makes the other's condition fail (an ack refused so is STALE
while the entry is held, DEAD_LETTERED once it is marked).

Compared with RocketMQ's pop (a checkpoint per popped batch with an ack bitmap in a revive topic, acks matched
against checkpoints by a revive service, unacked messages copied into `%RETRY%<group>` with a reconsume count):
here a message is delivered again from where it is, with its id and offset, without a copy and without a revive
service; the entries of one queue are its checkpoint, read and written under one condition, and an ack is checked
against the delivery it names at once rather than matched later.
"""

from __future__ import annotations

import base64
import struct
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from tidemq_protocol.errors import InvalidReceiptHandle


@dataclass(frozen=True, slots=True)
class Entry:
    """One message below the cursor that the group has delivered and not yet had acked (see the module docstring)."""

    offset: int
    attempt: int
    nonce: int
    visible_at_ms: int
    group: str | None = None

    @property
    def waiting(self) -> bool:
        """A FIFO message waiting behind its message group: never delivered, no handle names it."""
        return self.attempt == 0


@dataclass(frozen=True, slots=True)
class QueueLedger:
    """What the group holds of one queue: its cursor and its entries, by offset."""

    cursor: int
    entries: tuple[Entry, ...] = ()

    @property
    def progress(self) -> int:
        """The group's progress on the queue: its lowest entry's offset, or the cursor when it has none."""
        return self.entries[0].offset if self.entries else self.cursor


@dataclass(frozen=True, slots=True)
class Claim:
    """A receive's change to one queue's ledger: the cursor from `cursor` to `new_cursor`, `delivered` entries put
    (new ones at or past `cursor`, or ones below it with a new nonce, on condition that they still have the nonce
    `replaced` gives for their offset), `dropped` entries deleted on the same condition (a message gone from
    the queue, or dead-lettered), and `waiting` entries put, new ones at or past `cursor` (FIFO)."""

    cursor: int
    new_cursor: int
    delivered: tuple[Entry, ...] = ()
    replaced: dict[int, int] | None = None
    dropped: tuple[Entry, ...] = ()
    waiting: tuple[Entry, ...] = ()


class Settled(Enum):
    """What became of one settlement."""

    DONE = "done"  # the entry was deleted (ack, dead-lettering) or given its new nonce and visible time
    ALREADY_ACKED = "already_acked"  # no entry, offset below the cursor: acked before (an ack again changes nothing)
    DEAD_LETTERED = "dead_lettered"  # no entry, offset marked: gone to the dead letters without an ack
    STALE = "stale"  # the handle names no current delivery: delivered again since, changed, or forged


class Settlement(NamedTuple):
    """An ack (`then` None: delete the entry) or a change (`then`: the entry's new state) of the delivery
    `receipt` names; with `dead_lettered`, the deletion of an entry whose message was put to the dead letters, which
    marks its offset (`then` None)."""

    receipt: Receipt
    then: Entry | None = None
    dead_lettered: bool = False


MARK_SLOTS = 4096
"""Dead-letter marks one queue's ledger keeps at most: the mark of offset o is in slot o % MARK_SLOTS."""

HANDLE = struct.Struct(">BIQQ")
"""A receipt handle's bytes: format version (1), queue, offset, nonce; sent as URL-safe base64 (28 characters)."""
HANDLE_VERSION = 1


class Receipt(NamedTuple):
    """What a receipt handle names: one delivery of the message at `queue`:`offset`. Clients hold the handle as an
    opaque string."""

    queue: int
    offset: int
    nonce: int

    def handle(self) -> str:
        return base64.urlsafe_b64encode(HANDLE.pack(HANDLE_VERSION, self.queue, self.offset, self.nonce)).decode()

    @classmethod
    def of(cls, handle: str) -> Receipt:
        """The receipt a handle names (InvalidReceiptHandle if it is not one)."""
        try:
            version, queue, offset, nonce = HANDLE.unpack(base64.urlsafe_b64decode(handle.encode("ascii")))
        except (ValueError, UnicodeEncodeError, struct.error, AttributeError):
            raise InvalidReceiptHandle(f"{handle!r:.60} is not a receipt handle") from None
        if version != HANDLE_VERSION or not nonce:
            raise InvalidReceiptHandle(f"{handle!r:.60} is not a receipt handle")
        return cls(queue, offset, nonce)


class PopLedger(ABC):
    """Each pop group's ledger of each queue (see the module docstring)."""

    @abstractmethod
    def read(self, group: str, topic: str, queue: int) -> QueueLedger:
        """The group's ledger of the queue as it stands (cursor 0 and no entries if the group never received)."""

    @abstractmethod
    def claim(self, group: str, topic: str, queue: int, claim: Claim) -> bool:
        """Write `claim` if its conditions hold (see `Claim`), atomically; False, changing nothing, if they do not."""

    @abstractmethod
    def settle(self, group: str, topic: str, settlements: Sequence[Settlement]) -> list[Settled]:
        """Apply each settlement whose receipt names its entry's current nonce; say what became of each."""

    @abstractmethod
    def was_dead_lettered(self, group: str, topic: str, queue: int, offset: int) -> bool:
        """Whether the queue's dead-letter mark says the message at `offset` went to the dead letters (see the module
        docstring)."""

    @abstractmethod
    def forget_group(self, group: str) -> None:
        """Delete the group's ledgers (group deletion)."""

    @abstractmethod
    def forget_topic(self, topic: str) -> None:
        """Delete every group's ledgers of the topic (topic deletion)."""

    def close(self) -> None:  # noqa: B027 (a ledger with nothing to release keeps the default)
        """Release what the ledger holds open."""
