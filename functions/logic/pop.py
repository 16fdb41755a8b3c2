"""Pop consumption for every protocol: the server's bounds (TIDEMQ_POP_*), the group's existence, long polling, and
what each ack became. The consumption itself, and its protocol, are the engine's (tidemq_store/pop/)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from functions.logic import trace
from functions.logic.groups import check_may_pop, retry_policy
from functions.logic.push import dead_letter
from functions.logic.trace_records import INVISIBLE_UNTIL
from shared.settings import Settings
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.filter import MessageFilter
from tidemq_protocol.message import StoredMessage
from tidemq_store import GroupConfig, MessageStore
from tidemq_store.pop.api import Settled
from tidemq_store.pop.receive import PopConsumption, Popped, now_ms

POLL_FIRST_S, POLL_MOST_S = 0.01, 0.2
"""A waiting receive looks again after 10 ms, then twice as long each time, up to 200 ms."""

TURNS = itertools.count()
"""Numbers this process's receives, so that each starts at the next queue (PopConsumption's `turns`)."""


def consumption(store: MessageStore, settings: Settings, group: GroupConfig) -> PopConsumption:
    """Pop consumption of `store` for one request of `group`, as its retry policy says: a message delivered
    max_delivery_attempts times goes to its dead-letter topic; a nack waits its backoff."""
    policy = retry_policy(group, settings.retry_policy)

    def dead_letters(group: str, messages: list[StoredMessage], attempts: int) -> None:
        dead_letter(store, group, messages, attempts, f"not acked after {attempts} deliveries")

    return PopConsumption(store, store.pop_ledger, policy.attempts, dead_letters, TURNS, policy.delay_ms)


def invisible_time(settings: Settings, invisible_ms: int | None, shortest_ms: int | None = None) -> int:
    """`invisible_ms` checked against the server's bounds (None: the server's default; `shortest_ms`: a lower
    bound of the caller's instead of TIDEMQ_POP_MIN_INVISIBLE_MS)."""
    if invisible_ms is None:
        return settings.pop_invisible_ms
    low = settings.pop_min_invisible_ms if shortest_ms is None else shortest_ms
    high = settings.pop_max_invisible_ms
    if not low <= invisible_ms <= high:
        raise InvalidArgument(f"invisible_ms must be {low}..{high}, got {invisible_ms}")
    return invisible_ms


def receive(
    store: MessageStore,
    settings: Settings,
    group: str,
    topic: str,
    max_messages: int,
    invisible_ms: int | None,
    wait_ms: int,
    message_filter: MessageFilter | None,
) -> list[Popped]:
    """Up to `max_messages` messages of `topic` for pop group `group`, waiting up to `wait_ms` for one: in order
    per message group if the group is FIFO and the topic too."""
    return ack_and_receive(store, settings, group, topic, (), max_messages, invisible_ms, wait_ms, message_filter)[1]


@dataclass(frozen=True, slots=True)
class Receiving:
    """One receive, checked and ready: `look` takes what there is now. A waiting receive looks again after each of
    `pauses(wait_ms)` (here with time.sleep; the gRPC proxy awaits them, so that a long poll holds no thread)."""

    pop: PopConsumption
    group: str
    topic: str
    max_messages: int
    invisible_ms: int
    message_filter: MessageFilter | None
    fifo: bool

    def look(self) -> list[Popped]:
        popped = self.pop.receive(
            self.group, self.topic, self.max_messages, self.invisible_ms, self.message_filter, fifo=self.fifo
        )
        # a receive slow enough (a loaded server) that a delivery's invisible time ended before the answer hands
        # out no hold: another consumer may have it by now. It is left to come back, attempt + 1, as if its
        # consumer had died.
        answered = now_ms()
        handed = [delivery for delivery in popped if delivery.invisible_until_ms > answered]
        trace.delivered_by_pop(self.pop.store, self.group, self.topic, handed)
        return handed


def receiving(
    store: MessageStore,
    settings: Settings,
    group: str,
    topic: str,
    max_messages: int,
    invisible_ms: int | None,
    wait_ms: int,
    message_filter: MessageFilter | None,
) -> Receiving:
    """A receive of `topic` for pop group `group`, checked against the server's bounds, the group's existence and
    what it may pop (InvalidArgument, GroupNotFound: nothing changed)."""
    if not 1 <= max_messages <= settings.pop_max_messages:
        raise InvalidArgument(f"max_messages must be 1..{settings.pop_max_messages}, got {max_messages}")
    if wait_ms > settings.max_get_wait_ms:
        raise InvalidArgument(f"wait_ms must be 0..{settings.max_get_wait_ms}, got {wait_ms}")
    invisible_ms = invisible_time(settings, invisible_ms)
    config = store.cached_group(group)  # GroupNotFound: a pop group is made first, as any group
    check_may_pop(config, topic)
    return Receiving(
        consumption(store, settings, config), group, topic, max_messages, invisible_ms, message_filter, config.fifo
    )


def pauses(wait_ms: int) -> Iterator[float]:
    """The pauses of a receive waiting up to `wait_ms` for a message, between its looks: POLL_FIRST_S, then twice as
    long each time up to POLL_MOST_S, the last one cut at the deadline."""
    deadline, pause = time.monotonic() + wait_ms / 1000, POLL_FIRST_S
    while (left := deadline - time.monotonic()) > 0:
        yield min(pause, left)
        pause = min(pause * 2, POLL_MOST_S)


def ack_and_receive(
    store: MessageStore,
    settings: Settings,
    group: str,
    topic: str,
    handles: Sequence[str],
    max_messages: int,
    invisible_ms: int | None,
    wait_ms: int,
    message_filter: MessageFilter | None,
) -> tuple[list[str], list[Popped]]:
    """Ack the deliveries `handles` name (as `ack`), then receive (as `receive`): a consumer acks its last batch as
    it asks for the next, in one request. What each ack became, and what was received. The request is checked
    whole before the acks: a bad value refuses it, changing nothing."""
    asked = receiving(store, settings, group, topic, max_messages, invisible_ms, wait_ms, message_filter)
    acks = _acked(asked.pop, group, topic, handles) if handles else []
    waits = pauses(wait_ms)
    while True:
        popped = asked.look()
        pause = next(waits, None) if not popped else None
        if pause is None:
            return acks, popped
        time.sleep(pause)


ACK_STATUS = {
    Settled.DONE: "acked",
    Settled.ALREADY_ACKED: "already_acked",
    Settled.STALE: "invalid_receipt_handle",
    Settled.DEAD_LETTERED: "dead_lettered",
}


def ack(store: MessageStore, settings: Settings, group: str, topic: str, handles: Sequence[str]) -> list[str]:
    """Ack each delivery a handle names; what each became (ACK_STATUS's words). A malformed handle refuses the
    whole request before anything changes."""
    return _acked(consumption(store, settings, store.cached_group(group)), group, topic, handles)


def _acked(pop: PopConsumption, group: str, topic: str, handles: Sequence[str]) -> list[str]:
    """Ack each delivery a handle names, and record the acks that settled one."""
    settled = pop.ack(group, topic, handles)
    trace.acked(pop.store, group, topic, handles, settled)
    return [ACK_STATUS[s] for s in settled]


class Held(NamedTuple):
    receipt_handle: str
    invisible_until_ms: int


def change_invisible(
    store: MessageStore,
    settings: Settings,
    group: str,
    topic: str,
    handle: str,
    invisible_ms: int,
    shortest_ms: int | None = None,
) -> Held:
    """Hold the delivery `handle` names for `invisible_ms` from now (InvalidReceiptHandle if it names none:
    MessageDeadLettered if its message went to the dead letters), at least `shortest_ms` (default:
    TIDEMQ_POP_MIN_INVISIBLE_MS, as a receive; RocketMQ 5 clients nack by a change, to their backoff's first delays
    of a second or so)."""
    invisible_ms = invisible_time(settings, invisible_ms, shortest_ms)
    pop = consumption(store, settings, store.cached_group(group))
    now = now_ms()
    held = Held(pop.change_invisible(group, topic, handle, invisible_ms, now), now + invisible_ms)
    changed = trace.TraceEventKind.INVISIBLE_CHANGED
    trace.settled(store, group, topic, changed, handle, **{INVISIBLE_UNTIL: held.invisible_until_ms})
    return held


def release(store: MessageStore, settings: Settings, group: str, topic: str, handle: str, delay_ms: int | None) -> None:
    """Give the delivery back: visible again after `delay_ms` (at most the longest invisible time; None: the
    group's backoff for the delivery's attempt, a nack)."""
    if delay_ms is not None and delay_ms > settings.pop_max_invisible_ms:
        raise InvalidArgument(f"delay_ms must be 0..{settings.pop_max_invisible_ms}, got {delay_ms}")
    consumption(store, settings, store.cached_group(group)).release(group, topic, handle, delay_ms)
    trace.settled(store, group, topic, trace.TraceEventKind.NACKED, handle)


FORWARD_HOLD_MS = 60_000
"""How long a delivery being forwarded to the dead letters is held meanwhile (a crash midway: back after it)."""


def forward_to_dead_letters(store: MessageStore, settings: Settings, group: str, topic: str, handle: str) -> None:
    """Put the delivery's message to the group's dead letters now, its consumer having given up on it (a RocketMQ 5
    FIFO push consumer after its own retries), and settle the delivery (InvalidReceiptHandle if the handle names
    no current one)."""
    consumption(store, settings, store.cached_group(group)).dead_letter(group, topic, handle, FORWARD_HOLD_MS)
