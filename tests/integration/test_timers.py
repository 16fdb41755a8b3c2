"""Delay and timer messages on both backends (tidemq_store/timer): a DELAY topic's message sent for later is on no
queue until it is due, then on its queue once, under the id it was sent with; a recall before then means it is
never delivered; bad input is refused and changes nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    InvalidArgument,
    InvalidBatch,
    MessageNotFound,
    MessageTypeMismatch,
    TimerDelivered,
    TimerNotFound,
)
from tidemq_protocol.record import MESSAGE_ID, TIMER_DELIVER_MS, encode_properties, encode_record, timer_due_ms
from tidemq_protocol.timer import delivery_properties, recall_handle
from tidemq_store import GroupConfig, Message, MessageType, StoredMessage, TopicConfig
from tidemq_store.pop.receive import PopConsumption

from ..clock_steps import clock_ahead

DEADLINE_S = 60.0
"""How long a test waits for a timer to be delivered: a condition awaited, never a speed (the machine is shared)."""


def delayed(body: bytes, *, delay_ms: int | None = None, at_ms: int | None = None, queue: int = 0) -> Message:
    return Message(body, queue, properties=delivery_properties(at_ms, delay_ms))


def received(store, topic: str, want: int, deadline_s: float = DEADLINE_S) -> list[StoredMessage]:
    """Read every queue of `topic` from 0 until `want` messages are there (a read is what moves a serverless
    backend's due timers), or the deadline passes."""
    end = time.monotonic() + deadline_s
    while True:
        found = [m for q in store.queue_offsets(topic) for m in store.get(topic, q.queue, 0, 1000).messages]
        if len(found) >= want or time.monotonic() > end:
            return found
        time.sleep(0.05)


def past(due_ms: int) -> None:
    """Return once the clock is past `due_ms`."""
    while now_ms() <= due_ms:
        time.sleep(0.01)


@pytest.fixture
def backend(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="later", queues=2, message_type=MessageType.DELAY))
    store.create_topic(TopicConfig(name="plain", queues=1))
    store.create_group(GroupConfig(name="workers"))
    return store


def test_a_delay_message_is_on_no_queue_until_due_then_delivered_once_under_its_id(backend):
    due = now_ms() + 1500
    (sent,) = backend.put("later", [delayed(b"wake up", at_ms=due, queue=1)])
    assert (sent.queue, sent.queue_offset) == (1, -1) and sent.recall_handle
    assert [q.max_offset for q in backend.queue_offsets("later")] == [0, 0]
    pending = backend.message_by_id(sent.msg_id)
    assert (pending.msg_id, pending.body, pending.queue_offset) == (sent.msg_id, b"wake up", -1)

    (message,) = received(backend, "later", 1)
    assert (message.msg_id, message.body, message.queue, message.queue_offset) == (sent.msg_id, b"wake up", 1, 0)
    assert message.store_timestamp >= due  # never early
    assert message.properties[TIMER_DELIVER_MS] == str(due) and MESSAGE_ID not in message.properties  # its id
    assert backend.message_by_id(sent.msg_id).queue_offset == 0
    backend.timers.move_due()  # nothing left to move: it stays one message
    assert len(received(backend, "later", 2, deadline_s=0)) == 1


def test_a_delay_from_now_and_a_time_already_past(backend):
    past, later = backend.put("later", [delayed(b"past", at_ms=now_ms() - 60_000)]), now_ms()
    assert past[0].queue_offset == 0 and past[0].recall_handle is None  # a time past: on its queue at once
    (sent,) = backend.put("later", [delayed(b"soon", delay_ms=300)])
    messages = received(backend, "later", 2)
    assert [m.body for m in messages] == [b"past", b"soon"]
    assert messages[1].msg_id == sent.msg_id and int(messages[1].properties[TIMER_DELIVER_MS]) >= later + 300


def test_a_recalled_timer_is_never_delivered_and_a_recall_sent_again_says_so(backend):
    kept, recalled = backend.put("later", [delayed(b"kept", delay_ms=500), delayed(b"recalled", delay_ms=500)])
    first = backend.recall("later", recalled.recall_handle)
    assert (first.msg_id, first.again) == (recalled.msg_id, False)
    assert backend.recall("later", recalled.recall_handle).again is True
    assert [m.msg_id for m in received(backend, "later", 1)] == [kept.msg_id]
    past(timer_due_ms(recalled.msg_id))  # a move now would have found it, had it not been recalled
    backend.timers.move_due()
    assert [m.body for m in received(backend, "later", 2, deadline_s=0)] == [b"kept"]
    with pytest.raises(MessageNotFound):
        backend.message_by_id(recalled.msg_id)


def test_a_recall_too_late_is_refused_and_changes_nothing(backend):
    (sent,) = backend.put("later", [delayed(b"gone out", delay_ms=100)])
    assert len(received(backend, "later", 1)) == 1
    with pytest.raises(TimerDelivered, match="too late"):
        backend.recall("later", sent.recall_handle)
    assert [m.msg_id for m in received(backend, "later", 1)] == [sent.msg_id]


def test_a_forged_or_foreign_recall_handle_names_no_timer_and_changes_nothing(backend):
    backend.create_topic(TopicConfig(name="other", queues=1, message_type=MessageType.DELAY))
    (sent,) = backend.put("later", [delayed(b"still due", delay_ms=800)])
    changed = sent.msg_id[:-1] + ("0" if sent.msg_id[-1] != "0" else "1")
    forged = [
        recall_handle("later", changed),  # another id: no such timer
        recall_handle("other", sent.msg_id),  # another topic's handle
        "not-a-handle",
        sent.recall_handle[:-2],
    ]
    for handle in forged:
        with pytest.raises(TimerNotFound):
            backend.recall("later", handle)
    with pytest.raises(TimerNotFound):  # the right handle on the wrong topic
        backend.recall("other", sent.recall_handle)
    assert [m.msg_id for m in received(backend, "later", 1)] == [sent.msg_id]


def test_delay_bounds_are_refused_naming_the_field_and_nothing_is_stored(backend):
    too_far = now_ms() + 4 * 24 * 3_600_000  # the default limit is 3 days
    cases = [
        ([delayed(b"x", at_ms=too_far)], "delivery_time_ms"),
        ([delayed(b"x", delay_ms=3 * 24 * 3_600_000 + 1)], "delay_ms"),
        ([Message(b"x", properties={TIMER_DELIVER_MS: "soon"})], "delivery_time_ms"),
        ([Message(b"x", properties={**delivery_properties(delay=1), TIMER_DELIVER_MS: "1"})], "not both"),
        ([delayed(b"ok", delay_ms=1000), delayed(b"x", delay_ms=10**12)], "message 1"),
    ]
    for messages, named in cases:
        with pytest.raises(InvalidArgument, match=named):
            backend.put("later", messages)
    with pytest.raises(InvalidBatch, match="at most 99"):
        backend.put("later", [delayed(b"x", delay_ms=60_000) for _ in range(100)])
    with pytest.raises(InvalidArgument, match=MESSAGE_ID):
        backend.put("later", [Message(b"x", properties={**delivery_properties(delay=0), MESSAGE_ID: "f" * 24})])
    assert received(backend, "later", 1, deadline_s=0) == []


def test_each_topic_type_takes_only_its_own_messages(backend):
    with pytest.raises(MessageTypeMismatch, match="'plain' is NORMAL"):
        backend.put("plain", [Message(b"x"), delayed(b"x", delay_ms=10)])
    with pytest.raises(MessageTypeMismatch, match="'later' is DELAY"):
        backend.put("later", [delayed(b"x", delay_ms=10), Message(b"x")])
    records = encode_record(b"plain", 0, now_ms(), encode_properties((), None, delivery_properties(delay=5)), b"r")
    with pytest.raises(MessageTypeMismatch, match="NORMAL"):
        backend.put_records("plain", records)
    assert [q.max_offset for q in backend.queue_offsets("plain")] == [0]


def test_records_a_producer_encoded_become_timers_too(backend):
    properties = encode_properties(("k1",), "T", delivery_properties(delay=200))
    (sent,) = backend.put_records("later", encode_record(b"later", 0xFFFFFFFF, now_ms(), properties, b"rec"), 1)
    assert (sent.queue, sent.queue_offset) == (1, -1)
    (message,) = received(backend, "later", 1)
    assert (message.msg_id, message.queue, message.keys, message.tag) == (sent.msg_id, 1, ("k1",), "T")


def test_pending_timers_survive_a_reopen_and_are_delivered_after_it(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="later", queues=1, message_type=MessageType.DELAY))
    sent = store.put("later", [delayed(f"m{n}".encode(), delay_ms=500 + n) for n in range(5)])
    store.close()
    store = reopen()
    assert sorted(m.msg_id for m in received(store, "later", 5)) == sorted(r.msg_id for r in sent)


MOVER = Path(__file__).with_name("timer_crash_mover.py")


@pytest.mark.parametrize("step", ["intent", "appended"])
def test_a_move_cut_by_a_crash_at_either_step_delivers_each_timer_exactly_once(open_test_store, tmp_path, step):
    """The embedded mover killed between its intent and its append, or between its append and the timers'
    deletion: after the restart each timer is on its queue once (and none was early)."""
    store = open_test_store(home=tmp_path / "store", timer_max_delay_ms=3_600_000)
    store.create_topic(TopicConfig(name="later", queues=2, message_type=MessageType.DELAY))
    sent = store.put("later", [delayed(f"m{n}".encode(), delay_ms=1_000, queue=n % 2) for n in range(20)])
    store.close()
    past(max(timer_due_ms(r.msg_id) for r in sent))  # due: the child's mover moves them as it opens the store
    child = subprocess.run(
        [sys.executable, str(MOVER), str(tmp_path / "store"), step], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    store = open_test_store(home=tmp_path / "store")
    messages = received(store, "later", 20)
    assert sorted(m.msg_id for m in messages) == sorted(r.msg_id for r in sent)  # each once
    assert all(m.store_timestamp >= int(m.properties[TIMER_DELIVER_MS]) for m in messages)
    store.timers.move_due()
    assert len(received(store, "later", 21, deadline_s=0)) == 20


def test_the_longest_delay_is_the_servers_setting_up_to_40_days(open_test_store, store_config):
    with pytest.raises(ValidationError, match="timer_max_delay_ms"):
        store_config(timer_max_delay_ms=40 * 24 * 3_600_000 + 1)
    store = open_test_store(timer_max_delay_ms=2_000)
    store.create_topic(TopicConfig(name="later", queues=1, message_type=MessageType.DELAY))
    with pytest.raises(InvalidArgument, match="2000 ms"):
        store.put("later", [delayed(b"too late", delay_ms=2_001)])
    assert store.put("later", [delayed(b"in time", delay_ms=2_000)])[0].queue_offset == -1


def test_a_pop_consumer_receives_a_delay_message_once_it_is_due_under_its_id(backend):
    pop = PopConsumption(backend, backend.pop_ledger)
    (sent,) = backend.put("later", [delayed(b"popped", delay_ms=1_000)])
    end, received = time.monotonic() + DEADLINE_S, []
    while not received and time.monotonic() < end:  # a receive is what moves a serverless backend's due timers
        received = pop.receive("workers", "later", 8, 30_000)
        time.sleep(0.05)
    (popped,) = received
    assert (popped.message.msg_id, popped.message.body, popped.attempt) == (sent.msg_id, b"popped", 1)
    assert popped.message.store_timestamp >= int(popped.message.properties[TIMER_DELIVER_MS])


def test_a_delay_message_of_a_topic_made_just_after_the_clock_stepped_back_is_delivered(reopen):
    """As a transaction's (test_transactions.py): a timer is stamped no earlier than its topic was made, so it is not
    dropped as a deleted namesake's."""
    store = reopen()
    store.create_topic(TopicConfig(name="plain", queues=1))
    with clock_ahead(60_000):
        store.put("plain", [Message(b"stamped a minute ahead", 0)])
    store.create_topic(TopicConfig(name="later", queues=1, message_type=MessageType.DELAY))
    (sent,) = store.put("later", [delayed(b"soon", delay_ms=300)])
    assert [(m.msg_id, m.body) for m in received(store, "later", 1)] == [(sent.msg_id, b"soon")]
