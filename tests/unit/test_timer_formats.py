"""What client and broker share of delay and timer messages (tidemq_protocol.timer, record/ids.py): the delivery-time
properties and their bounds, timer ids, recall handles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidemq_protocol.errors import InvalidArgument, MessageNotFound, TimerNotFound
from tidemq_protocol.record import (
    TIMER_DELAY_MS,
    TIMER_DELIVER_MS,
    is_timer_id,
    message_id,
    new_timer_id,
    parse_message_id,
    timer_due_ms,
)
from tidemq_protocol.timer import delivery_properties, due_ms, parse_recall_handle, recall_handle

NOW, MOST = 1_800_000_000_000, 3 * 24 * 3_600_000


def test_a_delivery_time_or_a_delay_becomes_the_property_that_says_it():
    at = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
    assert delivery_properties(delivery_time=at) == {TIMER_DELIVER_MS: str(int(at.timestamp() * 1000))}
    assert delivery_properties(delivery_time=NOW) == {TIMER_DELIVER_MS: str(NOW)}
    assert delivery_properties(delay=timedelta(seconds=1.5)) == {TIMER_DELAY_MS: "1500"}
    assert delivery_properties(delay=0) == {TIMER_DELAY_MS: "0"}
    assert delivery_properties() == {}
    for wrong in ({"delivery_time": NOW, "delay": 1}, {"delay": -1}, {"delay": 1.5}, {"delivery_time": True}):
        with pytest.raises(InvalidArgument):
            delivery_properties(**wrong)


def test_the_due_time_is_the_delivery_time_or_now_plus_the_delay_within_the_bound():
    assert due_ms({TIMER_DELIVER_MS: str(NOW + MOST)}, NOW, MOST) == NOW + MOST
    assert due_ms({TIMER_DELIVER_MS: "0"}, NOW, MOST) == 0  # a time past: due at once
    assert due_ms({TIMER_DELAY_MS: str(MOST)}, NOW, MOST) == NOW + MOST
    cases = [
        ({TIMER_DELIVER_MS: str(NOW + MOST + 1)}, "delivery_time_ms"),
        ({TIMER_DELAY_MS: str(MOST + 1)}, "delay_ms"),
        ({TIMER_DELIVER_MS: "-5"}, "delivery_time_ms"),
        ({TIMER_DELAY_MS: "1e3"}, "delay_ms"),
        ({TIMER_DELAY_MS: "1" * 16}, "delay_ms"),
        ({TIMER_DELIVER_MS: "1", TIMER_DELAY_MS: "1"}, "not both"),
        ({}, "neither"),
    ]
    for properties, named in cases:
        with pytest.raises(InvalidArgument, match=f"message 7.*{named}"):
            due_ms(properties, NOW, MOST, 7)


def test_a_timer_id_holds_its_due_time_sorts_by_it_and_is_no_records_id():
    ids = [new_timer_id(NOW + n) for n in (5, 0, 9, 1)]
    assert [timer_due_ms(i) for i in ids] == [NOW + 5, NOW, NOW + 9, NOW + 1]
    assert sorted(ids) == [ids[1], ids[3], ids[0], ids[2]]  # by due time, as the stores keep them
    assert all(is_timer_id(i) and len(i) == 24 for i in ids)
    assert len({new_timer_id(NOW) for _ in range(1000)}) == 1000
    record = message_id(123_456, 1024)
    assert not is_timer_id(record) and not is_timer_id("not an id")
    assert parse_message_id(ids[0])[1] >= 2**31  # read as a record's id: a size no record has
    with pytest.raises(MessageNotFound):
        timer_due_ms(record)


def test_a_recall_handle_names_its_topic_and_timer_and_anything_else_names_none():
    msg_id = new_timer_id(NOW)
    handle = recall_handle("orders", msg_id)
    assert parse_recall_handle(handle, "orders") == msg_id
    for forged, topic in [
        (handle, "other"),  # another topic's
        (recall_handle("orders", message_id(1, 100)), "orders"),  # a record's id, not a timer's
        (handle[:-4], "orders"),
        ("", "orders"),
        ("!!!!", "orders"),
        (recall_handle("orders", msg_id).replace("djE", "djI"), "orders"),  # another version
    ]:
        with pytest.raises(TimerNotFound):
            parse_recall_handle(forged, topic)
