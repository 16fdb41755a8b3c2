"""Pop consumption through gateway crashes: the gateway process is killed with SIGKILL at random moments (most once
it serves, some in its start-up and recovery) and started again on the same port and store, while 4 consumer
processes (tests/pop_consumer.py) pop and ack and a producer process (tests/pop_producer.py) writes, all of them
sending again what got no answer; on both backends (serverless: DynamoDB and S3 on the session's moto server, which
outlives the gateways).

What is checked, from what the producer and the consumers recorded (tests/pop_deliveries.py defines a delivery's
hold and why its check needs no clock slack):
- no produced message is lost: every message whose produce was answered is acked in the end (an ack answered
  `acked`, or `already_acked` when it was sent again after a lost answer);
- no message is delivered again once its ack was answered, none is acked by two deliveries, and per message the
  holds of its deliveries never overlap and their attempts increase;
- messages held at a crash come back after their invisible time: every delivery whose ack no gateway could take
  (`abandoned`: the gateway was down, so the consumer gives its messages up) or came too late, is delivered again,
  no earlier than its `invisible_until_ms`. A receive whose answer a kill cut off holds messages the consumer never
  saw: they show as a first recorded attempt above 1, or a gap in the attempts, and come back too (they are acked
  in the end). So that every run has messages held at a crash, the test itself receives a few just before each
  kill once the gateway serves, and never acks them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateways import RestartedGateway, restarted_gateway
from tests.pop_consumer import ConsumerProcesses
from tests.pop_deliveries import ACKED, Delivery, acked_bodies, by_message, exclusivity_faults, now_ms
from tests.pop_producer import ProducerProcess
from tidemq.client import HttpClient
from tidemq_protocol.api.pop import ReceiveResponse

CONSUMERS, QUEUES = 4, 4
INVISIBLE_MS = 2_000
CONSUMER_OPTIONS = ("--invisible-ms", str(INVISIBLE_MS), "--wait-ms", "500", "--hold-ms", "500", "--through-restarts")
STARTUP_KILL_EVERY = 3  # every third kill lands at any moment of the start-up, recovery included


@pytest.fixture(params=["embedded", "serverless"])
def gateway(request, tmp_path) -> Iterator[RestartedGateway]:
    with restarted_gateway(request, tmp_path, request.param, TIDEMQ_POP_MIN_INVISIBLE_MS="1000") as gateway:
        yield gateway


@pytest.mark.slow
def test_pop_through_3_gateway_kills_loses_nothing_and_redelivers_nothing_acked(gateway, tmp_path):
    run_through_kills(gateway, tmp_path, kills=3)


@pytest.mark.long
@pytest.mark.timeout(1800)
def test_pop_through_many_gateway_kills_loses_nothing_and_redelivers_nothing_acked(gateway, tmp_path):
    run_through_kills(gateway, tmp_path, kills=20 if gateway.env["TIDEMQ_BACKEND"] == "embedded" else 10)


def run_through_kills(gateway: RestartedGateway, tmp_path: Path, kills: int) -> None:
    with HttpClient(gateway.url, timeout_s=120) as setup:
        setup.request("POST", "/v1/topics", json={"name": "work", "queues": QUEUES})
        setup.request("POST", "/v1/groups", json={"name": "stress"})
    rng = random.Random(27)
    held: list[Delivery] = []
    with (
        HttpClient(gateway.url, timeout_s=120) as client,
        ProducerProcess(gateway.url, "work", tmp_path / "producer") as producer,
        ConsumerProcesses(gateway.url, "work", "stress", tmp_path / "consumers", CONSUMERS, *CONSUMER_OPTIONS) as run,
    ):
        # every consumer at work before the first kill, however slowly the machine starts them
        run.wait_until(lambda found: len({d.consumer for d in found}) == CONSUMERS, 300, "every consumer at work")
        for kill in range(kills):
            in_start_up = kill % STARTUP_KILL_EVERY == STARTUP_KILL_EVERY - 1
            if kill:
                gateway.start(healthy=not in_start_up)
            run.assert_running()
            time.sleep(rng.uniform(0.0, 2.0) if in_start_up else rng.uniform(0.2, 1.5))
            if not in_start_up:
                held += hold_some(client)
            gateway.kill()
        gateway.start()
        produced = producer.stop()

        def all_produced_acked(found) -> bool:
            return acked_bodies(found) >= set(produced)

        run.wait_until(all_produced_acked, 600, "every produced message acked")
        deliveries = run.stop() + held

    messages_of = by_message(deliveries)
    faults = [fault for delivered in messages_of.values() for fault in exclusivity_faults(delivered)]
    assert faults == [], "\n".join(faults[:20])
    unsettled = [d for d in deliveries if d.ack in ("abandoned", "invalid_receipt_handle")]
    for delivery in unsettled:  # each came back (after its invisible time: the holds do not overlap)
        delivered = messages_of[delivery.msg_id]
        if delivery not in delivered:  # reached its consumer after its invisible time: never held (by_message)
            continue
        assert delivered.index(delivery) < len(delivered) - 1, f"{delivery} never delivered again"
    abandoned = sum(d.ack == "abandoned" for d in deliveries) - len(held)
    lost_receives = sum(  # attempts no recorded delivery has: claimed, their answer cut off
        delivered[-1].attempt - len(delivered) for delivered in messages_of.values()
    )
    retried_acks = sum(d.ack in ACKED and d.ack_tries > 1 for d in deliveries)
    print(
        f"{kills} kills: {len(produced)} produced, {len(deliveries)} deliveries, held at a crash: {len(held)} by the "
        f"test, {abandoned} by consumers (and {len(unsettled) - abandoned - len(held)} acked too late), "
        f"{lost_receives} receive answers lost; {retried_acks} acks answered after a retry"
    )
    assert len(produced) > 100


def hold_some(client: HttpClient) -> list[Delivery]:
    """Messages this test receives (as consumer number CONSUMERS) and holds through the kill that follows: never
    acked, each must come back once its invisible time ends. There are some within 20 s: the producer writes."""
    receive = {"max_messages": 8, "wait_ms": 20_000, "invisible_ms": INVISIBLE_MS}
    answer = client.request("POST", "/v1/groups/stress/topics/work/receive", json=receive)
    received_ms = now_ms()
    messages = ReceiveResponse.model_validate_json(answer.content).messages
    assert messages, "nothing received in 20 s while the producer writes"
    return [Delivery.of(CONSUMERS, message, received_ms, "abandoned") for message in messages]
