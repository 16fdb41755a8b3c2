"""The SDK's streaming Consumer, with a group, reading while its gateway is killed with SIGKILL and started again, on
both backends: its streams reopen from where they were, so the loop receives every acknowledged message exactly
once, in each queue's order, and the group's committed offsets end at the queues' ends."""

from __future__ import annotations

import random
import threading
import time

import pytest

from tests.gateways import restarted_gateway
from tidemq import Admin, Consumer, HttpClient, OutgoingMessage, Producer
from tidemq_protocol.message import StoredMessage

DEADLINE_S = 300
QUEUES = 3


def patient_client(url: str) -> HttpClient:
    """A client that keeps trying through a gateway's restart (tens of seconds for the serverless one)."""
    return HttpClient(url, timeout_s=60, retries=120, backoff_s=0.1, max_backoff_s=1.0)


@pytest.mark.serverless_long
@pytest.mark.parametrize("backend", ["embedded", "serverless"])
def test_a_streaming_consumer_through_gateway_sigkills_receives_every_acknowledged_message_once(
    request, tmp_path, backend
):
    batches, kills = 120, 2
    with restarted_gateway(request, tmp_path, backend) as gateway:
        with patient_client(gateway.url) as setup:
            Admin(client=setup).create_topic("kills", queues=QUEUES)
        acked: list[bytes] = []
        received: list[StoredMessage] = []
        failures: list[BaseException] = []
        done = threading.Event()

        def produce() -> None:
            with patient_client(gateway.url) as http, Producer("kills", client=http) as producer:
                for n in range(batches):
                    bodies = [f"m-{n}-{i}".encode() for i in range(10)]
                    producer.send_batch([OutgoingMessage(body, queue=n % QUEUES) for body in bodies])
                    acked.extend(bodies)
                    time.sleep(0.05)

        def consume() -> None:
            try:
                with patient_client(gateway.url) as http, Consumer("kills", group="readers", client=http) as consumer:
                    for message in consumer:  # commits what it received before each poll
                        received.append(message)
                        if len(received) >= batches * 10:
                            break
                    consumer.commit()
            except BaseException as error:  # the test thread reports it
                failures.append(error)
            finally:
                done.set()

        consuming = threading.Thread(target=consume, daemon=True)
        consuming.start()
        producing = threading.Thread(target=produce, daemon=True)
        producing.start()
        rng = random.Random(backend)
        for _ in range(kills):
            time.sleep(rng.uniform(0.5, 1.5))
            gateway.kill()
            gateway.start()
        producing.join(DEADLINE_S)
        assert not producing.is_alive()
        assert done.wait(DEADLINE_S), f"received {len(received)} of {len(acked)}"
        assert failures == []
        with patient_client(gateway.url) as check:
            lags = Admin(client=check).describe_group("readers", "kills").topics[0].queues
    assert sorted(m.body for m in received) == sorted(acked)  # each acknowledged message, once
    for queue in range(QUEUES):
        offsets = [m.queue_offset for m in received if m.queue == queue]
        assert offsets == list(range(len(offsets))), queue  # in order, no gap
    assert {q.queue: q.committed_offset for q in lags} == {q: batches // QUEUES * 10 for q in range(QUEUES)}
