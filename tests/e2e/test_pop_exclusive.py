"""Exclusive delivery under concurrency: 8 consumer processes (tests/pop_consumer.py) pop one 8-queue topic over
HTTP through a live gateway, each acking its deliveries but one in ten (by message and attempt), which it lets time
out; on both backends (serverless: the gateway's DynamoDB and S3 on a moto server over HTTP).

What is checked, from the deliveries the consumers recorded (tests/pop_deliveries.py defines a delivery's hold and
why its check needs no clock slack):
- every message produced is acked exactly once (one delivery answered `acked`), and the group holds nothing after;
- per message, in the order its deliveries were received: each hold ends (ack answered, else `invisible_until_ms`)
  no later than the next delivery's receive returned, at the same millisecond at the latest; the attempts are
  1, 2, 3, ... (no receive answer is lost here), and nothing is delivered after an answered ack;
- every delivery let time out, or whose ack came too late (`invalid_receipt_handle`), is delivered again, with an
  attempt > 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateways import gateway_as_admin
from tests.pop_consumer import ConsumerProcesses
from tests.pop_deliveries import by_message, exclusivity_faults
from tidemq.client import HttpClient
from tidemq_protocol.api.messages import ProduceResponse

CONSUMERS = QUEUES = 8
INVISIBLE_MS = 2_000
SETTINGS = {"TIDEMQ_POP_MIN_INVISIBLE_MS": "1000"}  # the default's 10 s would make the run wait for time-outs
POP = "/v1/groups/stress/topics/work"
SMALL_RUN = {"embedded": 2_000, "serverless": 1_000}
"""Messages of make test's run, about 10-40 s each on this loaded machine: the serverless backend on moto is slower."""


@pytest.fixture(
    params=["embedded", pytest.param("serverless", marks=pytest.mark.long)]
)  # serverless (slower on moto): make test-long
def backend(request) -> str:
    return request.param


@pytest.mark.slow
def test_eight_consumers_hold_each_of_a_few_thousand_messages_alone_and_ack_each_once(backend, tmp_path):
    run_exclusive_delivery(backend, tmp_path, messages=SMALL_RUN[backend])


@pytest.mark.long
@pytest.mark.timeout(1800)
def test_eight_consumers_hold_each_of_20000_messages_alone_and_ack_each_once(backend, tmp_path):
    run_exclusive_delivery(backend, tmp_path, messages=20_000)


def run_exclusive_delivery(backend: str, tmp_path: Path, messages: int) -> None:
    with (
        gateway_as_admin(tmp_path / "data", TIDEMQ_BACKEND=backend, **SETTINGS) as url,
        HttpClient(url, timeout_s=120) as client,
    ):
        produced = produce(client, messages)
        options = ("--invisible-ms", str(INVISIBLE_MS), "--time-out-one-in", "10")
        with ConsumerProcesses(url, "work", "stress", tmp_path / "consumers", CONSUMERS, *options) as consumers:

            def all_acked(deliveries) -> bool:
                return {d.msg_id for d in deliveries if d.ack == "acked"} >= produced.keys()

            consumers.wait_until(all_acked, timeout_s=1500 if messages > 2_000 else 450, what="every message acked")
            deliveries = consumers.stop()
        left = client.request("POST", f"{POP}/receive", json={"max_messages": 32, "invisible_ms": 1000}).json()
        assert left["messages"] == []  # the group holds nothing more

    messages_of = by_message(deliveries)
    assert messages_of.keys() == produced.keys()
    faults = [fault for delivered in messages_of.values() for fault in exclusivity_faults(delivered)]
    assert faults == [], "\n".join(faults[:20])
    for msg_id, delivered in messages_of.items():
        assert [d.ack for d in delivered].count("acked") == 1, delivered
        assert delivered[0].body == produced[msg_id], delivered
        assert delivered[-1].attempt >= len(delivered), delivered  # increasing (exclusivity_faults): no repeats
        assert delivered[-1].ack == "acked", delivered  # each one not acked came back
    again = [d for delivered in messages_of.values() for d in delivered[1:]]
    held = [d for delivered in messages_of.values() for d in delivered]
    assert {d.ack for d in held} <= {"acked", "timed_out", "invalid_receipt_handle"}
    # Counted among the held deliveries: one that arrived after its invisible time (left out of `held`) was let time
    # out by the server already, and its message's next delivery may be the first one held.
    timed_out = sum(d.ack == "timed_out" for d in held)
    assert len(again) >= timed_out > messages // 20  # one in ten let time out, each delivered again
    assert len({d.consumer for d in deliveries}) > 1  # held by several consumers, so exclusivity was tested
    late = sum(d.ack == "invalid_receipt_handle" for d in deliveries)
    print(f"{messages} messages: {len(deliveries)} deliveries, {timed_out} let time out, {late} acked too late")


def produce(client: HttpClient, count: int) -> dict[str, str]:
    """`count` messages on topic `work` (8 queues, round robin), group `stress` made; their bodies by msg_id."""
    client.request("POST", "/v1/topics", json={"name": "work", "queues": QUEUES})
    client.request("POST", "/v1/groups", json={"name": "stress"})
    produced = {}
    for start in range(0, count, 500):
        batch = [{"body": f"m{i}", "queue": i % QUEUES} for i in range(start, min(count, start + 500))]
        answer = client.request("POST", "/v1/topics/work/messages", json={"messages": batch})
        put = ProduceResponse.model_validate_json(answer.content).messages
        produced |= {view.msg_id: message["body"] for view, message in zip(put, batch, strict=True)}
    return produced
