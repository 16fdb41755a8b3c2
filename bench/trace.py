"""Message trace's cost: produce and consume throughput with trace on against trace off, in the same run.

In process, through the logic layer every protocol uses (functions/logic/produce.py and pop.py, so the broker
records its trace events exactly as it does behind HTTP and gRPC), over a fresh embedded store a run (SYNC by
default): two topics, one traced and one opted out (attribute `trace.enabled=false`; which one changes from run to
run), each given the same N messages by T producer threads in batches of P, then drained by T pop consumers
receiving batches of B and acking each batch with the next receive. Each phase is cut into SLICES slices, a slice
of one topic then one of the other, the order changing each time: this machine is shared, and its load changes
within seconds (two untraced topics, timed one phase after the other, differed by up to a quarter). A traced slice
ends only when its trace records are put (`TraceRecorder.flush`): the trace's whole cost is in it, with one put a
slice where a server makes one per TIDEMQ_TRACE_FLUSH_MS. Without HTTP in the way, the trace's share of the work
is the largest it can be. CPU seconds are reported too: the process's in each side's slices, and the trace
writer's own. So is the time a traced slice's closing flush waits (its wall time less its CPU: under SYNC, the
fsync of its put, which a server's flusher thread waits beside the requests rather than after them), and the traced
rates without that wait (`*_flushing_beside`): the trace's CPU stays in them.

Prints one JSON line per run and phase, then the medians and their ratios:
  {"bench": "trace", "run": 1, "trace": "on", "produce_msgs_per_s": ..., "consume_msgs_per_s": ..., ...}
  {"bench": "trace", "result": "trace_on_vs_off", "produce_on_vs_off": ..., "consume_on_vs_off": ..., ...}

    python bench/trace.py                       # 50,000 x 1 KiB, 8 queues, 4 threads, batches of 100 / 32, 5 runs
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
from dataclasses import dataclass, field
from pathlib import Path

from http_api import in_threads  # a sibling script: python puts bench/ on the path

from functions.logic import pop, produce, trace
from shared.settings import Settings, get_settings
from tidemq_protocol.codec import ProduceFrame
from tidemq_protocol.errors import TopicNotFound
from tidemq_protocol.message import Message
from tidemq_store import GroupConfig, StoreConfig, TopicConfig, open_store

SLICES = 10
"""Slices each phase of a run is cut into, alternating traced and untraced."""


class Quiet:
    """A push notifier with no push groups to wake."""

    def messages_stored(self, topic: str) -> None:
        pass

    def subscription_changed(self, group: str, topic: str | None) -> None:
        pass


def body(i: int, size: int) -> bytes:
    return i.to_bytes(8, "big") + bytes(size - 8)


@dataclass
class Side:
    """One topic of a run, traced or not: its name, and the seconds and CPU seconds its slices took."""

    topic: str
    traced: bool
    seconds: dict[str, float] = field(default_factory=lambda: {"produce": 0.0, "consume": 0.0})
    cpu: dict[str, float] = field(default_factory=lambda: {"produce": 0.0, "consume": 0.0})
    trace_cpu: dict[str, float] = field(default_factory=lambda: {"produce": 0.0, "consume": 0.0})
    flush_wait: dict[str, float] = field(default_factory=lambda: {"produce": 0.0, "consume": 0.0})


def timed(store, side: Side, what: str, work) -> None:
    """Run one slice of `work` for `side`; a traced slice ends when its trace records are put, so the trace's
    whole cost is in it (and none spills into the untraced slice after it)."""
    writer = trace.recorder(store)
    cpu, busy, began = time.process_time(), writer.busy_s, time.perf_counter()
    work()
    if side.traced:
        flushing, busy_before = time.perf_counter(), writer.busy_s
        writer.flush()
        # the flush's wall time but its own CPU: waiting (for the fsync of its put, under SYNC), which a server's
        # flusher thread does beside the requests, not after them
        side.flush_wait[what] += (time.perf_counter() - flushing) - (writer.busy_s - busy_before)
    side.seconds[what] += time.perf_counter() - began
    side.cpu[what] += time.process_time() - cpu
    side.trace_cpu[what] += writer.busy_s - busy


def produce_slice(store, side: Side, first: int, count: int, args) -> None:
    """`count` messages from number `first` stored on the side's topic by `args.threads` producers."""
    share = count // args.threads

    def producer(index: int) -> None:
        start = first + index * share
        for at in range(start, start + share, args.produce_batch):
            last = min(at + args.produce_batch, start + share)
            frames = [ProduceFrame(Message(body(i, args.size)), None, None) for i in range(at, last)]
            produce.produce_frames(store, side.topic, frames, Quiet())

    in_threads(args.threads, producer)


def consume_slice(store, settings: Settings, side: Side, count: int | None, seen: list[int], args) -> None:
    """About `count` messages (None: all there are) received and acked from the side's topic by `args.threads` pop
    consumers."""
    lock = threading.Lock()

    def consumer(_: int) -> None:
        handles: list[str] = []
        taken = 0
        while count is None or taken < count // args.threads:
            _, batch = pop.ack_and_receive(store, settings, "g", side.topic, handles, args.batch, 60_000, 0, None)
            handles = [delivery.receipt_handle for delivery in batch]
            if not batch:
                return
            taken += len(batch)
            with lock:
                for delivery in batch:
                    seen[int.from_bytes(delivery.message.body[:8], "big")] += 1
        pop.ack(store, settings, "g", side.topic, handles)

    in_threads(args.threads, consumer)


def run(args, settings: Settings, number: int) -> list[dict]:
    """One run over a fresh store: topics `a` and `b`, one of them opted out of trace (which one changes from run to
    run), each given and then drained of the same messages in SLICES slices, a slice of one then of the other, the
    order changing from slice to slice: a machine whose load changes meanwhile loads both alike."""
    traced_topic = "a" if number % 2 else "b"
    sides = {"on": Side(traced_topic, True), "off": Side("b" if traced_topic == "a" else "a", False)}
    n = args.n // (SLICES * args.threads) * SLICES * args.threads
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-trace-") as home:
        store = open_store(StoreConfig(home=Path(home), flush_disk_type=args.flush))
        store.create_topic(TopicConfig(name=sides["on"].topic, queues=args.queues))
        opted_out = {"trace.enabled": "false"}
        store.create_topic(TopicConfig(name=sides["off"].topic, queues=args.queues, attributes=opted_out))
        store.create_group(GroupConfig(name="g"))
        for index in range(SLICES):
            for side in (sides["on"], sides["off"])[:: 1 if index % 2 else -1]:
                first = index * (n // SLICES)
                timed(store, side, "produce", lambda: produce_slice(store, side, first, n // SLICES, args))  # noqa: B023
        seen = {state: [0] * n for state in sides}
        for index in range(SLICES):
            for state in ("on", "off")[:: 1 if index % 2 else -1]:
                count = None if index == SLICES - 1 else n // SLICES
                work = lambda: consume_slice(store, settings, sides[state], count, seen[state], args)  # noqa: B023, E731
                timed(store, sides[state], "consume", work)
        for state, counts in seen.items():
            if any(c != 1 for c in counts):
                raise SystemExit(f"{state}: {counts.count(0)} messages missing, {sum(c > 1 for c in counts)} twice")
        try:
            records = store.queue_offsets(trace.TRACE_TOPIC)[0].max_offset
        except TopicNotFound:  # TIDEMQ_TRACE_ENABLED=false: nothing was traced
            records = 0
        store.close()
    lines = []
    for state, side in sides.items():
        line = {
            "bench": "trace",
            "run": number,
            "trace": state,
            "topic": side.topic,
            "produce_msgs_per_s": round(n / side.seconds["produce"]),
            "consume_msgs_per_s": round(n / side.seconds["consume"]),
            "produce_cpu_s": round(side.cpu["produce"], 3),
            "consume_cpu_s": round(side.cpu["consume"], 3),
        }
        if side.traced:
            line |= {
                "trace_records": records,
                "produce_trace_cpu_s": round(side.trace_cpu["produce"], 3),
                "consume_trace_cpu_s": round(side.trace_cpu["consume"], 3),
                "produce_flush_wait_s": round(side.flush_wait["produce"], 4),
                "consume_flush_wait_s": round(side.flush_wait["consume"], 4),
                "produce_msgs_per_s_flushing_beside": round(n / (side.seconds["produce"] - side.flush_wait["produce"])),
                "consume_msgs_per_s_flushing_beside": round(n / (side.seconds["consume"] - side.flush_wait["consume"])),
            }
        print(json.dumps(line), flush=True)
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=50_000, help="messages per topic and run")
    parser.add_argument("-s", "--size", type=int, default=1024, help="payload bytes (>= 8)")
    parser.add_argument("-q", "--queues", type=int, default=8)
    parser.add_argument("-t", "--threads", type=int, default=4, help="producer and consumer threads")
    parser.add_argument("-p", "--produce-batch", type=int, default=100, help="messages per produce")
    parser.add_argument("-b", "--batch", type=int, default=32, help="messages per receive")
    parser.add_argument("--flush", choices=["SYNC", "ASYNC"], default="SYNC")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    settings = get_settings()
    lines = [line for number in range(1, args.repeat + 1) for line in run(args, settings, number)]

    def median(trace_state: str, what: str) -> float:
        return statistics.median(line[what] for line in lines if line["trace"] == trace_state)

    produce_on, produce_off = median("on", "produce_msgs_per_s"), median("off", "produce_msgs_per_s")
    consume_on, consume_off = median("on", "consume_msgs_per_s"), median("off", "consume_msgs_per_s")
    traced = [line for line in lines if line["trace"] == "on"]
    produce_beside = median("on", "produce_msgs_per_s_flushing_beside")
    consume_beside = median("on", "consume_msgs_per_s_flushing_beside")

    def share(what: str) -> float:
        """The trace writer's CPU over the traced phases' CPU, all runs together."""
        return sum(line[f"{what}_trace_cpu_s"] for line in traced) / sum(line[f"{what}_cpu_s"] for line in traced)

    print(
        json.dumps(
            {
                "bench": "trace",
                "result": "trace_on_vs_off",
                "produce_on_vs_off": round(produce_on / produce_off, 3),
                "consume_on_vs_off": round(consume_on / consume_off, 3),
                "produce_on_vs_off_flushing_beside": round(produce_beside / produce_off, 3),
                "consume_on_vs_off_flushing_beside": round(consume_beside / consume_off, 3),
                "produce_trace_cpu_share": round(share("produce"), 3),
                "consume_trace_cpu_share": round(share("consume"), 3),
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
