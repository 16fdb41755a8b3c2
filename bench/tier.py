"""Cold reads against hot ones, and how soon produced messages reach the tier: S3 on a moto server over HTTP.

Prints one JSON line per result:
  {"bench": "tier_consume", "read_ahead": true|false, "readers": "per_queue"|"one", ...}  N x S-byte
      messages over Q queues, each queue consumed in order (by its own reader thread, or all by one), from
      the hot tier, then again from S3 once the hot segments are removed, with --latency-ms added to every
      S3 request; `cold_vs_hot` is the ratio of the two rates (target >= 0.5 with read-ahead)
  {"bench": "tier_lag", ...}  store-to-tier latency of every message produced at --lag-rate msgs/s for
      --lag-seconds with the default upload settings (1 s age), p50/p99 (target p99 <= 2 s)

    python bench/tier.py                       # 200,000 x 1 KiB over 4 queues, 20 ms per S3 request
    python bench/tier.py -n 50000 --latency-ms 50
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from devtools.moto_server import LocalAws
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TopicConfig, open_store

TOPIC = "bench"


def add_latency(store, latency_ms: float) -> None:
    """Every S3 request of the store's tier waits `latency_ms` first, as a remote S3 would make it."""

    def delay(**_) -> None:
        time.sleep(latency_ms / 1000)

    store.driver.client.meta.events.register("before-send.s3", delay)


def consume_all(store, queues: int, readers: str) -> tuple[float, int, int]:
    """Read every queue in order from its first offset to its end, 1,000 messages a read, as a consumer gets
    them (decoded, each record's CRC checked): with `readers` "per_queue" one thread per queue, as consumers
    pull; with "one" a single thread, queue after queue. Return (seconds, messages, body bytes)."""
    starts = [q.min_offset for q in store.queue_offsets(TOPIC)]
    totals = [(0, 0)] * queues

    def read_queue(queue: int) -> None:
        count = size = 0
        offset = starts[queue]
        while True:
            result = store.get(TOPIC, queue, offset, max_messages=1000)
            count += len(result.messages)
            size += sum(len(m.body) for m in result.messages)
            if result.next_offset >= result.max_offset:
                break
            offset = result.next_offset
        totals[queue] = (count, size)

    began = time.perf_counter()
    with ThreadPoolExecutor(queues if readers == "per_queue" else 1) as pool:
        list(pool.map(read_queue, range(queues)))
    return time.perf_counter() - began, sum(c for c, _ in totals), sum(b for _, b in totals)


def bench_consume(args, home: Path, payload: bytes, aws: LocalAws) -> list[dict]:
    base = {
        "home": home,
        "tier": "s3",
        "tier_bucket": f"bench-{uuid.uuid4().hex[:12]}",
        "hot_retention_ms": 0,
        "commitlog_segment_bytes": 16 * 1024 * 1024,
        "tier_upload_age_ms": 3_600_000,  # uploaded at once below, not while producing
    }
    store = open_store(StoreConfig(**base))
    store.create_topic(TopicConfig(name=TOPIC, queues=args.queues))
    began = time.perf_counter()
    for first in range(0, args.n, 100):
        store.put(TOPIC, [Message(payload, queue=(first // 100) % args.queues)] * min(100, args.n - first))
    produce_s = time.perf_counter() - began
    hot = {readers: consume_all(store, args.queues, readers) for readers in ("per_queue", "one")}
    store.upload_now(TOPIC)
    store.clean_expired()
    from_s3 = sum(s.hot_min_offset for s in store.tier_status(TOPIC))  # below the hot minimums: cold only
    store.close()

    results = []
    for readers, read_ahead in (("per_queue", True), ("per_queue", False), ("one", True)):
        hot_s, hot_count, hot_bytes = hot[readers]
        config = StoreConfig(**base, tier_cache_bytes=args.cache_mib * 1024 * 1024 if read_ahead else 0)
        store = open_store(config)
        add_latency(store, args.latency_ms)
        cpu_before, s3_cpu_before = time.process_time(), aws.cpu_seconds()
        cold_s, cold_count, cold_bytes = consume_all(store, args.queues, readers)
        cpu, s3_cpu = time.process_time() - cpu_before, aws.cpu_seconds() - s3_cpu_before
        if (cold_count, cold_bytes) != (hot_count, hot_bytes):
            raise SystemExit(f"cold read {cold_count} messages / {cold_bytes} bytes, hot {hot_count} / {hot_bytes}")
        results.append(
            {
                "bench": "tier_consume",
                "read_ahead": read_ahead,
                "readers": readers,
                "produce_msgs_per_s": round(args.n / produce_s),
                "hot_consume_msgs_per_s": round(hot_count / hot_s),
                "cold_consume_msgs_per_s": round(cold_count / cold_s),
                "cold_vs_hot": round(hot_s / cold_s, 3),
                "cold_messages": cold_count,
                "cold_s": round(cold_s, 3),
                "cold_cpu_s": round(cpu, 2),  # this process: consumer, cache, S3 client
                "cold_s3_server_cpu_s": round(s3_cpu, 2),  # the moto server process
                "served_from_s3": from_s3,
                "cache": dict(store.cache.stats),
            }
        )
        store.close()
    return results


def bench_lag(args, home: Path, payload: bytes) -> dict:
    config = StoreConfig(home=home, tier="s3", tier_bucket=f"lag-{uuid.uuid4().hex[:12]}")
    store = open_store(config)
    add_latency(store, args.latency_ms)
    store.create_topic(TopicConfig(name=TOPIC, queues=args.queues))
    batch = 100
    interval = batch / args.lag_rate
    began = time.monotonic()
    sent = 0
    while time.monotonic() - began < args.lag_seconds:
        store.put(TOPIC, [Message(payload, queue=(sent // batch) % args.queues)] * batch)
        sent += batch
        time.sleep(max(0.0, began + sent / args.lag_rate - time.monotonic()))
    deadline = time.monotonic() + 60
    while store.dispatcher.uploaded_messages < sent and time.monotonic() < deadline:
        time.sleep(0.05)
    lags = sorted(store.dispatcher.upload_lags_ms)
    store.close()
    if len(lags) != sent:
        raise SystemExit(f"{len(lags)} of {sent} messages reached the tier within a minute")

    def rank(q: float) -> int:
        return lags[max(0, min(len(lags) - 1, round(q / 100 * len(lags) + 0.5) - 1))]

    return {
        "bench": "tier_lag",
        "messages": sent,
        "rate_msgs_per_s": round(sent / args.lag_seconds),
        "interval_s": interval,
        "upload_age_ms": config.tier_upload_age_ms,
        "lag_p50_ms": rank(50),
        "lag_p99_ms": rank(99),
        "lag_max_ms": lags[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=200_000, help="messages for the consume comparison")
    parser.add_argument("-s", "--size", type=int, default=1024, help="payload bytes")
    parser.add_argument("-q", "--queues", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added to every S3 request")
    parser.add_argument("--cache-mib", type=int, default=64, help="read-ahead cache bound when on")
    parser.add_argument("--lag-seconds", type=float, default=10.0)
    parser.add_argument("--lag-rate", type=float, default=5000.0, help="messages per second while measuring lag")
    args = parser.parse_args()
    settings = {
        "n": args.n,
        "size": args.size,
        "queues": args.queues,
        "s3_latency_ms": args.latency_ms,
        "s3": "moto server over HTTP",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    payload = os.urandom(args.size)
    with LocalAws() as aws:
        os.environ.update(aws.env)
        directory = Path(tempfile.mkdtemp(prefix="tidemq-bench-tier-"))
        try:
            for result in bench_consume(args, directory / "consume", payload, aws):
                print(json.dumps({**result, **settings}), flush=True)
            print(json.dumps({**bench_lag(args, directory / "lag", payload), **settings}), flush=True)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
