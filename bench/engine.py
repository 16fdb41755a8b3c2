"""Store-engine throughput, in-process: N x S-byte messages in batches of B over Q queues, then read back.

Prints one JSON line per result ("run" is 1..R, then "median" over the R runs):
  {"bench": "engine", ...}       TideMQ's embedded MessageStore (CommitLog + RocksDB ConsumeQueue): `put` of
                                 Message objects, `get` of decoded messages
  {"bench": "engine_records", ...}  the same store on its fast path: `put_records` of records a producer encoded
                                 (encoded before the clock starts, as a client does), `read_records` of the
                                 stored bytes, decoded and CRC-checked in one pass as a consumer does
  {"bench": "rocksdb_raw", ...}  rocksdict WriteBatch puts of the same payloads (fsync'd under SYNC), the
                                 layer below, for the ratio
  {"bench": "engine_vs_rocksdb_raw", ...}  the ratios of the medians (engine_records_vs_rocksdb_raw likewise)

    python bench/engine.py                  # 200,000 x 1 KiB, batch 100, 8 queues, SYNC, 8 threads, 3 runs
    python bench/engine.py -n 1000000 --flush ASYNC --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from rocksdict import Options, Rdict, ReadOptions, WriteBatch, WriteOptions

from tidemq_protocol import codec
from tidemq_protocol.message import Message
from tidemq_protocol.record import decode_run
from tidemq_store import FlushDiskType, StoreConfig, TopicConfig, open_store


def produce_in_threads(batches: list, threads: int, send) -> float:
    """Send every batch from `threads` threads (batch i goes to thread i % threads); return seconds."""
    start = threading.Barrier(threads + 1)

    def run(mine: list) -> None:
        start.wait()
        for batch in mine:
            send(batch)

    workers = [threading.Thread(target=run, args=(batches[i::threads],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - began


def run_store(args, directory: Path, payloads: list[bytes], records: bool) -> dict:
    """Produce every payload, then read every queue back: as Message objects (`put`, `get`), or with `records` as
    a producer and a consumer of the binary API do (`put_records` of records encoded before the clock starts,
    `read_records` of the stored bytes, decoded and CRC-checked in one pass)."""
    store = open_store(StoreConfig(home=directory, flush_disk_type=args.flush, checkpoint_interval_s=5.0))
    store.create_topic(TopicConfig(name="bench", queues=args.queues))
    batches = [
        [Message(body, queue=(first // args.batch) % args.queues) for body in payloads[first : first + args.batch]]
        for first in range(0, args.n, args.batch)
    ]
    if records:
        batches = [codec.encode_records("bench", batch) for batch in batches]
    put = store.put_records if records else store.put
    produce_s = produce_in_threads(batches, args.threads, lambda batch: put("bench", batch))
    began = time.perf_counter()
    consumed = 0
    for queue in range(args.queues):
        offset = 0
        while True:
            if records:
                batch = store.read_records("bench", queue, offset, max_messages=args.read_batch)
                got = len(decode_run(batch.records, "bench", queue, offset))
            else:
                batch = store.get("bench", queue, offset, max_messages=args.read_batch)
                got = len(batch.messages)
            if not got:
                break
            consumed += got
            offset = batch.next_offset
    consume_s = time.perf_counter() - began
    store.close()
    assert consumed == args.n, f"consumed {consumed} of {args.n}"
    return {"produce_msgs_per_s": round(args.n / produce_s), "consume_msgs_per_s": round(consumed / consume_s)}


def bench_engine(args, directory: Path, payloads: list[bytes]) -> dict:
    return run_store(args, directory, payloads, records=False)


def bench_engine_records(args, directory: Path, payloads: list[bytes]) -> dict:
    return run_store(args, directory, payloads, records=True)


def bench_rocksdb_raw(args, directory: Path, payloads: list[bytes]) -> dict:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(directory), options)
    write = WriteOptions()
    write.sync = args.flush is FlushDiskType.SYNC

    def send(first: int) -> None:
        batch = WriteBatch(raw_mode=True)
        for i in range(first, first + args.batch):
            batch.put(i.to_bytes(8, "big"), payloads[i])
        db.write(batch, write)

    produce_s = produce_in_threads(list(range(0, args.n, args.batch)), args.threads, send)
    began = time.perf_counter()
    consumed = sum(1 for _ in db.values(read_opt=ReadOptions()))
    consume_s = time.perf_counter() - began
    db.close()
    return {"produce_msgs_per_s": round(args.n / produce_s), "consume_msgs_per_s": round(consumed / consume_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=200_000, help="messages (default 200000)")
    parser.add_argument("-s", "--size", type=int, default=1024, help="payload bytes (default 1024)")
    parser.add_argument("-b", "--batch", type=int, default=100, help="messages per put (default 100)")
    parser.add_argument("-q", "--queues", type=int, default=8, help="queues (default 8)")
    parser.add_argument("-t", "--threads", type=int, default=8, help="producer threads sharing group commit")
    parser.add_argument("-r", "--repeat", type=int, default=3, help="runs of each bench (default 3)")
    parser.add_argument("--read-batch", type=int, default=1000, help="messages per get (default 1000)")
    parser.add_argument("--flush", type=FlushDiskType, default=FlushDiskType.SYNC, choices=list(FlushDiskType))
    parser.add_argument("--dir", type=Path, default=None, help="where to put data (default: a temp dir)")
    args = parser.parse_args()
    filler = os.urandom(args.size)
    payloads = [i.to_bytes(8, "big") + filler[8:] for i in range(args.n)]
    settings = {
        "n": args.n,
        "size": args.size,
        "batch": args.batch,
        "queues": args.queues,
        "threads": args.threads,
        "flush": args.flush.value,
        "preallocate_bytes": StoreConfig().commitlog_preallocate_bytes,  # TIDEMQ_COMMITLOG_PREALLOCATE_BYTES
    }
    host = {"python": platform.python_version(), "cpus": os.cpu_count()}
    root = Path(tempfile.mkdtemp(prefix="tidemq-bench-", dir=args.dir))
    medians: dict[str, dict[str, int]] = {}
    try:
        benches = (
            ("engine", bench_engine),
            ("engine_records", bench_engine_records),
            ("rocksdb_raw", bench_rocksdb_raw),
        )
        for name, run in benches:
            results = []
            for attempt in range(1, args.repeat + 1):
                results.append(run(args, root / f"{name}-{attempt}", payloads))
                print(json.dumps({"bench": name, "run": attempt, **results[-1], **settings, **host}), flush=True)
                shutil.rmtree(root / f"{name}-{attempt}", ignore_errors=True)
            medians[name] = {key: round(statistics.median(r[key] for r in results)) for key in results[0]}
            print(json.dumps({"bench": name, "run": "median", **medians[name], **settings, **host}), flush=True)
        for name in ("engine", "engine_records"):
            ratios = {
                f"{key}_ratio": round(medians[name][key] / medians["rocksdb_raw"][key], 3) for key in medians[name]
            }
            print(json.dumps({"bench": f"{name}_vs_rocksdb_raw", **ratios, **settings, **host}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
