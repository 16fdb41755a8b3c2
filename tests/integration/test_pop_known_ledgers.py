"""Pop over the serverless store, whose ledger reads are answered from what the process knows
(tidemq_store/pop/known.py), on a moto server over HTTP: a receive and its ack of a known queue cost the two
transactions alone, and two processes (two stores, each knowing its own) never hold one message at once nor lose
one, whatever each knew."""

from __future__ import annotations

import uuid

import pytest

from tidemq_protocol.message import Message
from tidemq_store import TopicConfig
from tidemq_store.pop.api import Settled
from tidemq_store.pop.receive import PopConsumption

pytestmark = pytest.mark.local_aws
T0 = 1_000_000


@pytest.fixture
def stores(open_test_store, tmp_path, aws_env):
    """Two serverless stores over the same tables and files, as two processes (or Lambda environments) open them."""
    shared = {"backend": "serverless", "efs_path": tmp_path / "efs", "dynamodb_prefix": f"kl{uuid.uuid4().hex[:8]}"}
    first = open_test_store(**shared)
    first.create_topic(TopicConfig(name="t", queues=1))
    first.put("t", [Message(b"%d" % i) for i in range(100)])
    return first, open_test_store(**shared)


def test_a_receive_and_its_ack_of_a_known_queue_cost_two_transactions(stores):
    store, _ = stores
    pop = PopConsumption(store, store.pop_ledger)
    pop.ack("g", "t", [p.receipt_handle for p in pop.receive("g", "t", 32, 30_000, now=T0)])  # the queue now known
    before = store.requests
    popped = pop.receive("g", "t", 32, 30_000, now=T0)
    assert pop.ack("g", "t", [p.receipt_handle for p in popped]) == [Settled.DONE] * 32
    assert store.requests - before == 2


def test_two_processes_that_each_know_the_queue_never_hold_a_message_twice_nor_lose_one(stores):
    one, other = (PopConsumption(store, store.pop_ledger) for store in stores)
    held: dict[bytes, str] = {}
    for turn in range(8):  # each receive of one follows a claim of the other that it did not see
        pop = (one, other)[turn % 2]
        for p in pop.receive("g", "t", 10, 30_000, now=T0):
            assert p.message.body not in held
            held[p.message.body] = p.receipt_handle
    assert len(held) == 80
    assert one.ack("g", "t", list(held.values())[::2]) == [Settled.DONE] * 40  # the other's deliveries too
    late = T0 + 60_000  # every held message's invisible time ended: the other's ack is unknown to `other`
    again = [p for pop in (other, one, other) for p in pop.receive("g", "t", 32, 30_000, now=late)]
    redelivered = {p.message.body for p in again if p.attempt == 2}
    assert redelivered == set(list(held)[1::2]) and len(again) == len({p.message.body for p in again})
    assert {p.message.body for p in again if p.attempt == 1} == {b"%d" % i for i in range(80, 100)}
