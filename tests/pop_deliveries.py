"""The deliveries of a pop stress run (tests/e2e/test_pop_exclusive.py, test_pop_sigkill.py): the record a consumer
process (tests/pop_consumer.py) writes of each, one JSON line, and what a run's deliveries must satisfy.

A delivery's **hold** is the time its consumer may take the message to be its own: from the moment its receive
returned to the earlier of the moment its ack was answered (a successful ack) and the `invisible_until_ms` the server
gave it. Times are epoch milliseconds of CLOCK_REALTIME, which the consumers and the gateway read on the same host:
the gateway computes `invisible_until_ms` from a `now` read before it writes its claim, and a consumer stamps a
receive after the answer has arrived, so the claim that hands a message out again (made at a server `now` at or past
the earlier delivery's `invisible_until_ms`, the condition for it to be due) is stamped by its consumer at or after
that moment, to the millisecond (both sides floor nanoseconds to milliseconds, which keeps the order). No slack is
needed, and none is given: a hold that ends after the next one of the same message starts is an overlap. (A step of
the host's clock backwards during a run would break the server's own invisible times as much as this check; a slewed
clock keeps the order.)
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tidemq_protocol.api.pop import ReceivedMessage

ACKED = ("acked", "already_acked")
"""Ack answers that say the message is acked (already_acked: an ack retried after its answer was lost)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of one message to one consumer, and what became of it: `ack` is an ack answer (acked,
    already_acked, invalid_receipt_handle), `timed_out` (left on purpose to come back), or `abandoned` (its ack
    could not reach a gateway: never sent, so the message comes back); `acked_ms` is when an ack was answered."""

    consumer: int
    msg_id: str
    body: str
    queue: int
    offset: int
    receipt_handle: str
    attempt: int
    received_ms: int
    invisible_until_ms: int
    ack: str
    acked_ms: int | None = None
    ack_tries: int = 0

    @classmethod
    def of(
        cls,
        consumer: int,
        message: ReceivedMessage,
        received_ms: int,
        ack: str,
        acked_ms: int | None = None,
        ack_tries: int = 0,
    ) -> Delivery:
        """The record of `message` as `consumer` received it."""
        return cls(
            consumer,
            message.msg_id,
            message.body,
            message.queue,
            message.offset,
            message.receipt_handle,
            message.attempt,
            received_ms,
            message.invisible_until_ms,
            ack,
            acked_ms,
            ack_tries,
        )

    @property
    def hold_end_ms(self) -> int:
        if self.ack in ACKED and self.acked_ms is not None:
            return min(self.acked_ms, self.invisible_until_ms)
        return self.invisible_until_ms


def now_ms() -> int:
    """This host's clock as the gateway reads it (tidemq_store/pop/receive.py), in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def append(path: Path, deliveries: Iterable[Delivery]) -> None:
    """Add `deliveries` to the consumer's file, whole lines flushed at once (the test reads the file meanwhile)."""
    lines = "".join(json.dumps(asdict(delivery)) + "\n" for delivery in deliveries)
    with path.open("a") as out:
        out.write(lines)


def read(paths: Iterable[Path]) -> list[Delivery]:
    """Every whole line of the consumers' files (a line being written has no newline yet)."""
    found = []
    for path in paths:
        if path.exists():
            text = path.read_text()
            found += [Delivery(**json.loads(line)) for line in text[: text.rfind("\n") + 1].splitlines()]
    return found


def by_message(deliveries: Iterable[Delivery]) -> dict[str, list[Delivery]]:
    """Each message's held deliveries in the order the server made them (by attempt). A delivery that reached its
    consumer only after its invisible time had ended (the gateway drops those it sees expired, but an answer can
    still be slow on its way on a loaded host) was never held: it is left out, as its ack, which a later delivery's
    may already have made `already_acked`; unless its ack was answered `acked`: then no other delivery had been
    made meanwhile (one would have spent its handle), and this one settled the message."""
    grouped: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        if delivery.received_ms < delivery.invisible_until_ms or delivery.ack == "acked":
            grouped.setdefault(delivery.msg_id, []).append(delivery)
    return {msg_id: sorted(group, key=lambda d: (d.attempt, d.received_ms)) for msg_id, group in grouped.items()}


def its_ack(delivery: Delivery) -> bool:
    """Whether the delivery's own ack settled the message: `acked`, or `already_acked` to an ack sent again after
    its first answer was lost (an ack first answered `already_acked` came after another delivery's ack: the hold had
    ended and the message was delivered and acked again meanwhile)."""
    return delivery.ack == "acked" or (delivery.ack == "already_acked" and delivery.ack_tries > 1)


def acked_bodies(deliveries: Iterable[Delivery]) -> set[str]:
    return {delivery.body for delivery in deliveries if delivery.ack in ACKED}


def exclusivity_faults(deliveries: list[Delivery]) -> Iterator[str]:
    """What breaks exclusive delivery in one message's deliveries (in received order): every one names the same
    message; holds overlap; attempts that do not increase; a delivery after one whose ack was answered; a message
    acked by more than one delivery."""
    first = deliveries[0]
    for earlier, later in itertools.pairwise(deliveries):
        where = f"{first.msg_id} ({first.body}): delivery {earlier} then {later}"
        if (later.queue, later.offset, later.body) != (first.queue, first.offset, first.body):
            yield f"{where}: not the same message"
        if earlier.hold_end_ms > later.received_ms:
            yield f"{where}: held by two deliveries at once"
        if later.attempt <= earlier.attempt:
            yield f"{where}: the attempt does not increase"
        if its_ack(earlier):
            yield f"{where}: delivered again after its ack was answered"
    if sum(map(its_ack, deliveries)) != 1 and any(map(its_ack, deliveries)):
        yield f"{first.msg_id} ({first.body}): acked by more than one delivery: {deliveries}"
