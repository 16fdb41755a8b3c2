"""What a pop group's handles of a message answer once it went to the dead letters without an ack, in process over
each backend and its ledger (the embedded store and RocksDB files; the serverless store and DynamoDB on the moto
server): an ack says `DEAD_LETTERED`, never `ALREADY_ACKED` (issue 42: the consumer believed its work settled while
the message sat in `%DLQ%<group>`), a change of invisible time, a release or a forward raises MessageDeadLettered,
and an acked message never reads as dead-lettered, across a reopening and a crash midway. Time is passed in."""

from __future__ import annotations

import pytest

from functions.logic.push import dead_letter
from tidemq_protocol.errors import InvalidReceiptHandle, MessageDeadLettered
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, MessageStore, TopicConfig
from tidemq_store.pop.api import Settled
from tidemq_store.pop.receive import PopConsumption

T0 = 1_000_000
HOLD_MS = 1_000


class Crash(Exception):
    """A process that died right after it put a dead letter, before its ledger write."""


def consumption(store: MessageStore, max_attempts: int = 1, crash: bool = False) -> PopConsumption:
    """Pop consumption of `store` whose messages go to `%DLQ%g` after `max_attempts` deliveries (`crash`: its
    process dies right after each put there)."""

    def letters(group: str, messages: list, attempts: int) -> None:
        dead_letter(store, group, messages, attempts, "not acked")
        if crash:
            raise Crash

    return PopConsumption(store, store.pop_ledger, max_attempts, letters)


@pytest.fixture
def store(reopen) -> MessageStore:
    """The backend's store with topic `t` (one queue): `lettered`, then `acked`."""
    store = reopen()
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"lettered"), Message(b"acked")])
    return store


def dead_letters(store: MessageStore) -> list[bytes]:
    return [m.body for m in store.get("%DLQ%g", 0, 0).messages]


def test_an_ack_of_a_message_dead_lettered_without_one_answers_dead_lettered_not_already_acked(store):
    """The issue's sequence, max delivery attempts 1: receive, the hold ends, the next receive dead-letters it, then
    the consumer's ack comes."""
    pop = consumption(store)
    lettered, acked = pop.receive("g", "t", 2, HOLD_MS, now=T0)
    assert pop.ack("g", "t", [acked.receipt_handle]) == [Settled.DONE]
    assert pop.receive("g", "t", 2, HOLD_MS, now=T0 + HOLD_MS) == []  # due again, at its last attempt: lettered
    assert dead_letters(store) == [b"lettered"]
    assert pop.ack("g", "t", [lettered.receipt_handle, acked.receipt_handle]) == [
        Settled.DEAD_LETTERED,
        Settled.ALREADY_ACKED,
    ]
    assert pop.ack("g", "t", [lettered.receipt_handle]) == [Settled.DEAD_LETTERED]  # as often as asked
    assert dead_letters(store) == [b"lettered"]  # nothing changed


def test_every_delivery_of_a_dead_lettered_message_answers_dead_lettered_to_ack_change_release_and_forward(store):
    pop = consumption(store, max_attempts=2)
    first, _ = pop.receive("g", "t", 2, HOLD_MS, now=T0)
    second, acked = pop.receive("g", "t", 2, HOLD_MS, now=T0 + HOLD_MS)
    assert (second.message.body, second.attempt) == (b"lettered", 2)
    pop.ack("g", "t", [acked.receipt_handle])
    assert pop.receive("g", "t", 2, HOLD_MS, now=T0 + 2 * HOLD_MS) == []
    handles = [first.receipt_handle, second.receipt_handle]
    assert pop.ack("g", "t", handles) == [Settled.DEAD_LETTERED] * 2
    for refused in (
        lambda handle: pop.change_invisible("g", "t", handle, HOLD_MS, now=T0 + 3 * HOLD_MS),
        lambda handle: pop.release("g", "t", handle, 0, now=T0 + 3 * HOLD_MS),
        lambda handle: pop.release("g", "t", handle, None, now=T0 + 3 * HOLD_MS),  # a nack
        lambda handle: pop.dead_letter("g", "t", handle, HOLD_MS, now=T0 + 3 * HOLD_MS),  # a forward
    ):
        for handle in handles:
            with pytest.raises(MessageDeadLettered, match="dead letters"):
                refused(handle)
    assert issubclass(MessageDeadLettered, InvalidReceiptHandle)  # a caller catching the stale handle still does
    assert dead_letters(store) == [b"lettered"]


def test_a_message_its_consumer_forwarded_to_the_dead_letters_answers_dead_lettered(store):
    pop = consumption(store, max_attempts=16)
    lettered, acked = pop.receive("g", "t", 2, 60_000, now=T0)
    pop.dead_letter("g", "t", lettered.receipt_handle, HOLD_MS, now=T0)  # RocketMQ's ForwardMessageToDeadLetterQueue
    assert pop.ack("g", "t", [lettered.receipt_handle, acked.receipt_handle]) == [Settled.DEAD_LETTERED, Settled.DONE]
    with pytest.raises(MessageDeadLettered):
        pop.dead_letter("g", "t", lettered.receipt_handle, HOLD_MS, now=T0)
    assert dead_letters(store) == [b"lettered"]


def test_an_acked_message_never_answers_dead_lettered_and_another_groups_delivery_is_its_own(store):
    pop = consumption(store)
    lettered, acked = pop.receive("g", "t", 2, HOLD_MS, now=T0)
    other, _ = pop.receive("h", "t", 2, HOLD_MS, now=T0)
    pop.ack("g", "t", [acked.receipt_handle])
    pop.receive("g", "t", 2, HOLD_MS, now=T0 + HOLD_MS)
    assert pop.ack("g", "t", [acked.receipt_handle]) == [Settled.ALREADY_ACKED]
    assert pop.ack("h", "t", [other.receipt_handle]) == [Settled.DONE]  # group h's delivery of the same message
    with pytest.raises(MessageDeadLettered):
        pop.change_invisible("g", "t", lettered.receipt_handle, HOLD_MS, now=T0 + HOLD_MS)
    assert pop.receive("g", "t", 2, HOLD_MS, now=T0 + 2 * HOLD_MS) == []  # nothing of it is delivered again


def test_a_crash_between_the_dead_letter_and_the_ledger_write_never_answers_acked_then_marks_it_when_lettered_again(
    store,
):
    """The process dies after it put the dead letter, before the write that deletes the entry and marks it: the
    entry stays held by the dead-lettering, so the consumer's ack is refused as stale (not acked, not lettered yet);
    when that hold ends the next receive letters it again (at least once) and marks it."""
    (lettered,) = consumption(store).receive("g", "t", 1, HOLD_MS, now=T0)
    with pytest.raises(Crash):
        consumption(store, crash=True).receive("g", "t", 1, HOLD_MS, now=T0 + HOLD_MS)
    pop = consumption(store)
    assert pop.ack("g", "t", [lettered.receipt_handle]) == [Settled.STALE]
    with pytest.raises(InvalidReceiptHandle) as refused:
        pop.change_invisible("g", "t", lettered.receipt_handle, HOLD_MS, now=T0 + HOLD_MS)
    assert not isinstance(refused.value, MessageDeadLettered)
    (acked,) = pop.receive("g", "t", 2, HOLD_MS, now=T0 + HOLD_MS)  # the dead-lettering holds the first
    assert pop.ack("g", "t", [acked.receipt_handle]) == [Settled.DONE]
    assert pop.receive("g", "t", 2, HOLD_MS, now=T0 + 2 * HOLD_MS) == []  # its hold ended: lettered again
    assert pop.ack("g", "t", [lettered.receipt_handle]) == [Settled.DEAD_LETTERED]
    assert dead_letters(store) == [b"lettered", b"lettered"]


def test_the_answer_outlives_a_reopening_and_goes_with_the_group(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="t", queues=1))
    store.create_group(GroupConfig(name="g"))
    store.put("t", [Message(b"lettered")])
    (lettered,) = consumption(store).receive("g", "t", 1, HOLD_MS, now=T0)
    consumption(store).receive("g", "t", 1, HOLD_MS, now=T0 + HOLD_MS)
    store.close()
    store = reopen()
    assert consumption(store).ack("g", "t", [lettered.receipt_handle]) == [Settled.DEAD_LETTERED]
    store.delete_group("g")  # its ledgers, marks and all
    assert consumption(store).ack("g", "t", [lettered.receipt_handle]) == [Settled.STALE]
