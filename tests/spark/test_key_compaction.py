"""Key compaction (a topic with cleanup.policy=COMPACTION) on real PySpark local[2], read back through a real
gateway's HTTP consume API: the newest message per key, keyless messages, tombstones kept within their grace and
removed after it, offsets and message ids unchanged, and a read at a removed offset returning the next survivor."""

from __future__ import annotations

import time
import uuid

from spark_emr.jobs import compaction
from tests.gateways import gateway_as_admin, signed_http
from tidemq_protocol import codec
from tidemq_store.serverless.cold import VIEW_TTL_S

GRACE_MS = 60_000
# offset: (key, body); an empty body is a tombstone
PRODUCED = [("k1", "v1"), ("k2", "v1"), ("k1", "v2"), ("k3", "v1"), (None, "x"), ("k2", ""), ("k1", "v3")]
PRODUCED += [("k4", "v1"), ("k3", ""), ("k5", "")]
EMPTY_PUT = {"kv.op": "put"}
"""The last message: a KV namespace's put of an empty value (tidemq_store/kv/record.py), which is no tombstone."""


def test_key_compaction_through_the_http_consume_api(spark, local_aws, open_test_store, tmp_path):
    prefix, bucket = f"k{uuid.uuid4().hex[:8]}", f"tier-{uuid.uuid4().hex[:12]}"
    settings = {
        "TIDEMQ_BACKEND": "serverless",
        "TIDEMQ_DYNAMODB_PREFIX": prefix,
        "TIDEMQ_EFS_PATH": str(tmp_path / "efs"),
        "TIDEMQ_TIER": "s3",
        "TIDEMQ_TIER_BUCKET": bucket,
        "TIDEMQ_EFS_HOT_MS": "0",  # what is uploaded is read from the tier
    }
    # this topic's (the broker's %TRACE% is a compacted topic too, its records as many as its flushes)
    args = ["--dynamodb-prefix", prefix, "--bucket", bucket, "--topic", "table"]
    with gateway_as_admin(tmp_path / "home", **local_aws.env, **settings) as url:
        http = signed_http()
        topic = f"{url}/v1/topics/table"
        created = http.post(
            f"{url}/v1/topics",
            json={
                "name": "table",
                "queues": 1,
                "retention_ms": None,
                "attributes": {"cleanup.policy": "COMPACTION", "compaction.tombstone_grace_ms": str(GRACE_MS)},
            },
        )
        assert created.status_code == 201, created.text
        sent = [{"body": body, "queue": 0, **({"keys": [key]} if key else {})} for key, body in PRODUCED]
        sent[-1]["properties"] = EMPTY_PUT
        produced = http.post(f"{topic}/messages", json={"messages": sent}).json()["messages"]
        ids = {m["offset"]: m["msg_id"] for m in produced}

        store = open_test_store(
            backend="serverless",
            efs_path=tmp_path / "efs",
            dynamodb_prefix=prefix,
            tier="s3",
            tier_bucket=bucket,
            efs_hot_ms=0,
        )
        store.maintenance().run()

        def read(offset: int, max_messages: int = 32) -> tuple[list[tuple[int, str]], int]:
            reply = http.get(f"{topic}/queues/0/messages", params={"offset": offset, "max_messages": max_messages})
            assert reply.status_code == 200, reply.text
            body = reply.json()
            for message in body["messages"]:
                assert message["msg_id"] == ids[message["offset"]]  # the same message, id included
            return [(m["offset"], m["body"]) for m in body["messages"]], body["next_offset"]

        def read_through(offset: int) -> list[tuple[int, str]]:
            """Everything from `offset` on, reading as a consumer does (a read may stop at a block's end)."""
            found, high = [], None
            while high is None or offset < high:
                messages, offset = read(offset)
                found += messages
                high = http.get(f"{topic}/queues/0/messages", params={"offset": offset}).json()["max_offset"]
            return found

        def soon(offset: int, expected: list[tuple[int, str]]) -> None:
            """A consumer reads `expected` from `offset` once the gateway lists the queue again (VIEW_TTL_S)."""
            deadline = time.monotonic() + 4 * VIEW_TTL_S
            while (found := read_through(offset)) != expected and time.monotonic() < deadline:
                time.sleep(0.2)
            assert found == expected

        assert read(0)[0] == [(offset, body) for offset, (_, body) in enumerate(PRODUCED)]  # before: everything

        now = int(time.time() * 1000)
        first = compaction.run(spark, compaction.arguments([*args, "--now-ms", str(now), "--grace-s", "0"]))
        assert (first["records_in"], first["records_out"], first["queues_switched"]) == (10, 6, 1)
        # newest per key (k1 at 6, k4 at 7, k5 at 9), the keyless 4, tombstones 5 and 8 within their grace
        soon(0, [(4, "x"), (5, ""), (6, "v3"), (7, "v1"), (8, ""), (9, "")])
        assert read(0, 1) == ([(4, "x")], 5)  # a removed offset reads as the next survivor, next_offset past it
        assert read(2, 2) == ([(4, "x"), (5, "")], 6)

        later = str(now + GRACE_MS + 1)
        second = compaction.run(spark, compaction.arguments([*args, "--now-ms", later, "--grace-s", "0"]))
        assert (second["records_in"], second["records_out"]) == (6, 4)
        soon(0, [(4, "x"), (6, "v3"), (7, "v1"), (9, "")])  # the tombstones went after their grace; the empty put stays
        assert read(5, 1) == ([(6, "v3")], 7)
        assert read(8) == ([(9, "")], 10)

        # uploads go on after the compacted front, and the binary consume reads across it
        more = http.post(f"{topic}/messages", json={"messages": [{"body": "v4", "keys": ["k1"], "queue": 0}]})
        assert more.json()["messages"][0]["offset"] == 10
        ids[10] = more.json()["messages"][0]["msg_id"]
        store.maintenance().run()
        assert read(7) == ([(7, "v1"), (9, "")], 10)  # a read stops where the compacted front does; the next goes on
        assert read(10) == ([(10, "v4")], 11)
        binary, offset = [], 0
        while offset < 11:
            reply = http.get(f"{topic}/queues/0/batch", params={"offset": offset})
            messages, offset, _, _ = codec.decode_consume(reply.content)
            binary += [(m.queue_offset, m.body) for m in messages]
        assert binary == [(4, b"x"), (6, b"v3"), (7, b"v1"), (9, b""), (10, b"v4")]
        again = compaction.run(spark, compaction.arguments([*args, "--now-ms", later, "--grace-s", "0"]))
        assert (again["records_in"], again["records_out"]) == (5, 4)
        soon(0, [(4, "x"), (7, "v1"), (9, ""), (10, "v4")])
