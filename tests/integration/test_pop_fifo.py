"""FIFO message groups in process, over each backend (the embedded store and RocksDB; the serverless store and
DynamoDB, on a moto server over HTTP or LocalStack): a FIFO topic takes only messages with a message group, each in
its group's queue; a FIFO group's receives deliver a message group's messages in order, one batch at a time,
while the other groups of the same queue go on; a released or timed-out head comes back first; a dead-lettered
head lets its group go on; waiting entries are in the ledger after the store is opened again. Time is passed in
(`now`), never slept."""

from __future__ import annotations

import pytest

from functions.logic.push import dead_letter
from tidemq_protocol.codec import encode_records
from tidemq_protocol.errors import MessageTypeMismatch
from tidemq_protocol.message import Message, MessageType, key_queue
from tidemq_protocol.record import ANY_QUEUE, MESSAGE_GROUP
from tidemq_store import TopicConfig
from tidemq_store.pop.receive import PopConsumption

T0 = 1_000_000
HOLD = 10_000


@pytest.fixture
def store(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="f", queues=2, message_type=MessageType.FIFO))
    return store


def grouped(body: str, group: str, queues: int = 2) -> Message:
    return Message(body.encode(), key_queue(group, queues), properties={MESSAGE_GROUP: group})


def same_queue_groups(count: int, queues: int = 2) -> list[str]:
    """`count` message groups that all go to one queue of `queues`."""
    return [name for name in (f"g{i}" for i in range(1000)) if key_queue(name, queues) == 0][:count]


def fifo(store, **options) -> PopConsumption:
    return PopConsumption(store, store.pop_ledger, **options)


def bodies(popped) -> list[str]:
    return [p.message.body.decode() for p in popped]


def receive(pop: PopConsumption, most: int = 32, now: int = T0) -> list:
    return pop.receive("c", "f", most, HOLD, now=now, fifo=True)


def test_a_fifo_topic_takes_only_messages_with_a_message_group_each_in_its_groups_queue(store):
    store.create_topic(TopicConfig(name="n", queues=2))
    bad = [
        ("f", [grouped("a", "A"), Message(b"none")], "has no message_group; topic 'f' is FIFO"),
        ("f", [Message(b"x", 1 - key_queue("A", 2), properties={MESSAGE_GROUP: "A"})], "goes to queue"),
        ("n", [Message(b"ok"), grouped("a", "A")], "topic 'n' is NORMAL"),
    ]
    for topic, messages, words in bad:
        with pytest.raises(MessageTypeMismatch, match=words):
            store.put(topic, messages)
    for topic, message, words in [
        ("f", Message(b"none", ANY_QUEUE), "is FIFO"),
        ("n", Message(b"x", ANY_QUEUE, properties={MESSAGE_GROUP: "A"}), "is NORMAL"),
    ]:
        with pytest.raises(MessageTypeMismatch, match=words):
            store.put_records(topic, encode_records(topic, [message]))
    assert [q.max_offset for q in store.queue_offsets("f")] == [0, 0]  # nothing of a refused batch was stored
    assert [q.max_offset for q in store.queue_offsets("n")] == [0, 0]
    records = encode_records("f", [Message(b"%d" % i, ANY_QUEUE, properties={MESSAGE_GROUP: "A"}) for i in range(3)])
    results = store.put_records("f", records, default_queue=1 - key_queue("A", 2))
    assert {r.queue for r in results} == {key_queue("A", 2)}  # the group's queue, whatever the batch's default
    assert [m.body for m in store.get("f", key_queue("A", 2), 0).messages] == [b"0", b"1", b"2"]


def test_a_message_groups_messages_come_in_order_one_batch_at_a_time(store):
    store.put("f", [grouped(f"{group}{i}", group) for i in range(3) for group in ("A", "B", "C", "D")])
    pop = fifo(store)
    first = receive(pop, most=1)
    assert [p.message.properties[MESSAGE_GROUP] for p in first] and bodies(first)[0].endswith("0")
    rest = receive(pop)
    held_group = first[0].message.properties[MESSAGE_GROUP]
    assert held_group not in {p.message.properties[MESSAGE_GROUP] for p in rest}  # its next waits for the ack
    for group in {"A", "B", "C", "D"} - {held_group}:
        assert [b for b in bodies(rest) if b[0] == group] == [f"{group}0", f"{group}1", f"{group}2"]
    assert receive(pop) == []  # every group has a batch in flight
    pop.ack("c", "f", [first[0].receipt_handle])
    assert bodies(receive(pop)) == [f"{held_group}1", f"{held_group}2"]  # waited, and now in order


def test_a_held_message_group_does_not_stall_the_other_groups_of_its_queue(store):
    a, b, c = same_queue_groups(3)
    store.put("f", [grouped(f"{group}-{i}", group) for i in range(5) for group in (a, b, c)])
    pop = fifo(store)
    (head,) = receive(pop, most=1)
    assert bodies([head]) == [f"{a}-0"]
    others = []
    while batch := receive(pop, most=3):
        others += batch
        pop.ack("c", "f", [p.receipt_handle for p in batch])
    assert sorted(bodies(others)) == sorted(f"{g}-{i}" for i in range(5) for g in (b, c))  # all, while a's head held
    waiting = [e for e in store.pop_ledger.read("c", "f", 0).entries if e.waiting]
    assert [(e.group, e.nonce) for e in waiting] == [(a, 0)] * 4  # a's messages the cursor passed
    pop.release("c", "f", head.receipt_handle, now=T0)
    (again,) = receive(pop)  # delivered again: alone
    assert bodies([again]) == [f"{a}-0"] and again.attempt == 2
    pop.ack("c", "f", [again.receipt_handle])
    rest = receive(pop)
    assert bodies(rest) == [f"{a}-{i}" for i in range(1, 5)] and {p.attempt for p in rest} == {1}


def test_a_head_whose_invisible_time_ends_comes_back_alone_before_the_rest_of_its_group(store):
    a, b = same_queue_groups(2)
    store.put("f", [grouped(f"{a}-{i}", a) for i in range(3)] + [grouped(f"{b}-0", b)])
    pop = fifo(store)
    assert bodies(receive(pop, most=1)) == [f"{a}-0"]
    (other,) = receive(pop)
    assert bodies([other]) == [f"{b}-0"]
    pop.ack("c", "f", [other.receipt_handle])
    assert receive(pop, now=T0 + HOLD - 1) == []
    (again,) = receive(pop, now=T0 + HOLD)  # alone: the messages behind it wait for its ack
    assert bodies([again]) == [f"{a}-0"] and again.attempt == 2
    pop.release("c", "f", again.receipt_handle, now=T0 + HOLD)
    (third,) = receive(pop, now=T0 + HOLD)
    assert bodies([third]) == [f"{a}-0"] and third.attempt == 3
    pop.ack("c", "f", [third.receipt_handle])
    assert bodies(receive(pop, now=T0 + HOLD)) == [f"{a}-1", f"{a}-2"]


def test_a_dead_lettered_head_lets_its_group_go_on(store):
    store.put("f", [grouped(f"A{i}", "A") for i in range(3)])
    pop = fifo(
        store,
        max_attempts=2,
        dead_letters=lambda group, messages, attempts: dead_letter(store, group, messages, attempts, "poison"),
    )
    assert bodies(receive(pop, most=1)) == ["A0"]
    assert bodies(receive(pop, most=1, now=T0 + HOLD)) == ["A0"]
    last = receive(pop, most=2, now=T0 + 2 * HOLD)
    assert bodies(last) == ["A1", "A2"] and [p.attempt for p in last] == [1, 1]
    (letter,) = store.get("%DLQ%c", 0, 0).messages
    assert letter.body == b"A0" and letter.properties["ORIGIN_MESSAGE_GROUP"] == "A"
    assert MESSAGE_GROUP not in letter.properties  # the dead-letter topic is not FIFO


def test_waiting_entries_are_there_after_the_store_is_opened_again(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="f", queues=2, message_type=MessageType.FIFO))
    a, b = same_queue_groups(2)
    store.put("f", [grouped(f"{group}-{i}", group) for i in range(3) for group in (a, b)])
    (head,) = receive(fifo(store), most=1)
    assert len(receive(fifo(store))) == 3  # b's, passing a's
    store.close()
    store = reopen()
    ledger = store.pop_ledger.read("c", "f", 0)
    assert [(e.group, e.attempt) for e in ledger.entries if e.waiting] == [(a, 0), (a, 0)]
    pop = fifo(store)
    pop.ack("c", "f", [head.receipt_handle])
    assert bodies(receive(pop)) == [f"{a}-1", f"{a}-2"]


def test_a_group_that_is_not_fifo_receives_a_fifo_topic_without_order(store):
    store.put("f", [grouped(f"A{i}", "A") for i in range(3)])
    pop = fifo(store)
    assert len(pop.receive("plain", "f", 1, HOLD, now=T0)) == 1
    assert len(pop.receive("plain", "f", 32, HOLD, now=T0)) == 2  # no group is held for it
