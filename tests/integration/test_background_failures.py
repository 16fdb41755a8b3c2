"""Background work cannot fail silently: a failed fsync stops the store taking writes, loudly (PostgreSQL's
"fsyncgate": a failed fsync cannot be retried into success), and a checkpoint that fails is logged and retried."""

from __future__ import annotations

import errno
import logging
import os
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.gateways import gateway_as_admin
from tidemq.httpx_auth import signed_client
from tidemq_protocol.errors import StoreUnavailable
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TopicConfig, open_store
from tidemq_store.embedded.consumequeue import Checkpoint

GATEWAY = Path(__file__).with_name("failing_disk_gateway.py")
QUEUES = 2


def produce(client: httpx.Client, batch: int) -> httpx.Response:
    messages = [{"body": f"{batch}-{i}", "queue": i % QUEUES} for i in range(10)]
    return client.post("/v1/topics/orders/messages", json={"messages": messages})


def read_all(client: httpx.Client) -> dict[tuple[int, int], str]:
    found = {}
    for queue in range(QUEUES):
        offset = 0
        while True:
            page = client.get(
                f"/v1/topics/orders/queues/{queue}/messages", params={"offset": offset, "max_messages": 1000}
            ).json()
            found.update({(queue, m["offset"]): m["body"] for m in page["messages"]})
            if page["next_offset"] >= page["max_offset"]:
                break
            offset = page["next_offset"]
    return found


@pytest.mark.parametrize("flush", ["SYNC", "ASYNC"])
def test_after_a_failed_fsync_no_put_is_acknowledged_health_says_why_and_a_restart_has_every_acknowledged_message(
    tmp_path, flush
):
    home, trigger = tmp_path / "store", tmp_path / "fail-fsync"
    acknowledged: dict[tuple[int, int], str] = {}

    def keep(response: httpx.Response, batch: int) -> None:
        for i, stored in enumerate(response.json()["messages"]):
            acknowledged[(stored["queue"], stored["offset"])] = f"{batch}-{i}"

    settings = {
        "TIDEMQ_FLUSH_DISK_TYPE": flush,
        "TIDEMQ_FLUSH_INTERVAL_MS": "20",
        "TIDEMQ_TEST_FAIL_FSYNC": str(trigger),
    }
    with gateway_as_admin(home, (str(GATEWAY),), **settings) as url, signed_client(url, timeout=30) as client:
        assert client.post("/v1/topics", json={"name": "orders", "queues": QUEUES}).status_code == 201
        for batch in range(20):
            response = produce(client, batch)
            assert response.status_code == 200, response.text
            keep(response, batch)

        trigger.touch()  # from now on the disk fails every fsync
        batch = 20
        deadline = time.monotonic() + 20
        while (health := client.get("/health")).status_code == 200:  # SYNC: the next put fsyncs; ASYNC: the flusher
            assert time.monotonic() < deadline, "the store never noticed the failed fsync"
            response = produce(client, batch)
            if response.status_code == 200:
                keep(response, batch)  # ASYNC acknowledges on write: these came before the failure was met
            batch += 1
        assert health.status_code == 503
        assert "fsync" in health.json()["message"] and "Input/output error" in health.json()["message"]

        for later in range(batch, batch + 5):  # no put is acknowledged after it: each fails, saying why
            response = produce(client, later)
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "StoreFailed"
            assert "fsync" in response.json()["message"] and "restart" in response.json()["message"]
        assert client.get("/health").status_code == 503
    assert len(acknowledged) >= 200

    trigger.unlink()  # the disk is replaced; the process restarts and recovers from the log
    with gateway_as_admin(home, TIDEMQ_FLUSH_DISK_TYPE=flush) as url, signed_client(url, timeout=30) as client:
        assert client.get("/health").status_code == 200
        stored = read_all(client)
    lost = {key: body for key, body in acknowledged.items() if stored.get(key) != body}
    assert lost == {}


def test_a_checkpoint_that_fails_is_logged_and_the_loop_goes_on_to_write_the_next(open_test_store, caplog):
    store = open_test_store(checkpoint_interval_s=0.05)
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"before")])
    checkpoint = Checkpoint(store.config.home / "checkpoint")
    real_flush, failures = store.cq.flush, []

    def flush_failing_once() -> None:
        if not failures:
            failures.append(1)
            raise OSError("injected: the ConsumeQueue could not be flushed")
        real_flush()

    with caplog.at_level(logging.ERROR, logger="tidemq.store"):
        store.cq.flush = flush_failing_once
        store.put("t", [Message(b"after")])
        end = store.written_position
        deadline = time.monotonic() + 10
        while checkpoint.read().position < end:  # the next round wrote it
            assert time.monotonic() < deadline, "no checkpoint was written after the failure"
            time.sleep(0.01)
    assert failures == [1]
    [record] = [r for r in caplog.records if "checkpoint" in r.getMessage()]
    assert "failed" in record.getMessage() and "injected" in str(record.exc_info[1])


def test_a_serverless_batch_whose_fsync_fails_is_refused_whole_and_the_next_goes_to_a_new_file(
    tmp_path, aws_env, monkeypatch
):
    efs = tmp_path / "efs"
    store = open_store(
        StoreConfig(home=tmp_path, backend="serverless", efs_path=efs, dynamodb_prefix=f"fsync{uuid.uuid4().hex[:8]}")
    )
    store.create_topic(TopicConfig(name="t", queues=2))
    store.put("t", [Message(b"before", queue=0)])
    sync = os.fsync

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(StoreUnavailable, match=r"Input/output error.*nothing was stored"):
        store.put("t", [Message(b"refused", queue=0), Message(b"refused", queue=1)])
    monkeypatch.setattr(os, "fsync", sync)
    store.put("t", [Message(b"after", queue=0)])

    assert [m.body for m in store.get("t", 0, 0).messages] == [b"before", b"after"]
    assert store.get("t", 1, 0).messages == []
    assert len(list((efs / "segments").iterdir())) == 2  # the file that failed is left to maintenance
    store.close()
