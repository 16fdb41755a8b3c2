"""Transactional messages through gateway crashes, on both backends (serverless: DynamoDB on the session's moto server,
which outlives the gateways): a real gateway process is killed with SIGKILL between half messages and their ends, and
while it is ending transactions, then started again on the same store.

What is checked: every half message whose send was answered is still there, prepared, after the kill, and can then
be committed or rolled back; every end that was answered holds after the kill (committed stays committed and
visible, rolled back stays invisible, the opposite end is a 409); ends cut off by the kill, sent again, end their
transactions; and a reader sees each committed message exactly once, with its half message's id, and no other.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Iterator

import pytest

from tests.e2e.test_pop_sigkill import RestartedGateway
from tests.gateways import signing_with
from tidemq import Admin, Consumer, TransactionProducer
from tidemq.client import HttpClient
from tidemq_protocol.errors import TransactionConflict

TOPIC, GROUP = "payments", "checkout"
QUIET = {"TIDEMQ_TRANSACTION_TIMEOUT_MS": "3600000"}  # no check-back comes between the kills: the test ends them all


@pytest.fixture(params=["embedded", "serverless"])
def gateway(request, tmp_path) -> Iterator[RestartedGateway]:
    settings = {"TIDEMQ_BACKEND": request.param, **QUIET}
    if request.param == "serverless":
        settings |= {**request.getfixturevalue("local_aws").env, "TIDEMQ_DYNAMODB_PREFIX": f"txk{uuid.uuid4().hex[:8]}"}
    gateway = RestartedGateway(tmp_path / "data", **settings)
    try:
        gateway.start()
        with signing_with(gateway.home / "credentials"):
            yield gateway
    finally:
        gateway.stop()


def producer(gateway: RestartedGateway, retries: int = 3) -> TransactionProducer:
    return TransactionProducer(TOPIC, GROUP, client=HttpClient(gateway.url, timeout_s=60, retries=retries))


def read_all(gateway: RestartedGateway) -> list[str]:
    """The ids of every message a reader sees, from each queue's start."""
    seen: list[str] = []
    with Consumer(TOPIC, url=gateway.url) as consumer:
        while batch := consumer.poll(max_messages=1000):
            seen += [m.msg_id for m in batch]
    return seen


def states(gateway: RestartedGateway) -> dict[str, str]:
    with HttpClient(gateway.url) as client:
        listed = client.request("GET", f"/v1/topics/{TOPIC}/transactions", params={"limit": 1000}).json()
    return {t["msg_id"]: t["state"] for t in listed["transactions"]}


@pytest.mark.slow
def test_half_messages_and_ends_survive_a_sigkill_and_ends_cut_off_by_one_end_them_once(gateway):
    with Admin(gateway.url) as admin:
        admin.create_topic(TOPIC, queues=2, message_type="TRANSACTION")
    sender = producer(gateway)
    halves = [sender.send(f"payment {n}".encode()).msg_id for n in range(30)]
    committed, rolled_back, pending, racing = halves[:4], halves[4:8], halves[8:10], halves[10:]
    for msg_id in committed:
        sender.commit(msg_id)
    for msg_id in rolled_back:
        sender.rollback(msg_id)
    sender.close()

    # a kill between half messages and their ends, and one in the middle of ends: each end is answered, or cut off
    answered: list[str] = []
    ender = producer(gateway, retries=0)

    def end_racing() -> None:
        for msg_id in racing:
            try:
                ender.commit(msg_id)
            except Exception:  # the gateway is gone: this end, and the rest, were cut off
                return
            answered.append(msg_id)

    racer = threading.Thread(target=end_racing)
    racer.start()
    rng = random.Random(28)
    while not answered and racer.is_alive():  # once ends are going through, kill at a random moment among them
        racer.join(0.01)
    racer.join(rng.uniform(0.0, 0.3))
    gateway.kill()
    racer.join()
    ender.close()
    gateway.start()

    found = states(gateway)
    assert [found[msg_id] for msg_id in committed + answered] == ["committed"] * (len(committed) + len(answered))
    assert [found[msg_id] for msg_id in rolled_back] == ["rolled_back"] * len(rolled_back)
    assert [found[msg_id] for msg_id in pending] == ["prepared"] * len(pending)
    with producer(gateway) as again:
        for msg_id in racing:  # sent again: ends that were cut off end their transactions, answered ones change nothing
            assert again.commit(msg_id).state == "committed"
        assert again.commit(committed[0]).state == "committed"
        with pytest.raises(TransactionConflict):
            again.commit(rolled_back[0])
        with pytest.raises(TransactionConflict):
            again.rollback(committed[1])
        again.commit(pending[0])
        again.rollback(pending[1])

    visible = read_all(gateway)
    assert sorted(visible) == sorted([*committed, *racing, pending[0]])  # each once, none rolled back
    gateway.kill()  # and once more: what is committed stays visible, once
    gateway.start()
    assert sorted(read_all(gateway)) == sorted(visible)
