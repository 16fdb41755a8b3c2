"""TideMQ's SDK producing through a gateway killed with SIGKILL again and again, on both backends: every batch
acknowledged is stored, and no message is stored twice, although the SDK sent batches again across the kills (its
retries, and `flush` after a failed send, carry the batch's idempotency key: docs/http-api.md, Idempotent sends)."""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gateways import restarted_gateway
from tidemq.httpx_auth import signed_client

DRIVER = Path(__file__).resolve().parent.parent / "sdk_producer.py"
DEADLINE_S = 300


@pytest.mark.parametrize("backend", ["embedded", pytest.param("serverless", marks=pytest.mark.long)])
@pytest.mark.parametrize(
    "kills", [pytest.param(2, id="2kills"), pytest.param(10, marks=pytest.mark.long, id="10kills")]
)
def test_sdk_batches_sent_again_across_gateway_sigkills_are_stored_once(request, tmp_path, backend, kills):
    count = 150 * kills  # 15 batches a kill, a batch every 0.3 s: sends go on through each kill and restart
    with restarted_gateway(request, tmp_path, backend) as gateway, signed_client(gateway.url, timeout=60) as http:
        assert http.post("/v1/topics", json={"name": "sdk-kills", "queues": 4}).status_code == 201
        producer = subprocess.Popen(
            [sys.executable, str(DRIVER), gateway.url, "sdk-kills", str(count), "10", "0.3"],
            stdout=subprocess.PIPE,
            text=True,
        )
        rng = random.Random(kills)
        for _ in range(kills):
            time.sleep(rng.uniform(0.3, 1.5))
            gateway.kill()
            gateway.start()
        out, _ = producer.communicate(timeout=DEADLINE_S)
        assert producer.returncode == 0
        events = [json.loads(line) for line in out.splitlines()]
        acked = {msg_id: body for msg_id, body in (e for e in events if isinstance(e, list))}
        stored = collections.Counter()
        for queue in range(4):
            offset = 0
            while True:
                params = {"offset": offset, "max_messages": 1000}
                page = http.get(f"/v1/topics/sdk-kills/queues/{queue}/messages", params=params).json()
                for message in page["messages"]:
                    stored[message["body"]] += 1
                    assert acked.get(message["msg_id"], message["body"]) == message["body"]
                if not page["messages"]:
                    break
                offset = page["next_offset"]
    failures = sum(1 for e in events if isinstance(e, dict))
    assert sorted(acked.values()) == sorted(f"m-{n}" for n in range(count))  # the application got every one through
    assert [body for body, n in stored.items() if n > 1] == []  # none stored twice
    assert set(stored) == set(acked.values())  # every acknowledged message stored, nothing else
    print(json.dumps({"backend": backend, "kills": kills, "messages": count, "failed_sends": failures}))
