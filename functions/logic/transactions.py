"""Transactional messages for every protocol: sending a half message, ending it, the check-back policy (the server's
TIDEMQ_TRANSACTION_* settings), a producer group's long poll for its checks, and the operator's view of outcomes.
The state and its protocol are the engine's (tidemq_store/transactions/api.py).

Check-back, as RocketMQ's TransactionalMessageCheckService does it, without calling the producer: a half message
neither committed nor rolled back `transaction_timeout_ms` after it was stored (its `prepared_ms`) is due; a due
transaction that has had `transaction_check_max` checks is rolled back ("check limit"), any other gets its next check
opened, due again `transaction_check_interval_ms` later. `run_checks` does that for what is due; it runs
- in a producer's long poll (`take_checks`), for its own group's transactions, which it then takes at once: a group
  that polls is checked on time, whatever the schedule;
- in the sweep (`sweep`: the maintenance function's job "transactions", every minute in AWS; a thread of the local
  servers, every min(timeout, interval)), for every transaction: so the checks of a group nobody polls are counted,
  and their transactions rolled back at the limit.
Both act through the engine's conditional writes, so any number of them may run at once.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass

from shared.settings import Settings
from tidemq_protocol.api.messages import MessageIn, MessageView
from tidemq_protocol.api.transactions import TransactionCheck, TransactionList, TransactionView
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    InvalidArgument,
    MessageNotFound,
    QueueOutOfRange,
    TransactionConflict,
    TransactionNotFound,
)
from tidemq_protocol.message import Message, StoredMessage, key_queue
from tidemq_store import MessageStore
from tidemq_store.model import check_page_limit
from tidemq_store.transactions.api import Transaction, TransactionState

from .notifier import PushNotifier
from .produce import json_properties, send_named

SWEEP_PAGE = 100
"""Due transactions one step of the sweep reads; it goes on until none is due."""
POLL_FIRST_S, POLL_MOST_S = 0.01, 0.2
"""A waiting producer looks again after 10 ms, then twice as long each time, up to 200 ms."""
CHECK_LIMIT = "check limit"

_round_robin = itertools.count()


def view(transaction: Transaction) -> TransactionView:
    return TransactionView(
        msg_id=transaction.msg_id,
        topic=transaction.topic,
        queue=transaction.queue,
        producer_group=transaction.producer_group,
        state=transaction.state.value,
        prepared_ms=transaction.prepared_ms,
        checks=transaction.checks,
        check_at_ms=None if transaction.ended else transaction.check_at_ms,
        answer=transaction.answer,
        ended_ms=transaction.ended_ms,
        ended_by=transaction.ended_by,
        offset=transaction.offset,
    )


def send_half(
    store: MessageStore,
    settings: Settings,
    topic: str,
    producer_group: str,
    message: MessageIn,
    send_key: str | None = None,
) -> Transaction:
    """Store a half message of `topic` (routed to a queue as a produce routes it), its first check due after the
    timeout; once for `send_key` (the producer's name for the send, tidemq_store/sends.py)."""
    queues = store.get_topic(topic).queues
    if message.queue is not None and message.queue >= queues:
        raise QueueOutOfRange(topic, message.queue, queues)
    if message.queue is not None:
        queue = message.queue
    elif message.sharding_key:
        queue = key_queue(message.sharding_key, queues)
    else:
        queue = next_queue(queues)
    half = Message(message.body_bytes(), queue, tuple(message.keys), message.tag, json_properties(0, message))
    return prepare(store, settings, topic, producer_group, half, send_key)


def next_queue(queues: int) -> int:
    """The queue of a half message that names none, round-robin."""
    return next(_round_robin) % queues


def prepare(
    store: MessageStore,
    settings: Settings,
    topic: str,
    producer_group: str,
    half: Message,
    send_key: str | None = None,
) -> Transaction:
    """Store `half` (routed to its queue) as a half message of `topic`, its first check due the timeout after the
    store stamps it (`prepared_ms`); once for `send_key`: sent again, it is answered its transaction as it is now."""
    timeout = settings.transaction_timeout_ms
    return store.transactions.prepare(topic, half, producer_group, timeout, send_named(send_key))


def end(
    store: MessageStore, notifier: PushNotifier, topic: str, msg_id: str, resolution: str, check: int | None
) -> Transaction:
    """Commit, roll back, or (unknown) record that the producer does not know yet; `check`: the check-back this
    answers. A commit tells `notifier` the topic has a new message."""
    by = "producer" if check is None else f"check {check}"
    log = store.transactions
    if resolution == "unknown":
        return log.note(topic, msg_id, f"unknown ({by})")
    ended = log.end(topic, msg_id, resolution == "commit", by)
    if ended.committed:
        notifier.messages_stored(topic)
    return ended


@dataclass
class CheckRun:
    """What one pass of `run_checks` did: checks opened (those taken at once among them) and transactions rolled
    back at the check limit."""

    opened: list[Transaction]
    rolled_back: int = 0


def run_checks(
    store: MessageStore,
    settings: Settings,
    limit: int,
    topic: str | None = None,
    producer_group: str | None = None,
    claim: bool = False,
) -> CheckRun:
    """One pass over up to `limit` due transactions (of `topic` and `producer_group` if given; see the module
    docstring); `claim`: the caller takes the checks it opens."""
    log, now = store.transactions, now_ms()
    run = CheckRun([])
    for transaction in log.due(now, limit, topic, producer_group):
        if transaction.checks >= settings.transaction_check_max:
            try:
                log.end(transaction.topic, transaction.msg_id, False, CHECK_LIMIT, transaction.checks)
                run.rolled_back += 1
            except (TransactionConflict, TransactionNotFound):
                pass  # ended meanwhile, or another check opened: as read, it is no longer due
            continue
        opened = log.open_check(transaction, now + settings.transaction_check_interval_ms, claim)
        if opened is not None:
            run.opened.append(opened)
    return run


def take_checks(
    store: MessageStore, settings: Settings, topic: str, producer_group: str, max_checks: int, wait_ms: int
) -> list[TransactionCheck]:
    """Up to `max_checks` check-backs of the group's transactions of `topic`, each taken by this caller alone (opened
    now if due, or opened by the sweep), waiting up to `wait_ms` for one."""
    if wait_ms > settings.max_get_wait_ms:
        raise InvalidArgument(f"wait_ms must be 0..{settings.max_get_wait_ms}, got {wait_ms}")
    store.get_topic(topic)  # TopicNotFound: a 404, not a wait
    deadline, pause = time.monotonic() + wait_ms / 1000, POLL_FIRST_S
    while True:
        checks = [
            TransactionCheck(check=taken.claimed, transaction=view(taken), message=MessageView.of(message))
            for taken, message in claim_checks(store, settings, topic, producer_group, max_checks)
        ]
        left = deadline - time.monotonic()
        if checks or left <= 0:
            return checks
        time.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MOST_S)


def claim_checks(
    store: MessageStore, settings: Settings, topic: str, producer_group: str, max_checks: int
) -> list[tuple[Transaction, StoredMessage]]:
    """Up to `max_checks` check-backs of the group's transactions of `topic` (opened now if due, or opened by the
    sweep), each taken by this caller alone, with its half message; none waited for."""
    log = store.transactions
    taken = run_checks(store, settings, max_checks, topic, producer_group, claim=True).opened
    if len(taken) < max_checks:
        taken += log.claim(topic, producer_group, max_checks - len(taken))
    checks = []
    for transaction in taken:
        with contextlib.suppress(MessageNotFound):  # its transaction ended meanwhile
            checks.append((transaction, log.half_message(transaction)))
    return checks


@dataclass
class Sweep:
    """What one sweep did (the maintenance job's report)."""

    checks_opened: int = 0
    rolled_back: int = 0
    outcomes_pruned: int = 0


def sweep(store: MessageStore, settings: Settings) -> Sweep:
    """Open every due check, roll back every transaction past the check limit, prune old outcomes."""
    done = Sweep()
    while True:
        run = run_checks(store, settings, SWEEP_PAGE)
        done.checks_opened += len(run.opened)
        done.rolled_back += run.rolled_back
        if not run.opened and not run.rolled_back:
            break
    done.outcomes_pruned = store.transactions.prune(now_ms())
    return done


def list_transactions(
    store: MessageStore, topic: str, state: str | None, after: str | None, limit: int
) -> TransactionList:
    store.get_topic(topic)
    page = store.transactions.list(
        topic, None if state is None else TransactionState(state), after, check_page_limit(limit)
    )
    return TransactionList(transactions=[view(t) for t in page], next_after=page.next_after)


def get_transaction(store: MessageStore, topic: str, msg_id: str) -> TransactionView:
    store.get_topic(topic)
    return view(store.transactions.get(topic, msg_id))
