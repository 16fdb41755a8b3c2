"""Message trace's cost: produce and consume throughput with trace on against trace off, in the same run.

In process, through the logic layer every protocol uses (functions/logic/produce.py and pop.py, so the broker
records its trace events exactly as it does behind HTTP and gRPC), over one embedded store (SYNC by default): two
topics, `on` (traced) and `off` (attribute `trace.enabled=false`), each given the same N messages by T producer
threads in batches of P, then drained by T pop consumers receiving batches of B and acking each batch with the next
receive. Runs alternate on and off; an `on` phase ends only when its trace records are put (`TraceRecorder.flush`),
so the trace's whole cost is counted in it. Without HTTP in the way, the trace's share of the work is the largest
it can be: the ratio over HTTP is closer to 1.

Prints one JSON line per run and phase, then the medians and their ratios:
  {"bench": "trace", "run": 1, "trace": "on", "produce_msgs_per_s": ..., "consume_msgs_per_s": ..., ...}
  {"bench": "trace", "result": "trace_on_vs_off", "produce_on_vs_off": ..., "consume_on_vs_off": ..., ...}

    python bench/trace.py                       # 20,000 x 1 KiB, 8 queues, 4 threads, batches of 100 / 32, 7 runs
    python bench/trace.py -n 10000 --repeat 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

from http_api import in_threads  # a sibling script: python puts bench/ on the path

from functions.logic import pop, produce, trace
from shared.settings import Settings, get_settings
from tidemq_protocol.codec import ProduceFrame
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, StoreConfig, TopicConfig, open_store


class Quiet:
    """A push notifier with no push groups to wake."""

    def messages_stored(self, topic: str) -> None:
        pass

    def subscription_changed(self, group: str, topic: str | None) -> None:
        pass


def body(i: int, size: int) -> bytes:
    return i.to_bytes(8, "big") + bytes(size - 8)


def produce_phase(store, topic: str, args) -> float:
    """Messages a second stored on `topic` by `args.threads` producers."""
    share = args.n // args.threads

    def producer(index: int) -> None:
        for first in range(index * share, (index + 1) * share, args.produce_batch):
            last = min(first + args.produce_batch, (index + 1) * share)
            frames = [ProduceFrame(Message(body(i, args.size)), None, None) for i in range(first, last)]
            produce.produce_frames(store, topic, frames, Quiet())

    seconds = in_threads(args.threads, producer) + flushed(store, topic)
    return share * args.threads / seconds


def consume_phase(store, settings: Settings, topic: str, args) -> float:
    """Messages a second received and acked from `topic` by `args.threads` pop consumers (each seen once)."""
    seen, lock = [0] * (args.n // args.threads * args.threads), threading.Lock()

    def consumer(_: int) -> None:
        handles: list[str] = []
        while True:
            _, batch = pop.ack_and_receive(store, settings, "g", topic, handles, args.batch, 60_000, 0, None)
            if not batch:
                return
            handles = [delivery.receipt_handle for delivery in batch]
            with lock:
                for delivery in batch:
                    seen[int.from_bytes(delivery.message.body[:8], "big")] += 1

    seconds = in_threads(args.threads, consumer) + flushed(store, topic)
    if any(count != 1 for count in seen):
        raise SystemExit(f"{topic}: {seen.count(0)} messages missing, {sum(c > 1 for c in seen)} seen twice or more")
    return len(seen) / seconds


def flushed(store, topic: str) -> float:
    """Seconds to put the trace records still waiting (none for the untraced topic)."""
    if topic != "on":
        return 0.0
    began = time.perf_counter()
    trace.recorder(store).flush()
    return time.perf_counter() - began


def run(args, settings: Settings, number: int) -> list[dict]:
    lines = []
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-trace-") as home:
        store = open_store(StoreConfig(home=Path(home), flush_disk_type=args.flush))
        store.create_topic(TopicConfig(name="on", queues=args.queues))
        store.create_topic(TopicConfig(name="off", queues=args.queues, attributes={"trace.enabled": "false"}))
        store.create_group(GroupConfig(name="g"))
        order = ("on", "off") if number % 2 else ("off", "on")  # neither always goes first
        results = {topic: {"produce": produce_phase(store, topic, args)} for topic in order}
        for topic in order:
            results[topic]["consume"] = consume_phase(store, settings, topic, args)
        records = store.queue_offsets(trace.TRACE_TOPIC)[0].max_offset
        store.close()
    for topic in ("on", "off"):
        line = {
            "bench": "trace",
            "run": number,
            "trace": topic,
            "produce_msgs_per_s": round(results[topic]["produce"]),
            "consume_msgs_per_s": round(results[topic]["consume"]),
        }
        if topic == "on":
            line["trace_records"] = records
        print(json.dumps(line), flush=True)
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20_000, help="messages per topic and run")
    parser.add_argument("-s", "--size", type=int, default=1024, help="payload bytes (>= 8)")
    parser.add_argument("-q", "--queues", type=int, default=8)
    parser.add_argument("-t", "--threads", type=int, default=4, help="producer and consumer threads")
    parser.add_argument("-p", "--produce-batch", type=int, default=100, help="messages per produce")
    parser.add_argument("-b", "--batch", type=int, default=32, help="messages per receive")
    parser.add_argument("--flush", choices=["SYNC", "ASYNC"], default="SYNC")
    parser.add_argument("--repeat", type=int, default=7, help="runs (a loaded machine needs many for a median)")
    args = parser.parse_args()
    settings = get_settings()
    lines = [line for number in range(1, args.repeat + 1) for line in run(args, settings, number)]

    def median(trace_state: str, what: str) -> float:
        return statistics.median(line[what] for line in lines if line["trace"] == trace_state)

    produce_on, produce_off = median("on", "produce_msgs_per_s"), median("off", "produce_msgs_per_s")
    consume_on, consume_off = median("on", "consume_msgs_per_s"), median("off", "consume_msgs_per_s")
    print(
        json.dumps(
            {
                "bench": "trace",
                "result": "trace_on_vs_off",
                "produce_on_vs_off": round(produce_on / produce_off, 3),
                "consume_on_vs_off": round(consume_on / consume_off, 3),
                "produce_msgs_per_s": {"on": round(produce_on), "off": round(produce_off)},
                "consume_msgs_per_s": {"on": round(consume_on), "off": round(consume_off)},
                "n": args.n,
                "size": args.size,
                "queues": args.queues,
                "threads": args.threads,
                "produce_batch": args.produce_batch,
                "batch": args.batch,
                "flush": args.flush,
                "trace_flush_ms": settings.trace_flush_ms,
                "repeat": args.repeat,
                "date": dt.date.today().isoformat(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
