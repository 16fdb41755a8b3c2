"""Streaming reads in a BrokerContainer: each broker streams its own queues under its prefix, from its own store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.containers import RunningContainer, container_running
from tidemq import Consumer, HttpClient, OutgoingMessage, Producer

WAIT_MS = 120_000


@pytest.fixture(scope="module")
def container(tmp_path_factory) -> Iterator[RunningContainer]:
    brokers = {"broker-a.conf": "brokerName=a\n", "broker-b.conf": "brokerName=b\n"}
    with container_running(tmp_path_factory.mktemp("container-stream") / "root", brokers) as running:
        yield running


def test_each_broker_streams_its_own_queue_to_the_sdk_consumer(container):
    for name in ("a", "b"):  # the same topic in both brokers, other messages in each
        with container.client(f"/brokers/{name}") as http:
            container.broker(name).create_topic("orders", queues=1)
            with Producer("orders", client=http) as producer:
                producer.send_batch([OutgoingMessage(f"{name}-{i}".encode()) for i in range(300)])
    for name in ("a", "b"):
        url = container.url + f"/brokers/{name}"
        with HttpClient(url, credentials=container.credentials) as http, Consumer("orders", client=http) as consumer:
            received = []
            while len(received) < 300:
                received += consumer.poll(wait_ms=WAIT_MS)
            assert consumer._streams is not None  # streamed, not long-polled
        assert [m.body for m in received] == [f"{name}-{i}".encode() for i in range(300)]


def test_a_stream_of_a_broker_the_container_does_not_have_is_a_404(container):
    answer = container.client().send("GET", "/brokers/nope/v1/topics/orders/queues/0/stream", params={"offset": 0})
    assert answer.status_code == 404 and answer.json()["error"] == "BrokerNotFound"
