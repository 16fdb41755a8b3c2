"""KV namespaces: put, get and compare-and-set on the embedded backend, in process against raw `rocksdict` on the same
data in the same run, then over HTTP through a local gateway.

Prints one JSON line per flush mode and one for HTTP:
  {"bench": "kv", "flush": "SYNC", "durable_raw": true, "put_ops_per_s": ..., "raw_put_ops_per_s": ...,
   "put_ratio_vs_raw": ..., "get_ops_per_s": ..., "raw_get_ops_per_s": ..., "get_ratio_vs_raw": ...,
   "cas_ops_per_s": ...}                        (targets: put_ratio_vs_raw >= 0.3, get_ratio_vs_raw >= 0.5)
  {"bench": "kv_http", "put_ops_per_s": ..., "get_ops_per_s": ..., "cas_ops_per_s": ..., "clients": C}

A KV put is acknowledged once it is in the commit log (durable under SYNC: fsync'd) and applied to RocksDB, so its
raw counterpart is a rocksdict put with the same durability: `WriteOptions.sync` under SYNC, the WAL without a
sync under ASYNC. Each figure is the median of R rounds, the raw and KV operations alternating round by round on
the same keys and values, so that the machine's load falls on both alike. Gets read every key once per round in
a shuffled order, after both databases flushed their memtables (TideMQ's KV flushes its own every few seconds,
so its reads come from files: the raw database's do too), and drop what they read, as the puts do.

    python bench/kv.py                     # 5,000 keys x 100 B, 5 rounds, SYNC and ASYNC, then HTTP (4 clients)
    python bench/kv.py -n 20000 --value-bytes 1024 --rounds 7 --flush SYNC
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rocksdict import Options, Rdict, WriteOptions

from servers.process import running_gateway
from tidemq.credentials import read_profile
from tidemq.httpx_auth import signed_client
from tidemq_protocol.kv import NamespaceConfig
from tidemq_store import FlushDiskType, StoreConfig, open_store


def rate(count: int, work: Callable[[], None]) -> float:
    began = time.perf_counter()
    work()
    return count / (time.perf_counter() - began)


def in_process(args, flush: FlushDiskType, work: Path) -> dict:
    keys = [f"key/{i:08d}" for i in range(args.n)]
    raw_keys = [key.encode() for key in keys]
    value = b"v" * args.value_bytes
    shuffled = keys[:]
    random.Random(1).shuffle(shuffled)
    raw_shuffled = [key.encode() for key in shuffled]
    raw = Rdict(str(work / f"raw-{flush}"), Options(raw_mode=True))
    raw_write = WriteOptions()
    raw_write.sync = flush is FlushDiskType.SYNC
    store = open_store(StoreConfig(home=work / f"store-{flush}", flush_disk_type=flush))
    kv = store.kv
    kv.create_namespace(NamespaceConfig("bench"))
    results: dict[str, list[float]] = {name: [] for name in ("put", "raw_put", "get", "raw_get", "cas")}

    def raw_puts() -> None:
        for key in raw_keys:
            raw.put(key, value, raw_write)

    def puts() -> None:
        for key in keys:
            kv.put("bench", key, value)

    def raw_gets() -> None:
        for key in raw_shuffled:
            raw.get(key)

    def gets() -> None:
        for key in shuffled:
            kv.get("bench", key)

    def compare_and_set() -> None:
        for key in keys[: args.n // 5]:
            kv.put("bench", key, value, expected_version=kv.get("bench", key).entry.version)

    try:
        for _ in range(args.rounds):
            results["raw_put"].append(rate(args.n, raw_puts))
            results["put"].append(rate(args.n, puts))
            raw.flush()  # both read from their files, not one from its memtable (TideMQ flushes every few seconds)
            kv.flush()
            results["raw_get"].append(rate(args.n, raw_gets))
            results["get"].append(rate(args.n, gets))
            results["cas"].append(rate(args.n // 5, compare_and_set))
    finally:
        store.close()
        raw.close()
    median = {name: statistics.median(values) for name, values in results.items()}
    return {
        "bench": "kv",
        "flush": str(flush),
        "durable_raw": raw_write.sync,
        "put_ops_per_s": round(median["put"]),
        "raw_put_ops_per_s": round(median["raw_put"]),
        "put_ratio_vs_raw": round(median["put"] / median["raw_put"], 3),
        "get_ops_per_s": round(median["get"]),
        "raw_get_ops_per_s": round(median["raw_get"]),
        "get_ratio_vs_raw": round(median["get"] / median["raw_get"], 3),
        "cas_ops_per_s": round(median["cas"]),
        "keys": args.n,
        "value_bytes": args.value_bytes,
        "rounds": args.rounds,
    }


def over_http(args, work: Path) -> dict:
    keys = [f"key/{i:08d}" for i in range(args.http_n)]
    body = {"value": base64.b64encode(b"v" * args.value_bytes).decode()}
    home = work / "gateway"
    with running_gateway(home, TIDEMQ_FLUSH_DISK_TYPE=args.http_flush) as url:
        admin = read_profile(home / "credentials")  # the gateway's first super user
        with signed_client(url, admin) as http:
            http.post("/v1/kv", json={"name": "bench"}).raise_for_status()

        def clients(operation: Callable) -> float:
            shares = [keys[i :: args.clients] for i in range(args.clients)]

            def client(share: list[str]) -> None:
                with signed_client(url, admin, timeout=60) as http:
                    for key in share:
                        operation(http, key)

            threads = [threading.Thread(target=client, args=(share,)) for share in shares]
            began = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return len(keys) / (time.perf_counter() - began)

        def put(http, key: str) -> None:
            http.put("/v1/kv/bench/entry", params={"key": key}, json=body).raise_for_status()

        def get(http, key: str) -> None:
            http.get("/v1/kv/bench/entry", params={"key": key}).raise_for_status()

        def cas(http, key: str) -> None:
            version = http.get("/v1/kv/bench/entry", params={"key": key}).json()["version"]
            answer = http.put(
                "/v1/kv/bench/entry", params={"key": key}, json=body, headers={"If-Match": f'"{version}"'}
            )
            answer.raise_for_status()

        puts, gets, sets = clients(put), clients(get), clients(cas)
    return {
        "bench": "kv_http",
        "flush": args.http_flush,
        "clients": args.clients,
        "put_ops_per_s": round(puts),
        "get_ops_per_s": round(gets),
        "cas_ops_per_s": round(sets),
        "keys": args.http_n,
        "value_bytes": args.value_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5000, help="keys written, read and set in process per round")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flush", choices=["SYNC", "ASYNC", "both"], default="both")
    parser.add_argument("--http-n", type=int, default=2000, help="keys over HTTP (0: skip HTTP)")
    parser.add_argument("--http-flush", choices=["SYNC", "ASYNC"], default="SYNC")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    args = parser.parse_args()
    machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
    modes = [FlushDiskType.SYNC, FlushDiskType.ASYNC] if args.flush == "both" else [FlushDiskType(args.flush)]
    with tempfile.TemporaryDirectory(prefix="tidemq-kv-bench-") as work:
        for flush in modes:
            print(json.dumps({**in_process(args, flush, Path(work)), **machine}), flush=True)
        if args.http_n:
            print(json.dumps({**over_http(args, Path(work)), **machine}), flush=True)


if __name__ == "__main__":
    main()
