"""Pop consumption: receive + ack against offset-based consume of the same data, and what it costs in DynamoDB.

In process (`PopConsumption` over the embedded store and its RocksDB ledger): T threads receive batches of B and
ack each batch until the topic is drained. Over HTTP (a local gateway of its own, embedded, SYNC): the same N
messages consumed by T threads with the SDK's `Consumer` (by offset, batches of B, a share of the queues each),
then received and acked by T `SimpleConsumer`s on the binary route, two ways: each batch acked with the next
receive (`ack_and_receive`, one request a batch: `pop_msgs_per_s`, the SDK's quickest way), and each batch acked
in a request of its own (`ack_all`: `pop_separate_acks_msgs_per_s`). Serverless (in process, through the pop logic
of functions/logic/pop.py, over a moto server): the DynamoDB requests per message of the same two ways. Every
message is checked to come back once each way.

Prints one JSON line per run and one with the medians, each way, then the serverless line:
  {"bench": "pop", "where": "in_process", "in_process_pop_ack_msgs_per_s": ..., ...}
  {"bench": "pop", "where": "http", "backend": "embedded", "offset_msgs_per_s": ..., "pop_msgs_per_s": ...,
   "pop_separate_acks_msgs_per_s": ..., "pop_vs_offset": ..., "pop_separate_acks_vs_offset": ...}
  {"bench": "pop", "where": "in_process", "backend": "serverless", "dynamodb_requests_per_message": ...,
   "dynamodb_requests_per_message_separate_acks": ..., ...}

    python bench/pop.py                       # 100,000 x 1 KiB over 8 queues, 4 threads, batches of 32, 3 runs;
                                              # serverless: 20,000
    python bench/pop.py -n 20000 --repeat 1 --serverless-n 0
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import uuid
from pathlib import Path

from http_api import in_threads  # a sibling script: python puts bench/ on the path

from devtools.moto_server import LocalAws
from functions.logic import pop as logic
from servers.process import running_gateway
from shared.settings import get_settings
from tidemq import Admin, Consumer, HttpClient, OutgoingMessage, Producer, SimpleConsumer
from tidemq.credentials import read_profile
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, StoreConfig, TopicConfig, open_store
from tidemq_store.pop.receive import PopConsumption

ACKED = {"acked", "already_acked"}
"""An ack answers already_acked when a request it sent again (its answer lost) finds it made: acked all the same."""


def check_once(seen: list[int], how: str) -> None:
    if any(count != 1 for count in seen):
        raise SystemExit(f"{how}: {seen.count(0)} messages missing, {sum(c > 1 for c in seen)} seen more than once")


def body(i: int, size: int) -> bytes:
    return i.to_bytes(8, "big") + bytes(size - 8)


def in_process(args) -> float:
    """Messages a second received and acked in process."""
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-pop-") as home:
        store = open_store(StoreConfig(home=Path(home), flush_disk_type=args.flush))
        store.create_topic(TopicConfig(name="t", queues=args.queues))
        for first in range(0, args.n, 1000):
            store.put("t", [Message(body(i, args.size), queue=i % args.queues) for i in range(first, first + 1000)])
        pop, seen, lock = PopConsumption(store, store.pop_ledger), [0] * args.n, threading.Lock()

        def consumer(_: int) -> None:
            while batch := pop.receive("g", "t", args.batch, 60_000):
                pop.ack("g", "t", [p.receipt_handle for p in batch])
                with lock:
                    for p in batch:
                        seen[int.from_bytes(p.message.body[:8], "big")] += 1

        seconds = in_threads(args.threads, consumer)
        store.close()
    check_once(seen, "in process")
    return args.n / seconds


def over_http(connect, args) -> dict[str, float]:
    """Messages a second consumed by offset, received and acked in requests of their own, and received with the
    last batch's acks (`ack_and_receive`), of one topic over HTTP."""
    topic, groups = f"pop-{uuid.uuid4().hex[:8]}", [f"g-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with Admin(client=connect()) as admin:
        admin.create_topic(topic, queues=args.queues)
        for group in groups:
            admin.create_group(group)
    with Producer(topic, client=connect()) as producer:
        for first in range(0, args.n, 1000):
            producer.send_batch([OutgoingMessage(body(i, args.size)) for i in range(first, min(args.n, first + 1000))])

    def counted(how: str):
        seen, lock = [0] * args.n, threading.Lock()

        def count(bodies) -> None:
            with lock:
                for b in bodies:
                    seen[int.from_bytes(b[:8], "big")] += 1

        return seen, count

    seen_offset, count_offset = counted("offset")

    def offset_consumer(i: int) -> None:
        with Consumer(topic, client=connect(), queues=range(i, args.queues, args.threads)) as reader:
            while not reader.drained:
                count_offset([m.body for m in reader.poll(max_messages=args.batch)])

    offset_s = in_threads(args.threads, offset_consumer)
    seen_pop, count_pop = counted("pop")

    def pop_consumer(_: int) -> None:
        with SimpleConsumer(topic, groups[0], client=connect(), invisible_ms=60_000) as consumer:
            while batch := consumer.receive(args.batch):
                if set(consumer.ack_all(batch)) - ACKED:
                    raise SystemExit("an ack failed")
                count_pop([r.message.body for r in batch])

    pop_s = in_threads(args.threads, pop_consumer)
    seen_together, count_together = counted("pop, acks with the next receive")

    def acking_consumer(_: int) -> None:
        with SimpleConsumer(topic, groups[1], client=connect(), invisible_ms=60_000) as consumer:
            batch = consumer.receive(args.batch)
            while batch:
                count_together([r.message.body for r in batch])
                acks, batch = consumer.ack_and_receive(batch, args.batch)
                if set(acks) - ACKED:
                    raise SystemExit("an ack failed")

    together_s = in_threads(args.threads, acking_consumer)
    check_once(seen_offset, "by offset")
    check_once(seen_pop, "pop")
    check_once(seen_together, "pop, acks with the next receive")
    with Admin(client=connect()) as admin:
        admin.delete_topic(topic)
    return {
        "offset_msgs_per_s": args.n / offset_s,
        "pop_msgs_per_s": args.n / together_s,
        "pop_separate_acks_msgs_per_s": args.n / pop_s,
    }


def serverless(args) -> dict[str, float]:
    """DynamoDB requests per message received and acked, with the acks sent with the next receive and on their own,
    through the pop logic (functions/logic/pop.py: the group's check, the bounds) in process, over the serverless
    store on a moto server; and messages a second (a local moto server's pace, not DynamoDB's)."""
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-pop-serverless-") as home, LocalAws() as aws:
        os.environ.update(aws.env)
        config = StoreConfig(
            home=Path(home),
            backend="serverless",
            efs_path=Path(home) / "efs",
            dynamodb_prefix=f"pop{uuid.uuid4().hex[:8]}",
        )
        store, settings = open_store(config), get_settings()
        store.create_topic(TopicConfig(name="t", queues=args.queues))
        n = args.serverless_n
        for first in range(0, n, 1000):
            last = min(n, first + 1000)
            store.put("t", [Message(body(i, args.size), queue=i % args.queues) for i in range(first, last)])
        results = {}
        for way in ("together", "separate"):
            group, seen, lock = f"g-{way}", [0] * n, threading.Lock()
            store.create_group(GroupConfig(name=group))

            def consumer(_: int, group=group, seen=seen, lock=lock, way=way) -> None:
                handles: list[str] = []
                while True:
                    if way == "together":
                        acks, batch = logic.ack_and_receive(
                            store, settings, group, "t", handles, args.batch, 60_000, 0, None
                        )
                    else:
                        batch = logic.receive(store, settings, group, "t", args.batch, 60_000, 0, None)
                        acks = (
                            logic.ack(store, settings, group, "t", [p.receipt_handle for p in batch]) if batch else []
                        )
                    if set(acks) - ACKED:
                        raise SystemExit(f"an ack failed: {acks}")
                    with lock:
                        for p in batch:
                            seen[int.from_bytes(p.message.body[:8], "big")] += 1
                    handles = [p.receipt_handle for p in batch]
                    if not batch:
                        return

            before = store.requests
            seconds = in_threads(args.threads, consumer)
            check_once(seen, f"serverless pop, acks {way}")
            results[way] = (store.requests - before, n / seconds)
        store.close()
    together, separate = results["together"], results["separate"]
    return {
        "dynamodb_requests_per_message": round(together[0] / n, 4),
        "dynamodb_requests_per_message_separate_acks": round(separate[0] / n, 4),
        "pop_msgs_per_s": round(together[1]),
        "pop_separate_acks_msgs_per_s": round(separate[1]),
        "messages": n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="messages per run")
    parser.add_argument("-s", "--size", type=int, default=1024, help="payload bytes (>= 8)")
    parser.add_argument("-q", "--queues", type=int, default=8)
    parser.add_argument("-t", "--threads", type=int, default=4, help="consumer threads, one connection each")
    parser.add_argument("-b", "--batch", type=int, default=32, help="messages per receive (and per offset read)")
    parser.add_argument("--flush", choices=["SYNC", "ASYNC"], default="SYNC")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--serverless-n", type=int, default=20_000, help="messages of the serverless run (moto; 0: none)"
    )
    args = parser.parse_args()
    if args.size < 8:
        parser.error("--size must be at least 8 (the sequence number)")
    settings = {
        "messages": args.n,
        "size": args.size,
        "queues": args.queues,
        "threads": args.threads,
        "batch": args.batch,
        "flush": args.flush,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    local = []
    for run in range(1, args.repeat + 1):
        local.append(round(in_process(args)))
        line = {"bench": "pop", "where": "in_process", "run": run, "in_process_pop_ack_msgs_per_s": local[-1]}
        print(json.dumps({**line, **settings}), flush=True)
    median = {"in_process_pop_ack_msgs_per_s": round(statistics.median(local))}
    print(json.dumps({"bench": "pop", "where": "in_process", "run": "median", **median, **settings}), flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-bench-pop-http-") as home,
        running_gateway(Path(home), TIDEMQ_FLUSH_DISK_TYPE=args.flush) as url,
    ):
        credentials = read_profile(Path(home) / "credentials")
        results = []
        for run in range(1, args.repeat + 1):
            rates = over_http(lambda: HttpClient(url, credentials=credentials), args)
            results.append({key: round(rate) for key, rate in rates.items()})
            line = {"bench": "pop", "where": "http", "backend": "embedded", "run": run, **results[-1]}
            print(json.dumps({**line, **settings}), flush=True)
    medians = {key: round(statistics.median(r[key] for r in results)) for key in results[0]}
    ratios = {
        "pop_vs_offset": round(medians["pop_msgs_per_s"] / medians["offset_msgs_per_s"], 3),
        "pop_separate_acks_vs_offset": round(medians["pop_separate_acks_msgs_per_s"] / medians["offset_msgs_per_s"], 3),
    }
    line = {"bench": "pop", "where": "http", "backend": "embedded", "run": "median", **medians, **ratios}
    print(json.dumps({**line, **settings}), flush=True)
    if args.serverless_n:
        line = {"bench": "pop", "where": "in_process", "backend": "serverless", "local_aws": "moto", **serverless(args)}
        print(json.dumps({**settings, **line}), flush=True)


if __name__ == "__main__":
    main()
