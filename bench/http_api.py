"""TideMQ over HTTP, through the Python SDK: what a client on this machine gets from the local gateway.

Produces N x S-byte messages in binary batches of B to a topic of Q queues from P producer threads, consumes
them all back with C consumer threads (each reading its share of the queues), checks that every message came
back once, then times L single synchronous sends (`Producer.send`, JSON, one message each) after W warm-ups.

Prints one JSON line per run ("run": 1..R) and one with the medians ("run": "median"):
  {"bench": "http", "produce_msgs_per_s": ..., "consume_msgs_per_s": ..., "send_p50_ms": ..., "send_p99_ms": ...}
With --auth it runs two gateways, one with authentication (every request signed and checked, the default) and
one with TIDEMQ_AUTH=off (nothing signed), the runs alternating, and adds the ratios of the medians:
  {"bench": "http_auth_vs_none", "produce_ratio": ..., "consume_ratio": ..., "send_p50_ratio": ...}

    python bench/http_api.py                          # starts its own gateway (SYNC) on a free port in a temp dir
    python bench/http_api.py -n 100000 --repeat 1 --flush ASYNC
    python bench/http_api.py --auth                   # with and without authentication, in one run
    python bench/http_api.py --url http://127.0.0.1:8080      # a running server (`make run`; the SDK finds credentials)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from servers.process import running_gateway
from tidemq import Admin, Consumer, HttpClient, OutgoingMessage, Producer
from tidemq.credentials import read_profile


def make_payloads(n: int, size: int) -> list[bytes]:
    """n distinct payloads: an 8-byte sequence number, then the same random filler (as the peer harness)."""
    filler = random.Random(1).randbytes(max(0, size - 8))
    return [i.to_bytes(8, "big") + filler for i in range(n)]


def in_threads(count: int, work) -> float:
    """Run work(i) for i in range(count), each in its own thread, started together; return seconds."""
    start = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        start.wait()
        try:
            work(i)
        except BaseException as error:  # re-raised below, in the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - began


class Server(NamedTuple):
    """A server to benchmark, and how to make a client (one connection) for it."""

    url: str
    connect: Callable[[], HttpClient]


def produce(server: Server, topic: str, payloads: list[bytes], args) -> float:
    batches = [payloads[first : first + args.batch] for first in range(0, len(payloads), args.batch)]

    def producer(i: int) -> None:
        with Producer(topic, client=server.connect()) as sender:
            for batch in batches[i :: args.producers]:
                sender.send_batch([OutgoingMessage(body) for body in batch])

    return in_threads(args.producers, producer)


def consume(server: Server, topic: str, n: int, args) -> tuple[float, list[int]]:
    """Read every queue to its end; return the seconds taken and how often each payload was seen."""
    seen = [0] * n
    lock = threading.Lock()

    def consumer(i: int) -> None:
        queues = range(i, args.queues, args.consumers)
        with Consumer(topic, client=server.connect(), queues=queues) as reader:
            while not reader.drained:
                messages = reader.poll(max_messages=args.consume_batch)
                with lock:
                    for message in messages:
                        seen[int.from_bytes(message.body[:8], "big")] += 1

    return in_threads(min(args.consumers, args.queues), consumer), seen


def send_latencies_ms(server: Server, topic: str, payload: bytes, args) -> list[float]:
    latencies = []
    with Producer(topic, client=server.connect()) as sender:
        for i in range(args.lat_warmup + args.lat_count):
            began = time.perf_counter_ns()
            sender.send(payload)
            if i >= args.lat_warmup:
                latencies.append((time.perf_counter_ns() - began) / 1e6)
    return sorted(latencies)


def percentile(ordered: list[float], q: float) -> float:
    """Nearest rank, as the peer harness computes it."""
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def run_once(server: Server, payloads: list[bytes], args) -> dict:
    suffix = uuid.uuid4().hex[:8]
    topic, latency_topic = f"bench-{suffix}", f"lat-{suffix}"
    with Admin(client=server.connect()) as admin:
        admin.create_topic(topic, queues=args.queues)
        admin.create_topic(latency_topic, queues=1)
    n = len(payloads)
    produce_s = produce(server, topic, payloads, args)
    consume_s, seen = consume(server, topic, n, args)
    if any(count != 1 for count in seen):
        missing, twice = seen.count(0), sum(1 for count in seen if count > 1)
        raise SystemExit(f"consumed back wrong: {missing} messages missing, {twice} seen more than once")
    latencies = send_latencies_ms(server, latency_topic, payloads[0], args)
    with Admin(client=server.connect()) as admin:
        admin.delete_topic(topic)
        admin.delete_topic(latency_topic)
    return {
        "produce_msgs_per_s": round(n / produce_s),
        "consume_msgs_per_s": round(n / consume_s),
        "send_p50_ms": round(percentile(latencies, 50), 3),
        "send_p99_ms": round(percentile(latencies, 99), 3),
    }


@contextlib.contextmanager
def own_gateway(args, auth: bool) -> Iterator[Server]:
    """A gateway of our own in a temp dir (with authentication, or TIDEMQ_AUTH=off), stopped afterwards."""
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-bench-http-") as home,
        running_gateway(Path(home), TIDEMQ_FLUSH_DISK_TYPE=args.flush, TIDEMQ_AUTH="on" if auth else "off") as url,
    ):
        credentials = read_profile(Path(home) / "credentials") if auth else None
        yield Server(url, lambda: HttpClient(url, credentials=credentials, sign=auth))


def report(results: list[dict], settings: dict) -> dict:
    medians = {key: statistics.median(result[key] for result in results) for key in results[0]}
    print(json.dumps({"bench": "http", "run": "median", **settings, **medians}), flush=True)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=200_000, help="messages per run")
    parser.add_argument("-s", "--size", type=int, default=1024, help="payload bytes (>= 8)")
    parser.add_argument("-b", "--batch", type=int, default=100, help="messages per produce batch")
    parser.add_argument("-q", "--queues", type=int, default=8)
    parser.add_argument("--producers", type=int, default=4, help="producer threads, one connection each")
    parser.add_argument("--consumers", type=int, default=2, help="consumer threads, one connection each")
    parser.add_argument("--consume-batch", type=int, default=4000, help="max messages per consume request")
    parser.add_argument("--lat-count", type=int, default=2000, help="single sends timed")
    parser.add_argument("--lat-warmup", type=int, default=50, help="single sends before timing")
    parser.add_argument("--flush", choices=["SYNC", "ASYNC"], default="SYNC", help="flush policy of our own gateway")
    parser.add_argument("--url", help="benchmark this server instead of starting one (its flush policy applies)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--auth", action="store_true", help="also run without authentication, and print the ratios")
    args = parser.parse_args()
    if args.size < 8:
        parser.error("--size must be at least 8 (the sequence number)")
    payloads = make_payloads(args.n, args.size)
    settings = {
        "messages": args.n,
        "size": args.size,
        "batch": args.batch,
        "queues": args.queues,
        "producers": args.producers,
        "consumers": args.consumers,
        "flush": "server's" if args.url else args.flush,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    if args.url:
        server = Server(args.url, lambda: HttpClient(args.url))
        results = []
        for run in range(1, args.repeat + 1):
            results.append(run_once(server, payloads, args))
            print(json.dumps({"bench": "http", "run": run, **settings, **results[-1]}), flush=True)
        report(results, settings)
        return
    modes = [True, False] if args.auth else [True]
    with contextlib.ExitStack() as stack:
        servers = {auth: stack.enter_context(own_gateway(args, auth)) for auth in modes}
        results: dict[bool, list[dict]] = {auth: [] for auth in modes}
        for run in range(1, args.repeat + 1):
            for auth in modes:  # alternating, so that the machine's ups and downs hit both alike
                results[auth].append(run_once(servers[auth], payloads, args))
                line = {"bench": "http", "run": run, "auth": auth, **settings, **results[auth][-1]}
                print(json.dumps(line), flush=True)
    medians = {auth: report(results[auth], {**settings, "auth": auth}) for auth in modes}
    if args.auth:
        signed, unsigned = medians[True], medians[False]
        ratios = {
            "produce_ratio": round(signed["produce_msgs_per_s"] / unsigned["produce_msgs_per_s"], 3),
            "consume_ratio": round(signed["consume_msgs_per_s"] / unsigned["consume_msgs_per_s"], 3),
            "send_p50_ratio": round(unsigned["send_p50_ms"] / signed["send_p50_ms"], 3),
        }
        print(json.dumps({"bench": "http_auth_vs_none", **ratios, **settings}), flush=True)


if __name__ == "__main__":
    main()
