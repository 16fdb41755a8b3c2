"""RIP-31's disk quota in a real container: a broker past `logicalDiskSpaceCleanForciblyThreshold` of its quota
(`quotaPercentForDiskPartition` of the partition) removes its oldest segments already in the cold tier and keeps
serving them from there; without a tier it deletes nothing and refuses new messages until it has room; a broker
without a quota next to them is untouched."""

from __future__ import annotations

import shutil
import time

import pytest

from servers.grpc_proxy.protocol import definition_pb2 as pb
from servers.grpc_proxy.protocol import service_pb2 as rpc
from servers.process import free_port
from tests.containers import container_running, grpc_call
from tidemq.client import HttpClient
from tidemq_protocol.errors import DiskQuotaExceeded

SEGMENT = 64 * 1024
QUOTA = 1024 * 1024  # the threshold (0.5) is half of it: 8 segments


def quota_settings(root) -> str:
    root.mkdir(parents=True, exist_ok=True)
    share = QUOTA / shutil.disk_usage(root).total
    return (
        f"mappedFileSizeCommitLog={SEGMENT}\nquotaPercentForDiskPartition={share!r}\n"
        "logicalDiskSpaceCleanForciblyThreshold=0.5\ncleanResourceInterval=100\n"
    )


def fill(client: HttpClient, topic: str, batches: int, start: int = 0) -> list[str]:
    bodies = []
    for b in range(start, start + batches):
        batch = [f"{topic}-{b}-{i}-" + "x" * 1000 for i in range(10)]
        messages = [{"body": body, "body_encoding": "utf-8", "queue": i % 2} for i, body in enumerate(batch)]
        client.request("POST", f"/v1/topics/{topic}/messages", json={"messages": messages})
        bodies += batch
    return bodies


def read_all(client: HttpClient, topic: str) -> list[str]:
    bodies = []
    for queue in (0, 1):
        offset = 0
        while True:
            page = client.request(
                "GET", f"/v1/topics/{topic}/queues/{queue}/messages", params={"offset": offset, "max_messages": 500}
            ).json()
            bodies += [m["body"] for m in page["messages"]]
            if page["next_offset"] == offset:
                break
            offset = page["next_offset"]
    return sorted(bodies)


def segment_files(root, broker: str) -> list[int]:
    """The starts of a broker's commit-log segments (not its spare next segment, `preallocated`: commitlog.py)."""
    directory = root / "brokers" / broker / "commitlog"
    return sorted(int(path.name) for path in directory.iterdir() if path.name.isdigit())


def wait_for(condition, what: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


@pytest.fixture(scope="module")
def container(tmp_path_factory):
    root = tmp_path_factory.mktemp("quota") / "root"
    limits = quota_settings(root)
    brokers = {
        "tiered.conf": "brokerName=tiered\ntier=posix\ntierUploadAgeMs=20\n" + limits,
        "plain.conf": f"brokerName=plain\nmappedFileSizeCommitLog={SEGMENT}\n",
        "untiered.conf": "brokerName=untiered\n" + limits,
    }
    with container_running(root, brokers, grpcServerPort=str(free_port())) as running:
        for name in brokers:
            running.broker(name.removesuffix(".conf")).create_topic("orders", queues=2)
        yield running


def test_a_tiered_broker_past_its_threshold_removes_its_oldest_tiered_segments(container):
    tiered, plain = container.client("/brokers/tiered"), container.client("/brokers/plain")
    sent = fill(tiered, "orders", 150)  # about 1.5 MiB: twice the threshold
    fill(plain, "orders", 150)

    def freed():
        quota = container.brokers()["tiered"]["quota"]
        return (
            quota if quota["state"] != "refusing_writes" and quota["usage_bytes"] <= quota["threshold_bytes"] else None
        )

    quota = wait_for(freed, "the tiered broker to free space")
    assert quota["quota_bytes"] == pytest.approx(QUOTA, rel=0.01)
    assert segment_files(container.root, "tiered")[0] > 0  # its oldest segments are gone from the hot tier
    assert read_all(tiered, "orders") == sorted(sent)  # and read from the cold tier
    assert segment_files(container.root, "plain")[0] == 0  # the broker beside it kept all of its own
    assert len(segment_files(container.root, "plain")) > 16
    assert container.brokers()["plain"]["quota"]["state"] == "ok"
    log = (container.root / "logs" / "container.log").read_text()
    assert "removed" in log and "safe in the cold tier" in log


def test_an_untiered_broker_refuses_writes_rather_than_delete(container):
    untiered = container.client("/brokers/untiered")
    sent, refused = [], None
    for batch in range(400):
        try:
            sent += fill(untiered, "orders", 1, start=batch)
        except DiskQuotaExceeded as error:
            refused = error
            break
        time.sleep(0.005)  # the quota is checked every 100 ms
    assert refused is not None and "no cold tier holds a copy" in str(refused)
    quota = container.brokers()["untiered"]["quota"]
    assert quota["state"] == "refusing_writes" and "refused" in quota["warning"]
    assert segment_files(container.root, "untiered")[0] == 0  # nothing was deleted
    assert read_all(untiered, "orders") == sorted(sent)  # everything acknowledged is there; reads go on
    with pytest.raises(DiskQuotaExceeded):
        fill(untiered, "orders", 1, start=999)
    system = pb.SystemProperties(message_id="grpc-1", message_type=pb.NORMAL)
    message = pb.Message(topic=pb.Resource(name="orders"), system_properties=system, body=b"by gRPC")
    sent_by_grpc = grpc_call(container, "SendMessage", rpc.SendMessageRequest(messages=[message]), "untiered")
    assert sent_by_grpc.status.code == pb.TOO_MANY_REQUESTS  # refused as over HTTP (a RocketMQ client)
    assert read_all(untiered, "orders") == sorted(sent)  # the refused batch and message changed nothing

    container.client().request(  # more room: writes come back at once
        "PATCH", "/container/v1/brokers/untiered/config", json={"settings": {"quotaPercentForDiskPartition": "1"}}
    )
    sent += fill(untiered, "orders", 1, start=1000)
    assert read_all(untiered, "orders") == sorted(sent)
