"""Delay and timer messages: how late they are delivered, and what pending ones cost the gateway's memory.

1. Accuracy, embedded (a local gateway of its own, SYNC): N timers due at a steady rate over W seconds (all sent
   first, 100 to a put), consumed as a user would: the SDK's `Consumer` long-polling the topic's queue over HTTP.
   Lateness is when the consumer received a message minus its due time (`TIMER_DELIVER_MS`); `early` counts those
   received before it (or stored before it).
2. Memory, embedded: a fresh gateway's RSS, then M timers sent due an hour later, then its RSS again:
   `rss_growth_mb_per_million_pending` is the growth scaled to a million (the pending timers are on disk).
3. Serverless (a gateway of its own over a moto server it starts, which takes tens of requests a second where
   DynamoDB takes thousands: so a few timers a second): N_s timers due over W_s seconds, two ways: with
   a long-polling consumer (lateness: received minus due), and with no consumer at all, where only the maintenance
   function's timers job moves them (lateness: the store time on their queue minus due; the job runs every
   TIDEMQ_TIMER_JOB_INTERVAL_S, 10 s inside `make run`, every minute in AWS).

Prints one JSON line per part:
  {"bench": "timer", "backend": "embedded", "timers": ..., "window_s": ..., "lateness_p50_ms": ...,
   "lateness_p99_ms": ..., "lateness_max_ms": ..., "early": ...}
  {"bench": "timer", "backend": "embedded", "pending": ..., "rss_before_mb": ..., "rss_after_mb": ...,
   "rss_growth_mb_per_million_pending": ...}
  {"bench": "timer", "backend": "serverless", "consumer": "long_poll" | "none", "lateness_p50_ms": ..., ...}

    python bench/timer.py --lead-s 90                       # 100,000 over 60 s; 1,000,000 pending; serverless 300
    python bench/timer.py -n 10000 --window-s 10 --pending 100000 --serverless-n 200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servers.process import free_port, start_server, stop_server, wait_healthy
from tidemq import Admin, Consumer, HttpClient, Producer
from tidemq.credentials import read_profile
from tidemq.producer import outgoing
from tidemq_protocol.clock import now_ms
from tidemq_protocol.record import TIMER_DELIVER_MS

PUT = 100  # timers to a put (the most one put may hold)
HOUR_MS = 3_600_000


@contextmanager
def gateway(home: Path, **settings: str) -> Iterator[tuple[int, HttpClient]]:
    """A local gateway on `home` (its pid, and a client signing as its first super user)."""
    port = free_port()
    env = {**os.environ, "TIDEMQ_PORT": str(port), "TIDEMQ_HOME": str(home), **settings}
    home.mkdir(parents=True, exist_ok=True)
    server = start_server(["-m", "servers.gateway"], env, home / "gateway.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(server, url, home / "gateway.log")
        with HttpClient(url, credentials=read_profile(home / "credentials"), timeout_s=120) as client:
            yield server.pid, client
    finally:
        stop_server(server)


def rss_mb(pid: int) -> float:
    """The resident set of process `pid`, in MiB (/proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def send(client: HttpClient, topic: str, dues: list[int]) -> None:
    """One timer per due time, 100 to a put, pipelined a few at a time."""
    batches = [
        [
            outgoing(f"timer {first + i}".encode(), queue=0, delivery_time=due)
            for i, due in enumerate(dues[first : first + PUT])
        ]
        for first in range(0, len(dues), PUT)
    ]
    producer = Producer(topic, client=client)
    for _ in producer.send_pipelined(batches, in_flight=4):
        pass


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def lateness_line(lateness: list[float], early: int, **fields: object) -> dict:
    return {
        "bench": "timer",
        **fields,
        "received": len(lateness),
        "lateness_p50_ms": round(statistics.median(lateness), 1),
        "lateness_p90_ms": round(percentile(lateness, 0.90), 1),
        "lateness_p99_ms": round(percentile(lateness, 0.99), 1),
        "lateness_max_ms": round(max(lateness), 1),
        "early": early,
    }


def consume(client: HttpClient, topic: str, count: int, deadline_s: float) -> tuple[list[float], int]:
    """Long-poll the topic's queue 0 until `count` messages came: each one's lateness (received minus due, ms) and
    how many came early (received, or stored, before they were due)."""
    lateness, early = [], 0
    end = time.monotonic() + deadline_s
    with Consumer(topic, client=client, queues=[0]) as consumer:
        while len(lateness) < count and time.monotonic() < end:
            messages = consumer.poll(wait_ms=1000)
            received = time.time() * 1000
            for message in messages:
                due = int(message.properties[TIMER_DELIVER_MS])
                lateness.append(received - due)
                early += received < due or message.store_timestamp < due
    if len(lateness) < count:
        raise SystemExit(f"{topic}: {len(lateness)} of {count} timers received within {deadline_s:.0f} s")
    return lateness, early


def accuracy(args, home: Path) -> dict:
    with gateway(home / "accuracy") as (_, client):
        Admin(client=client).create_topic("timers", queues=1, message_type="DELAY")
        start = now_ms() + int(args.lead_s * 1000)
        step = args.window_s * 1000 / args.n
        dues = [start + int(i * step) for i in range(args.n)]
        send(client, "timers", dues)
        if now_ms() > start - 1000:
            raise SystemExit("sending the timers took longer than --lead-s: give more")
        lateness, early = consume(client, "timers", args.n, args.lead_s + args.window_s + 120)
    return lateness_line(lateness, early, backend="embedded", timers=args.n, window_s=args.window_s)


def memory(args, home: Path) -> dict:
    with gateway(home / "memory") as (pid, client):
        Admin(client=client).create_topic("pending", queues=1, message_type="DELAY")
        send(client, "pending", [now_ms() + HOUR_MS] * 1000)  # every code path warm, first
        time.sleep(1)
        before = rss_mb(pid)
        send(client, "pending", [now_ms() + HOUR_MS + i for i in range(args.pending)])
        time.sleep(5)  # memtables flushed, compactions settled
        after = rss_mb(pid)
    return {
        "bench": "timer",
        "backend": "embedded",
        "pending": args.pending,
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "rss_growth_mb_per_million_pending": round((after - before) * 1_000_000 / args.pending, 1),
    }


def serverless(args, home: Path) -> list[dict]:
    lines = []
    settings = {"TIDEMQ_BACKEND": "serverless", "TIDEMQ_LOCAL_AWS": "moto"}
    with gateway(home / "serverless", **settings) as (_, client):
        for consumer in ("long_poll", "none"):
            topic = f"timers-{consumer.replace('_', '-')}"
            Admin(client=client).create_topic(topic, queues=1, message_type="DELAY")
            start, step = now_ms() + int(args.lead_s * 1000), args.serverless_window_s * 1000 / args.serverless_n
            dues = [start + int(i * step) for i in range(args.serverless_n)]
            send(client, topic, dues)
            if now_ms() > start - 1000:
                raise SystemExit("sending the serverless timers took longer than --lead-s: give more")
            if consumer == "long_poll":
                wait_s = args.lead_s + args.serverless_window_s + 300
                lateness, early = consume(client, topic, args.serverless_n, wait_s)
            else:
                lateness, early = moved_by_the_job(client, topic, args)
            line = lateness_line(lateness, early, backend="serverless", consumer=consumer, timers=args.serverless_n)
            lines.append(line | {"window_s": args.serverless_window_s, "job_interval_s": 10.0, "local_aws": "moto"})
    return lines


def moved_by_the_job(client: HttpClient, topic: str, args) -> tuple[list[float], int]:
    """With nobody reading, wait until the job has moved every timer (the queue's end, from `describe`, reads no
    message), then read them all: each one's store time on its queue minus its due time."""
    admin, end = Admin(client=client), time.monotonic() + args.serverless_window_s + 600
    while admin.describe_topic(topic).queue_offsets[0].max_offset < args.serverless_n:
        if time.monotonic() > end:
            raise SystemExit(f"{topic}: the timers job did not move every timer")
        time.sleep(1)
    lateness, early = [], 0
    with Consumer(topic, client=client, queues=[0]) as consumer:
        while len(lateness) < args.serverless_n:
            for message in consumer.poll():
                due = int(message.properties[TIMER_DELIVER_MS])
                lateness.append(message.store_timestamp - due)
                early += message.store_timestamp < due
    return lateness, early


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=100_000, help="timers of the accuracy run")
    parser.add_argument("--window-s", type=float, default=60.0, help="they come due over this long")
    parser.add_argument(
        "--lead-s", type=float, default=30.0, help="the first is due this long after the sending starts"
    )
    parser.add_argument("--pending", type=int, default=1_000_000, help="timers pending an hour ahead (0: skip)")
    parser.add_argument("--serverless-n", type=int, default=300, help="timers of each serverless run (0: skip)")
    parser.add_argument("--serverless-window-s", type=float, default=30.0)
    args = parser.parse_args()
    context = {"python": platform.python_version(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-timer-") as temporary:
        home = Path(temporary)
        if args.n:
            print(json.dumps(accuracy(args, home) | context), flush=True)
        if args.pending:
            print(json.dumps(memory(args, home) | context), flush=True)
        if args.serverless_n:
            for line in serverless(args, home):
                print(json.dumps(line | context), flush=True)


if __name__ == "__main__":
    main()
