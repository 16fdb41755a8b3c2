"""Message trace, recorded by the broker (functions/logic/trace.py), on both backends: every step of a message's
life through the logic layer every protocol uses, in order, from `%TRACE%`; a topic that opts out records nothing."""

from __future__ import annotations

import uuid

import pytest

from functions.logic import dead_letters, produce, trace
from functions.logic import pop as pop_logic
from functions.logic import trace_records as attr
from shared.settings import Settings
from tidemq_protocol.api.dead_letters import ResendRequest
from tidemq_protocol.api.messages import MessageIn
from tidemq_protocol.api.trace import TraceEventKind
from tidemq_protocol.attributes import TopicPolicy
from tidemq_protocol.errors import InvalidArgument, MessageNotFound
from tidemq_protocol.retry import RetryPolicy
from tidemq_store import GroupConfig, TopicConfig

SETTINGS = Settings()
E = TraceEventKind


class Notices:
    def messages_stored(self, topic: str) -> None:
        pass

    def subscription_changed(self, group: str, topic: str | None) -> None:
        pass


def produced(store, topic: str, body: str) -> str:
    with trace.acting_as("alice", "192.0.2.7"):
        (sent,) = produce.produce_json(store, topic, [MessageIn(body=body)], Notices()).messages
    return sent.msg_id


def received(store, topic: str):
    return pop_logic.receive(store, SETTINGS, "g", topic, 32, None, 0, None)


def test_a_message_popped_nacked_retried_dead_lettered_and_resent_shows_it_all_in_order(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=2))
    store.create_group(GroupConfig(name="g", retry=RetryPolicy(max_delivery_attempts=2)))
    msg_id = produced(store, "orders", "poison")

    (first,) = received(store, "orders")
    pop_logic.release(store, SETTINGS, "g", "orders", first.receipt_handle, 0)  # a nack, visible again at once
    (second,) = received(store, "orders")
    pop_logic.release(store, SETTINGS, "g", "orders", second.receipt_handle, 0)
    assert received(store, "orders") == []  # its second delivery was its last: now a dead letter
    letters, _ = dead_letters.chosen(store, "g", ResendRequest(from_offset=0))
    (result,) = dead_letters.resend(store, "g", letters, None, Notices(), lambda topic: None).results

    shown = trace.message_trace(store, msg_id)
    assert [event.event for event in shown.events] == [
        E.STORED,
        E.DELIVERED,
        E.NACKED,
        E.RETRIED,
        E.NACKED,
        E.DEAD_LETTERED,
        E.RESENT,
    ]
    stored, delivered, _, retried, _, lettered, resent = (event.attributes for event in shown.events)
    assert stored[attr.MESSAGE_ID] == msg_id and stored[attr.DESTINATION] == "orders"
    assert (stored[attr.USER], stored[attr.ADDRESS], stored[attr.OPERATION]) == ("alice", "192.0.2.7", "send")
    assert (stored[attr.PARTITION], stored[attr.OFFSET]) == (str(first.message.queue), 0)
    assert (delivered[attr.GROUP], delivered[attr.ATTEMPT], delivered[attr.METHOD]) == ("g", 1, "pop")
    assert (retried[attr.ATTEMPT], retried[attr.OPERATION]) == (2, "receive")
    assert lettered[attr.DEAD_LETTER_ID] == letters[0].msg_id and lettered[attr.ATTEMPT] == 2
    assert resent[attr.RESENT_ID] == result.resent_msg_id
    times = [event.time_unix_nano for event in shown.events]
    assert times == sorted(times) and shown.note is None

    # the resent message has a trace of its own, which starts where it was stored
    (back,) = received(store, "orders")
    pop_logic.ack(store, SETTINGS, "g", "orders", [back.receipt_handle])
    again = trace.message_trace(store, result.resent_msg_id)
    assert [event.event for event in again.events] == [E.STORED, E.DELIVERED, E.ACKED]

    # and the records are in the store: a reopened store (this process's buffer gone with it) shows the same
    store.close()
    store = reopen()
    assert [event.event for event in trace.message_trace(store, msg_id).events] == [e.event for e in shown.events]


def test_a_topic_that_opts_out_records_nothing_and_its_trace_says_why(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="quiet", queues=1, attributes={"trace.enabled": "false"}))
    store.create_group(GroupConfig(name="g"))
    msg_id = produced(store, "quiet", "hush")
    (delivery,) = received(store, "quiet")
    pop_logic.ack(store, SETTINGS, "g", "quiet", [delivery.receipt_handle])

    shown = trace.message_trace(store, msg_id)
    assert shown.events == [] and "opts out" in (shown.note or "")
    assert not any(key.startswith("quiet@") for m in _trace_messages(store) for key in m.keys)


def _trace_messages(store):
    try:
        return store.get(trace.TRACE_TOPIC, 0, 0, 1000).messages
    except Exception:
        return []


def test_a_stored_event_lost_with_a_flush_is_shown_from_the_message_itself(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=1))
    msg_id = produced(store, "orders", "x")
    trace.recorder(store)._waiting.clear()  # as if the process died before its flush
    (event,) = trace.message_trace(store, msg_id).events
    assert (event.event, event.attributes[attr.MESSAGE_ID]) == (E.STORED, msg_id)


def test_an_unknown_message_has_no_trace_and_a_bad_attribute_value_is_refused(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=1))
    real = produced(store, "orders", "x")
    store.close()
    store = reopen()
    store.delete_topic("orders")
    with pytest.raises(MessageNotFound):
        trace.message_trace(store, real[:-4] + "0000")
    with pytest.raises(InvalidArgument):
        TopicPolicy.of({TopicPolicy.TRACE: "maybe"})


HOUR = 3_600_000


def test_a_message_its_retention_passed_shows_expired_after_what_was_recorded(reopen):
    """The `expired` event is derived when the trace is read (retention records nothing a message): the message is
    no longer found by id, but the store still knows where it was, and its trace records outlive it."""
    store = reopen()
    store.create_topic(TopicConfig(name="brief", queues=1, retention_ms=HOUR))
    store.create_group(GroupConfig(name="g"))
    msg_id = produced(store, "brief", "short-lived")
    (delivery,) = received(store, "brief")
    pop_logic.ack(store, SETTINGS, "g", "brief", [delivery.receipt_handle])
    trace.recorder(store).flush()

    store.clean_expired(now_ms=delivery.message.store_timestamp + HOUR + 1)
    with pytest.raises(MessageNotFound):
        store.message_by_id(msg_id)
    shown = trace.message_trace(store, msg_id)
    assert [event.event for event in shown.events] == [E.STORED, E.DELIVERED, E.ACKED, E.EXPIRED]
    expired = shown.events[-1].attributes
    assert (expired[attr.MESSAGE_ID], expired[attr.OFFSET], expired[attr.DERIVED]) == (msg_id, 0, 1)
    assert shown.msg_id == msg_id and shown.topic == "brief"


@pytest.fixture(params=["embedded", pytest.param("serverless", marks=pytest.mark.local_aws)])
def tiered(request, open_test_store, aws_env, tmp_path):
    """A store of each backend with an S3 cold tier (uploads when asked: `upload_now`), whose uploaded messages stay
    hot a while, so that they are found by id (lookups by id search the hot tier only: issue 30 item 2)."""
    tier = {"tier": "s3", "tier_bucket": f"tier-{uuid.uuid4().hex[:12]}"}
    if request.param == "embedded":
        return open_test_store(**tier)
    prefix = f"t{uuid.uuid4().hex[:8]}"
    efs = {"efs_path": tmp_path / "efs", "efs_hot_ms": HOUR}
    return open_test_store(backend="serverless", dynamodb_prefix=prefix, **efs, **tier)


def test_a_message_moved_to_the_cold_tier_shows_it_after_what_was_recorded(tiered):
    store = tiered
    store.create_topic(TopicConfig(name="orders", queues=1))
    store.create_group(GroupConfig(name="g"))
    msg_id = produced(store, "orders", "archived")
    (delivery,) = received(store, "orders")
    pop_logic.ack(store, SETTINGS, "g", "orders", [delivery.receipt_handle])
    assert [event.event for event in trace.message_trace(store, msg_id).events] == [E.STORED, E.DELIVERED, E.ACKED]

    assert store.upload_now("orders") >= 1
    shown = trace.message_trace(store, msg_id)
    assert [event.event for event in shown.events] == [E.STORED, E.DELIVERED, E.ACKED, E.TIERED]
    tiered_event = shown.events[-1].attributes
    assert (tiered_event[attr.TIER_MEDIUM], tiered_event[attr.DERIVED]) == (store.tier_medium, 1)
