"""`make run`'s cold tier: with TIDEMQ_TIER=s3 and no AWS_ENDPOINT_URL the gateway starts its own local AWS, as
TIDEMQ_LOCAL_AWS says (moto in `make test`, LocalStack in `make test-localstack`), and stopping the gateway stops it:
no process of its home is left."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.test_console_security import as_admin
from tests.gateways import gateway_as_admin
from tidemq import Admin, Consumer, OutgoingMessage, Producer

TIDEMQ = Path(os.environ.get("VIRTUAL_ENV", Path(__file__).parents[2] / ".venv")) / "bin" / "tidemq"

pytestmark = pytest.mark.local_aws  # make test-localstack runs these too


def processes_of(home: Path) -> list[str]:
    """The processes (pid and command) whose environment names `home` as TIDEMQ_HOME: a gateway and what it
    started (a moto server; LocalStack and its DynamoDB Local JVM)."""
    found, wanted = [], f"TIDEMQ_HOME={home}".encode()
    for process in Path("/proc").iterdir():
        try:
            if process.name.isdigit() and wanted in (process / "environ").read_bytes().split(b"\0"):
                command = (process / "cmdline").read_bytes().replace(b"\0", b" ")[:200]
                found.append(f"{process.name} {command!r}")
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def test_the_gateway_serves_messages_from_its_embedded_s3_once_the_hot_segments_are_gone(tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    settings = {
        "TIDEMQ_TIER": "s3",
        "TIDEMQ_TIER_UPLOAD_AGE_MS": "3600000",  # uploads only when asked to, below
        "TIDEMQ_HOT_RETENTION_MS": "0",
        "TIDEMQ_COMMITLOG_SEGMENT_BYTES": "65536",
        "TIDEMQ_CLEAN_INTERVAL_S": "0.2",
    }
    with gateway_as_admin(tmp_path / "data", **settings) as url:
        log = (tmp_path / "data" / "gateway.log").read_text()
        assert "cold tier s3://tidemq-tier/tidemq via http://127.0.0.1:" in log
        with Admin(url) as admin:
            admin.create_topic("orders", queues=2)
            with Producer("orders", url) as producer:  # a batch goes to one queue: one batch each
                sent = [
                    result
                    for half in (0, 500)
                    for result in producer.send_batch(
                        [OutgoingMessage(f"order {i}".encode() * 30, tag=f"t{i % 3}") for i in range(half, half + 500)]
                    )
                ]
            assert [q.upload_lag_messages for q in admin.tier_status("orders").queues] == [500, 500]

            cli = [str(TIDEMQ), "--url", url]
            done = subprocess.run([*cli, "topic", "upload", "orders"], capture_output=True, text=True, timeout=60)
            assert (done.returncode, done.stdout) == (0, "uploaded 1000 messages of topic 'orders'\n"), done.stderr
            deadline = time.monotonic() + 30
            while admin.tier_status("orders").queues[0].hot_min_offset == 0:  # the cleaner removes hot segments
                assert time.monotonic() < deadline
                time.sleep(0.1)
            shown = subprocess.run([*cli, "topic", "tier", "orders"], capture_output=True, text=True, timeout=60)
            assert shown.returncode == 0 and "cold tier s3://tidemq-tier/tidemq, reads NOT_IN_DISK" in shown.stdout
            rows = [line.split() for line in shown.stdout.splitlines() if line.strip()[:1].isdigit()]
            assert [row[2:5] for row in rows] == [["0", "500", "500"]] * 2  # cold 0..500, max 500

        with Consumer("orders", url=url, tag="t1") as consumer:
            received = []
            while not consumer.drained:
                received += consumer.poll()
        expected = {(r.queue, r.offset) for i, r in enumerate(sent) if i % 3 == 1}
        assert {(m.queue, m.queue_offset) for m in received} == expected
        assert all(m.body.startswith(b"order ") and m.tag == "t1" for m in received)
    assert processes_of(tmp_path / "data") == []


def test_the_serverless_gateway_moves_messages_to_its_embedded_s3_on_its_own_schedule(tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    settings = {"TIDEMQ_BACKEND": "serverless", "TIDEMQ_TIER": "s3", "TIDEMQ_MAINTENANCE_INTERVAL_S": "0.3"}
    with gateway_as_admin(tmp_path / "data", **settings) as url, Admin(url) as admin:
        admin.create_topic("orders", queues=2)
        with Producer("orders", url) as producer:
            sent = [r for r in producer.send_batch([OutgoingMessage(b"order %d" % i) for i in range(300)])]
        queue = sent[0].queue
        deadline = time.monotonic() + 60
        while admin.tier_status("orders").queues[queue].cold_max_offset != 300:  # nobody asked: the schedule did
            assert time.monotonic() < deadline, admin.tier_status("orders")
            time.sleep(0.1)
        status = admin.tier_status("orders").queues[queue]
        assert (status.hot_min_offset, status.cold_min_offset, status.upload_lag_messages) == (300, 0, 0)
        with Consumer("orders", url=url) as consumer:  # below the hot boundary: read from S3
            received = []
            while not consumer.drained:
                received += consumer.poll()
        assert sorted(m.body for m in received) == sorted(b"order %d" % i for i in range(300))
    assert processes_of(tmp_path / "data") == []


@pytest.mark.parametrize("backend", ["embedded", "serverless"])
def test_a_message_whose_hot_segments_are_gone_is_found_by_id_and_key_through_the_api_the_cli_and_the_console(
    tmp_path, monkeypatch, backend
):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    efs = tmp_path / "efs"
    settings = {
        "TIDEMQ_BACKEND": backend,
        "TIDEMQ_TIER": "s3",
        "TIDEMQ_TIER_UPLOAD_AGE_MS": "3600000",  # uploads only when asked to, below
        "TIDEMQ_HOT_RETENTION_MS": "0",
        "TIDEMQ_COMMITLOG_SEGMENT_BYTES": "65536",
        "TIDEMQ_CLEAN_INTERVAL_S": "0.2",
        "TIDEMQ_EFS_PATH": str(efs),
        "TIDEMQ_EFS_SEGMENT_GRACE_S": "1",  # serverless: the gateway's maintenance deletes idle files soon
        "TIDEMQ_MAINTENANCE_INTERVAL_S": "0.2",
    }
    with gateway_as_admin(tmp_path / "data", **settings) as url, Admin(url) as admin:
        admin.create_topic("orders", queues=2)
        with Producer("orders", url) as producer:
            sent = [  # a batch is one append: four of them fill segments the cleaner can remove
                result
                for start in range(0, 400, 100)
                for result in producer.send_batch(
                    [
                        OutgoingMessage(b"order %d " % i + bytes(300), keys=[f"order-{i}"])
                        for i in range(start, start + 100)
                    ]
                )
            ]
        cli = [str(TIDEMQ), "--url", url]
        done = subprocess.run([*cli, "topic", "upload", "orders"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 60
        if backend == "serverless":  # the maintenance run deletes the files once idle, all uploaded
            while any((efs / "segments").iterdir()):
                assert time.monotonic() < deadline, list((efs / "segments").iterdir())
                time.sleep(0.1)
        else:
            while admin.tier_status("orders").queues[sent[0].queue].hot_min_offset <= sent[0].offset:
                assert time.monotonic() < deadline, admin.tier_status("orders")  # the cleaner removes hot segments
                time.sleep(0.1)

        first = sent[0]
        found = admin.message(first.msg_id)
        assert (found.queue, found.offset, found.keys) == (first.queue, first.offset, ["order-0"])
        assert [m.msg_id for m in admin.messages_by_key("orders", "order-0")] == [first.msg_id]
        shown = subprocess.run([*cli, "message", "get", first.msg_id], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0 and json.loads(shown.stdout)["msg_id"] == first.msg_id, shown.stderr
        keyed = subprocess.run(
            [*cli, "message", "by-key", "orders", "order-1"], capture_output=True, text=True, timeout=60
        )
        assert keyed.returncode == 0 and [json.loads(line)["msg_id"] for line in keyed.stdout.splitlines()] == [
            sent[1].msg_id
        ], keyed.stderr
        console = as_admin(url)  # the console's message browser, by id and by key
        try:
            page = console.get("/console/messages", params={"id": first.msg_id})
            assert page.status_code == 200 and first.msg_id in page.text and sent[1].msg_id not in page.text
            page = console.get("/console/messages", params={"topic": "orders", "key": "order-1"})
            assert page.status_code == 200 and sent[1].msg_id in page.text and first.msg_id not in page.text
        finally:
            console.close()
