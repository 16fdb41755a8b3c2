"""The migration job on real PySpark local[2] against the moto server: a serverless backlog goes to S3 queue by
queue while producers write and the scheduled maintenance run runs; every message is then read once, and what the
tier holds is read from the tier, byte for byte the same."""

from __future__ import annotations

import threading

from spark_emr.jobs import migrate
from spark_emr.tier import QueueRef, TierLocation, queue_messages
from tidemq_protocol.message import Message
from tidemq_store import TopicConfig

from ..tier_reads import read_all


def test_a_backlog_moves_to_s3_while_producers_write_and_maintenance_runs(spark, serverless_backend, open_test_store):
    store, args = serverless_backend
    bucket = args[args.index("--bucket") + 1]
    store.create_topic(TopicConfig(name="backlog", queues=4))
    acknowledged: dict[int, list[bytes]] = {q: [] for q in range(4)}
    for b in range(30):  # the backlog: nothing uploaded yet
        bodies = [b"backlog %d-%d" % (b, i) for i in range(40)]
        results = store.put("backlog", [Message(body, queue=i % 4) for i, body in enumerate(bodies)])
        for result, body in zip(results, bodies, strict=True):
            acknowledged[result.queue].append(body)

    stop, errors = threading.Event(), []
    writer = open_test_store(**store.config.model_dump())  # another process's view, as Lambda invocations are

    def produce() -> None:
        n = 0
        while not stop.is_set():
            body = b"live %d" % n
            acknowledged[writer.put("backlog", [Message(body, queue=n % 4)])[0].queue].append(body)
            n += 1

    def scheduled() -> None:
        while not stop.is_set():
            try:
                writer.maintenance().run()
            except Exception as error:  # reported below, in the test's thread
                errors.append(error)
            stop.wait(0.2)

    threads = [threading.Thread(target=produce), threading.Thread(target=scheduled)]
    for thread in threads:
        thread.start()
    try:
        summary = migrate.run(spark, migrate.arguments([*args, "--efs-path", str(store.config.efs_path)]))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == [] and summary["failed"] == [] and summary["records_out"] > 0

    location = TierLocation.here(bucket, "tidemq")
    for queue in range(4):
        stored = read_all(store, "backlog", queue)
        assert [body for _, _, body, *_ in stored] == acknowledged[queue]  # each message once, in order
        status = store.tier_status("backlog")[queue]
        assert status.cold_max_offset >= 300  # the whole backlog is in S3
        cold = list(queue_messages(location, QueueRef("backlog", queue)))
        assert [(m.msg_id, m.queue_offset, m.body) for m in cold] == [
            (msg_id, offset, body) for msg_id, offset, body, *_ in stored[: len(cold)]
        ]
