"""Pop consumption for every protocol: the server's bounds (TIDEMQ_POP_*), the group's existence, long polling, and
what each ack became. The consumption itself, and its protocol, are the engine's (tidemq_store/pop/)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import NamedTuple

from functions.logic.groups import check_may_pop, retry_policy
from functions.logic.push import dead_letter
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


def invisible_time(settings: Settings, invisible_ms: int | None) -> int:
    """`invisible_ms` checked against the server's bounds (None: the server's default)."""
    if invisible_ms is None:
        return settings.pop_invisible_ms
    low, high = settings.pop_min_invisible_ms, settings.pop_max_invisible_ms
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
    if not 1 <= max_messages <= settings.pop_max_messages:
        raise InvalidArgument(f"max_messages must be 1..{settings.pop_max_messages}, got {max_messages}")
    if wait_ms > settings.max_get_wait_ms:
        raise InvalidArgument(f"wait_ms must be 0..{settings.max_get_wait_ms}, got {wait_ms}")
    invisible_ms = invisible_time(settings, invisible_ms)
    config = store.cached_group(group)  # GroupNotFound: a pop group is made first, as any group
    check_may_pop(config, topic)
    pop = consumption(store, settings, config)
    fifo = config.fifo
    acks = [ACK_STATUS[settled] for settled in pop.ack(group, topic, handles)] if handles else []
    deadline, pause = time.monotonic() + wait_ms / 1000, POLL_FIRST_S
    while True:
        popped = pop.receive(group, topic, max_messages, invisible_ms, message_filter, fifo=fifo)
        # a receive slow enough (a loaded server) that a delivery's invisible time ended before the answer hands
        # out no hold: another consumer may have it by now. It is left to come back, attempt + 1, as if its
        # consumer had died.
        answered = now_ms()
        popped = [delivery for delivery in popped if delivery.invisible_until_ms > answered]
        left = deadline - time.monotonic()
        if popped or left <= 0:
            return acks, popped
        time.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MOST_S)


ACK_STATUS = {Settled.DONE: "acked", Settled.ALREADY_ACKED: "already_acked", Settled.STALE: "invalid_receipt_handle"}


def ack(store: MessageStore, settings: Settings, group: str, topic: str, handles: Sequence[str]) -> list[str]:
    """Ack each delivery a handle names; what each became (ACK_STATUS's words). A malformed handle refuses the
    whole request before anything changes."""
    pop = consumption(store, settings, store.cached_group(group))
    return [ACK_STATUS[settled] for settled in pop.ack(group, topic, handles)]


class Held(NamedTuple):
    receipt_handle: str
    invisible_until_ms: int


def change_invisible(
    store: MessageStore, settings: Settings, group: str, topic: str, handle: str, invisible_ms: int
) -> Held:
    """Hold the delivery `handle` names for `invisible_ms` from now (InvalidReceiptHandle if it names none)."""
    invisible_ms = invisible_time(settings, invisible_ms)
    pop = consumption(store, settings, store.cached_group(group))
    now = now_ms()
    return Held(pop.change_invisible(group, topic, handle, invisible_ms, now), now + invisible_ms)


def release(store: MessageStore, settings: Settings, group: str, topic: str, handle: str, delay_ms: int | None) -> None:
    """Give the delivery back: visible again after `delay_ms` (at most the longest invisible time; None: the
    group's backoff for the delivery's attempt, a nack)."""
    if delay_ms is not None and delay_ms > settings.pop_max_invisible_ms:
        raise InvalidArgument(f"delay_ms must be 0..{settings.pop_max_invisible_ms}, got {delay_ms}")
    consumption(store, settings, store.cached_group(group)).release(group, topic, handle, delay_ms)
