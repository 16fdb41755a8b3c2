"""Retry policies and dead letters in process, over each backend (the embedded store, reopened; the serverless store
on a moto server over HTTP, a fresh store object): delivery attempts, pop and push, go on counting across a restart;
a group's backoff sets when a failed push batch or a nacked message comes again, and its max_delivery_attempts when
it goes to `%DLQ%<group>`; dead letters are listed and resent to their origin topic, received there with attempt 1,
and a letter resent once is never resent again, by a second request, after a restart, or by a racing one. Time is
passed in (`now`) or the backoff is zero, never slept."""

from __future__ import annotations

import threading

import pytest

from functions.logic import dead_letters, subscriptions
from functions.logic import pop as pop_logic
from functions.logic.groups import retry_policy
from functions.logic.pop import consumption
from functions.logic.push import dead_letter, deliver
from functions.logic.push_retries import PushRetries
from functions.logic.targets import TargetFailed
from shared.settings import Settings
from tidemq_protocol.api.dead_letters import ResendRequest
from tidemq_protocol.api.push import PushDelivery
from tidemq_protocol.errors import AccessDenied, InvalidArgument, NotADeadLetter, TopicNotFound
from tidemq_protocol.message import Message
from tidemq_protocol.retry import CustomizedBackoff, ExponentialBackoff, RetryPolicy
from tidemq_store import GroupConfig, TopicConfig
from tidemq_store.model import PushSubscription
from tidemq_store.pop.receive import PopConsumption

T0 = 1_000_000
SETTINGS = Settings()


class Notices:
    def __init__(self) -> None:
        self.stored: list[str] = []

    def messages_stored(self, topic: str) -> None:
        self.stored.append(topic)

    def subscription_changed(self, group: str, topic: str | None) -> None:
        pass


def restarted(store, reopen):
    store.close()
    return reopen()


def with_group(store, name: str, retry: RetryPolicy | None = None, push: PushSubscription | None = None):
    return store.create_group(GroupConfig(name=name, retry=retry, push=push))


# ---- push ---------------------------------------------------------------------------------------


def failing(calls: list[int]):
    def target(delivery: PushDelivery) -> None:
        calls.append(delivery.attempt)
        raise TargetFailed("the target is down")

    return target


def push_pass(store, calls: list[int]):
    config = store.get_group("billing")
    policy = retry_policy(config, SETTINGS.retry_policy)
    return deliver(store, "billing", config.push, policy, failing(calls), Notices())


def test_a_push_batch_goes_on_counting_its_attempts_across_restarts_and_is_dead_lettered_after_the_last(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=1))
    retry = RetryPolicy(max_delivery_attempts=3, backoff=CustomizedBackoff(delays_ms=(0,)))
    with_group(store, "billing", retry, PushSubscription(topic="orders", target="python:x:y"))
    store.put("orders", [Message(b"poison")])
    calls: list[int] = []
    push_pass(store, calls)  # each pass calls a failed batch once, then waits its backoff (here none)
    store = restarted(store, reopen)
    push_pass(store, calls)
    store = restarted(store, reopen)
    report = push_pass(store, calls)
    assert calls == [1, 2, 3] and report.dead_lettered == 1
    (letter,) = store.get("%DLQ%billing", 0, 0).messages
    assert (letter.body, letter.properties["RECONSUME_TIME"]) == (b"poison", "3")
    assert store.committed_offsets("billing", "orders") == {0: 1}
    assert store.pop_ledger.read("billing", "orders", 0).entries == ()  # its retry record is gone with it


def test_a_failed_push_batch_waits_the_group_s_backoff_for_its_attempt_restart_or_not(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=1))
    retry = RetryPolicy(max_delivery_attempts=5, backoff=CustomizedBackoff(delays_ms=(0, 3_600_000)))
    with_group(store, "billing", retry, PushSubscription(topic="orders", target="python:x:y"))
    store.put("orders", [Message(b"m")])
    calls: list[int] = []
    push_pass(store, calls)
    report = push_pass(store, calls)  # the first wait is 0: called again at once; the second is an hour
    pending = PushRetries(store.pop_ledger, "billing", "orders").pending(0)
    assert calls == [1, 2] and pending is not None and pending.attempts == 2
    assert report.retry_due_ms == pending.due_ms
    store = restarted(store, reopen)
    report = push_pass(store, calls)
    assert calls == [1, 2] and report.retry_due_ms == pending.due_ms  # still waiting, for the same time


def test_a_stale_push_retry_record_is_cleared_and_the_new_head_batch_counts_from_1(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=1))
    retry = RetryPolicy(max_delivery_attempts=5, backoff=ExponentialBackoff(initial_ms=0))
    with_group(store, "billing", retry, PushSubscription(topic="orders", target="python:x:y"))
    store.put("orders", [Message(b"a"), Message(b"b")])
    calls: list[int] = []
    push_pass(store, calls)
    push_pass(store, calls)
    store.commit_offsets("billing", "orders", {0: 1})  # a reset skips the failing head batch
    push_pass(store, calls)
    assert calls == [1, 2, 1]


# ---- pop ----------------------------------------------------------------------------------------


def test_a_popped_message_s_attempt_count_survives_a_restart(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="t", queues=2))
    store.put("t", [Message(b"a", queue=0), Message(b"b", queue=1)])
    assert len(PopConsumption(store, store.pop_ledger).receive("g", "t", 32, 10_000, now=T0)) == 2
    store = restarted(store, reopen)
    again = PopConsumption(store, store.pop_ledger).receive("g", "t", 32, 10_000, now=T0 + 10_000)
    assert sorted((p.message.body, p.attempt) for p in again) == [(b"a", 2), (b"b", 2)]
    store = restarted(store, reopen)
    third = PopConsumption(store, store.pop_ledger).receive("g", "t", 32, 10_000, now=T0 + 20_000)
    assert {p.attempt for p in third} == {3}


def test_a_nack_waits_the_group_s_backoff_for_its_attempt_and_the_last_attempt_goes_to_the_dead_letters(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"poison", tag="T")])
    retry = RetryPolicy(max_delivery_attempts=3, backoff=CustomizedBackoff(delays_ms=(1_000, 5_000)))
    config = with_group(store, "g", retry)

    def receive(now: int):
        return consumption(store, SETTINGS, config).receive("g", "t", 32, 10_000, now=now)

    (first,) = receive(T0)
    consumption(store, SETTINGS, config).release("g", "t", first.receipt_handle, None, now=T0)  # a nack
    assert receive(T0 + 999) == []
    (second,) = receive(T0 + 1_000)
    store = restarted(store, reopen)
    consumption(store, SETTINGS, config).release("g", "t", second.receipt_handle, None, now=T0 + 2_000)
    assert receive(T0 + 6_999) == []
    (third,) = receive(T0 + 7_000)
    assert (first.attempt, second.attempt, third.attempt) == (1, 2, 3)
    consumption(store, SETTINGS, config).release("g", "t", third.receipt_handle, 0, now=T0 + 7_000)  # its own delay
    assert receive(T0 + 7_000) == []  # its third delivery was its last: now a dead letter
    (letter,) = store.get("%DLQ%g", 0, 0).messages
    assert (letter.body, letter.properties["RECONSUME_TIME"]) == (b"poison", "3")


def test_the_server_s_defaults_fill_in_what_a_group_s_policy_leaves_out(reopen):
    store = reopen()
    settings = Settings(max_delivery_attempts=7, retry_backoff="exponential:1s,3,1m")
    partial = retry_policy(with_group(store, "a", RetryPolicy(max_delivery_attempts=2)), settings.retry_policy)
    assert (partial.attempts, [partial.delay_ms(n) for n in (1, 2, 3, 4, 5)]) == (2, [1000, 3000, 9000, 27000, 60000])
    default = retry_policy(with_group(store, "b"), settings.retry_policy)
    assert default.attempts == 7


# ---- dead letters -------------------------------------------------------------------------------


def lettered(store, count: int) -> list:
    """`count` messages of `orders`, popped by `billing` and acked, and dead-lettered as if past their last attempt."""
    store.create_topic(TopicConfig(name="orders", queues=2))
    store.put(
        "orders",
        [Message(b"m%d" % i, queue=i % 2, keys=(f"k{i}",), tag="T", properties={"p": str(i)}) for i in range(count)],
    )
    with_group(store, "billing")
    pop = PopConsumption(store, store.pop_ledger)
    popped = []
    while batch := pop.receive("billing", "orders", 32, 10_000, now=T0):
        popped += batch
    pop.ack("billing", "orders", [p.receipt_handle for p in popped])
    originals = sorted((p.message for p in popped), key=lambda m: m.body)
    dead_letter(store, "billing", originals, 16, "not acked after 16 deliveries")
    return store.get("%DLQ%billing", 0, 0, count).messages


def resend(store, notices=None, allowed=lambda topic: None, **request):
    letters, next_offset = dead_letters.chosen(store, "billing", ResendRequest(**request))
    return dead_letters.resend(store, "billing", letters, next_offset, notices or Notices(), allowed)


def test_a_resent_dead_letter_is_received_on_its_origin_topic_with_attempt_1_and_never_resent_twice(reopen):
    store = reopen()
    letters = lettered(store, 3)
    listed = dead_letters.list_dead_letters(store, "billing", 0, 10)
    assert [m.body for m in listed.messages] == ["m0", "m1", "m2"] and {m.resent_at_ms for m in listed.messages} == {
        None
    }
    notices = Notices()
    answer = resend(store, notices, message_ids=[letters[1].msg_id])
    (result,) = answer.results
    assert (result.status, result.topic, result.offset, answer.next_offset) == ("resent", "orders", 1, None)
    assert notices.stored == ["orders"]  # push groups of the topic are woken

    (back,) = PopConsumption(store, store.pop_ledger).receive("billing", "orders", 32, 10_000, now=T0)
    assert (back.message.msg_id, back.attempt, back.message.body) == (result.resent_msg_id, 1, b"m1")
    assert (back.message.keys, back.message.tag, back.message.queue) == (("k1",), "T", 1)
    assert back.message.properties == {
        "p": "1",
        "ORIGIN_MESSAGE_ID": letters[1].properties["ORIGIN_MESSAGE_ID"],
        "DLQ_MESSAGE_ID": letters[1].msg_id,
        "RESENT_FOR_GROUP": "billing",
    }

    store = restarted(store, reopen)
    again = resend(store, message_ids=[letters[1].msg_id, letters[2].msg_id])
    assert [(r.offset, r.status) for r in again.results] == [(1, "already_resent"), (2, "resent")]
    assert again.results[0].resent_at_ms == result.resent_at_ms and again.results[0].resent_msg_id is None
    assert [q.max_offset for q in store.queue_offsets("orders")] == [3, 2]  # m0 m2 | m1, and one resend of each
    listed = dead_letters.list_dead_letters(store, "billing", 0, 10)
    assert [m.resent_at_ms is not None for m in listed.messages] == [False, True, True]


def test_a_resent_dead_letter_is_for_its_group_only_other_pop_and_push_groups_pass_over_it(reopen):
    store = reopen()
    letters = lettered(store, 2)
    with_group(store, "audit")  # a pop group that has not yet read the topic
    pushed: list[bytes] = []
    with_group(store, "mailer", push=PushSubscription(topic="orders", target="python:x:y"))
    config = store.get_group("mailer")

    def target(delivery: PushDelivery) -> None:
        pushed.extend(m.body.encode() for m in delivery.messages)

    def push_pass():
        deliver(store, "mailer", config.push, retry_policy(config, SETTINGS.retry_policy), target, Notices())

    (result,) = resend(store, message_ids=[letters[0].msg_id]).results
    push_pass()
    audit = PopConsumption(store, store.pop_ledger)
    popped = [p.message.body for p in audit.receive("audit", "orders", 32, 10_000, now=T0)]
    assert sorted(popped) == sorted(pushed) == [b"m0", b"m1"]  # the originals, not the resent copy
    assert [q.max_offset for q in store.queue_offsets("orders")] == [2, 1]  # which is stored, at orders:0@1
    assert store.committed_offsets("mailer", "orders") == {0: 2, 1: 1}  # push went past it
    (back,) = PopConsumption(store, store.pop_ledger).receive("billing", "orders", 32, 10_000, now=T0)
    assert back.message.msg_id == result.resent_msg_id


def test_a_range_resend_goes_a_bounded_request_at_a_time_and_again_resends_nothing(reopen):
    store = reopen()
    lettered(store, 100)
    first = resend(store, from_offset=0)
    assert len(first.results) == 64 and first.next_offset == 64
    rest = resend(store, from_offset=first.next_offset, to_offset=1000)
    assert len(rest.results) == 36 and rest.next_offset is None
    assert {r.status for r in first.results + rest.results} == {"resent"}
    assert sum(q.max_offset for q in store.queue_offsets("orders")) == 200
    partial = resend(store, from_offset=10, to_offset=20)
    assert [r.offset for r in partial.results] == list(range(10, 20)) and partial.next_offset is None
    assert {r.status for r in partial.results} == {"already_resent"}
    assert resend(store, from_offset=100).results == []  # past the end: nothing to do
    assert resend(store, from_offset=20, to_offset=10).results == []  # an empty range
    assert sum(q.max_offset for q in store.queue_offsets("orders")) == 200


def test_racing_resends_of_one_range_resend_each_dead_letter_once(reopen):
    store = reopen()
    lettered(store, 40)
    start, answers = threading.Barrier(4), []

    def racer() -> None:
        start.wait()
        answers.append(resend(store, from_offset=0))

    threads = [threading.Thread(target=racer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    resent = [r.offset for answer in answers for r in answer.results if r.status == "resent"]
    assert sorted(resent) == list(range(40)) and len(answers) == 4
    assert sum(q.max_offset for q in store.queue_offsets("orders")) == 80


def test_a_resend_that_cannot_be_made_is_refused_whole_and_records_nothing(reopen):
    store = reopen()
    letters = lettered(store, 3)
    ids = [letters[0].msg_id]
    with pytest.raises(NotADeadLetter, match="no dead letter of group 'billing'"):
        resend(store, message_ids=[*ids, "f" * 24])
    original = store.get("orders", 0, 0).messages[0].msg_id
    with pytest.raises(NotADeadLetter, match="not a dead letter of 'billing'"):
        resend(store, message_ids=[*ids, original])

    def denied(topic: str) -> None:
        raise AccessDenied(f"may not Pub on Topic:{topic}")

    with pytest.raises(AccessDenied):
        resend(store, allowed=denied, message_ids=ids)
    store.put("%DLQ%billing", [Message(b"not a letter")])  # put there by hand: no origin
    with pytest.raises(InvalidArgument, match="RETRY_TOPIC"):
        resend(store, from_offset=0)
    store.delete_topic("orders")
    with pytest.raises(TopicNotFound):
        resend(store, message_ids=ids)
    assert dead_letters.Resends(store.pop_ledger, "billing").read() == {}
    with_group(store, "unlettered")
    assert dead_letters.chosen(store, "unlettered", ResendRequest(from_offset=0)) == ([], None)


def test_a_group_may_not_pop_the_topic_it_pushes_nor_its_own_dead_letters(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=1))
    store.create_topic(TopicConfig(name="%DLQ%billing", queues=1))
    with_group(store, "billing", push=PushSubscription(topic="orders", target="python:x:y"))
    for topic in ("orders", "%DLQ%billing"):
        with pytest.raises(InvalidArgument, match="cannot pop"):
            pop_logic.receive(store, SETTINGS, "billing", topic, 1, None, 0, None)


def test_a_cleared_subscription_forgets_its_pending_retries_so_popping_the_topic_later_starts_clean(reopen):
    store = reopen()
    store.create_topic(TopicConfig(name="orders", queues=2))
    retry = RetryPolicy(max_delivery_attempts=5, backoff=CustomizedBackoff(delays_ms=(0,)))
    with_group(store, "billing", retry, PushSubscription(topic="orders", target="python:x:y"))
    store.put("orders", [Message(b"a", queue=0), Message(b"b", queue=1)])
    push_pass(store, [])
    assert [len(store.pop_ledger.read("billing", "orders", q).entries) for q in (0, 1)] == [1, 1]
    subscriptions.clear_push(store, "billing", Notices())
    assert [store.pop_ledger.read("billing", "orders", q).entries for q in (0, 1)] == [(), ()]
    popped = pop_logic.receive(store, SETTINGS, "billing", "orders", 32, None, 0, None)
    assert sorted((p.message.body, p.attempt) for p in popped) == [(b"a", 1), (b"b", 1)]
