"""Cross-deployed master/slave pairs in two real container processes (RIP-31's two-replica peer-to-peer
deployment): container A holds master a and the slave of b, container B master b and the slave of a, both masters
SYNC_MASTER. Killing B with SIGKILL mid-send (while A is stopped for a moment, so b's slave lags): sends to a go on,
and every put of b that was answered SEND_OK is on b's slave in A, at its queue and offset, with its id and body;
promoted, the slave takes b's sends."""

from __future__ import annotations

import signal
import threading
import time

from tests.containers import container_running
from tidemq import Producer
from tidemq.client import HttpClient
from tidemq_protocol.errors import TideMQError

MASTER = "brokerRole=SYNC_MASTER\nhaHousekeepingInterval=2000\nsyncFlushTimeout=2000\n"


def slave_of(name: str, master) -> str:
    return (
        f"brokerName={name}\nbrokerId=1\nbrokerRole=SLAVE\nhaMasterAddress={master.url}\n"
        f"haMasterAccessKey={master.credentials.access_key}\nhaMasterSecretKey={master.credentials.secret_key}\n"
    )


class Sender(threading.Thread):
    """Sends batches of 3 messages to a broker until stopped or refused, keeping every answer."""

    def __init__(self, client: HttpClient, topic: str, name: str, padding: int = 0) -> None:
        super().__init__(daemon=True)
        self.client, self.topic, self.name, self.padding = client, topic, name, "." * padding
        self.answered: list[tuple[str, dict, str]] = []  # (send status, put result, body)
        self.error: Exception | None = None
        self.stopped = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stopped.is_set():
            bodies = [f"{self.name}-{n + i}{self.padding}" for i in range(3)]
            n += 3
            messages = [{"body": body, "body_encoding": "utf-8", "queue": i % 2} for i, body in enumerate(bodies)]
            try:
                response = self.client.request("POST", f"/v1/topics/{self.topic}/messages", json={"messages": messages})
            except (TideMQError, OSError) as error:
                self.error = error
                return
            status = response.headers["x-tidemq-send-status"]
            self.answered += [
                (status, put, body) for put, body in zip(response.json()["messages"], bodies, strict=True)
            ]

    def count(self, status: str) -> int:
        return sum(1 for answered in self.answered if answered[0] == status)


def wait_until(condition, timeout_s: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_killed_container_loses_no_acknowledged_message_and_sends_go_on(tmp_path):
    with (
        container_running(tmp_path / "A", {"a.conf": "brokerName=a\n" + MASTER}) as node_a,
        container_running(tmp_path / "B", {"b.conf": "brokerName=b\n" + MASTER}) as node_b,
    ):
        node_b.add(slave_of("a", node_a))
        node_a.add(slave_of("b", node_b))
        for node, name in ((node_a, "a"), (node_b, "b")):
            node.broker(name).create_topic("orders", queues=2)
            wait_until(lambda node=node, name=name: node.brokers()[name]["replication"]["slave_alive"], what="slaves")

        to_a = Sender(node_a.client("/brokers/a"), "orders", "a")
        sent = Producer("orders", client=node_b.client("/brokers/b")).send(b"from the SDK", queue=1)
        assert sent.send_status == "SEND_OK"  # the slave has it
        to_b = [Sender(node_b.client("/brokers/b"), "orders", f"b{k}", padding=8000) for k in range(4)]  # racing
        for sender in (to_a, *to_b):
            sender.start()
        wait_until(lambda: sum(s.count("SEND_OK") for s in to_b) >= 300 and to_a.count("SEND_OK") >= 150, what="sends")
        # A stalls (a long pause: its slave of b answers nothing), then B dies: what b answered SEND_OK meanwhile
        # would be lost if b acknowledged before its slave had it
        node_a.process.send_signal(signal.SIGSTOP)
        time.sleep(0.5)
        node_b.process.send_signal(signal.SIGKILL)
        node_b.process.wait()
        node_a.process.send_signal(signal.SIGCONT)
        for sender in to_b:
            sender.join(timeout=60)
            assert sender.error is not None  # its container is gone
        before = len(to_a.answered)
        wait_until(lambda: to_a.count("SLAVE_NOT_AVAILABLE") >= 60, what="sends to a after the kill")
        sdk = Producer("orders", client=node_a.client("/brokers/a"))
        assert sdk.send(b"from the SDK", queue=0).send_status == "SLAVE_NOT_AVAILABLE"  # stored on a only
        to_a.stopped.set()
        to_a.join(timeout=60)
        assert to_a.error is None, to_a.error
        assert len(to_a.answered) > before + 60  # sends to the surviving master went on, told its slave is gone
        assert {status for status, _, _ in to_a.answered[before:]} <= {
            "SEND_OK",
            "FLUSH_SLAVE_TIMEOUT",
            "SLAVE_NOT_AVAILABLE",
        }

        # every put b answered SEND_OK is on its slave in A: same queue, offset, id and body
        slave_b = node_a.client("/brokers/b")
        answered_b = [answer for sender in to_b for answer in sender.answered]
        acknowledged = [(put, body) for status, put, body in answered_b if status == "SEND_OK"]
        assert len(acknowledged) >= 300
        # a live slave: SEND_OK (or, on a machine slow enough to keep a put waiting 2 s, FLUSH_SLAVE_TIMEOUT)
        assert {status for status, _, _ in answered_b} <= {"SEND_OK", "FLUSH_SLAVE_TIMEOUT"}
        for queue in (0, 1):
            mine = sorted((put["offset"], put["msg_id"], body) for put, body in acknowledged if put["queue"] == queue)
            page = slave_b.request(
                "GET", f"/v1/topics/orders/queues/{queue}/messages", params={"max_messages": 10_000}
            ).json()["messages"]
            held = {m["offset"]: (m["offset"], m["msg_id"], m["body"]) for m in page}
            assert [held.get(offset) for offset, _, _ in mine] == mine

        # every answered put of a is on a, whatever its status
        master_a = node_a.client("/brokers/a")
        for queue in (0, 1):
            page = master_a.request(
                "GET", f"/v1/topics/orders/queues/{queue}/messages", params={"max_messages": 10_000}
            ).json()["messages"]
            held = {(m["offset"], m["body"]) for m in page}
            assert {(put["offset"], body) for _, put, body in to_a.answered if put["queue"] == queue} <= held

        # promoted, b's slave takes b's sends, going on from b's last offsets
        last = max(put["offset"] for put, _ in acknowledged if put["queue"] == 0)
        node_a.client().request(
            "PATCH",
            "/container/v1/brokers/b/config",
            json={"settings": {"brokerRole": "ASYNC_MASTER", "brokerId": "0"}},
        )
        assert node_a.brokers()["b"]["role"] == "ASYNC_MASTER"
        put = slave_b.request(
            "POST",
            "/v1/topics/orders/messages",
            json={"messages": [{"body": "after", "body_encoding": "utf-8", "queue": 0}]},
        ).json()["messages"][0]
        assert put["offset"] > last
