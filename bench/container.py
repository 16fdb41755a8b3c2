"""BrokerContainer (RIP-31) memory: the RSS of one container process serving K brokers against K single-broker
processes (local gateways), under the same load (same messages, same rate).

Each layout runs alone (the other one stopped), in the order --order says:
  separate   K processes `python -m servers.gateway`, each with its own TIDEMQ_HOME and port
  container  one process `python -m servers.container -c broker-container.conf` naming K broker files
             (`brokerName=b<i>`, `flushDiskType=<flush>`), broker i at `<url>/brokers/b<i>`
Every process gets TIDEMQ_TIER=off, TIDEMQ_LOCAL_AWS=off and TIDEMQ_FLUSH_DISK_TYPE=<flush>.

The load, per broker: a topic of Q queues; one sender thread sending --batches binary batches of --batch messages
of --size bytes, paced at --rate batches/s (a batch goes out at its slot, or at once if the sender is behind); then
one reader thread reading the whole topic back. Every message must be acknowledged once and read back once, or the
bench fails. Then, for every process of the layout and its children (there should be none), /proc/<pid>/status
(VmRSS; VmHWM, the peak; RssAnon) and /proc/<pid>/smaps_rollup (Pss). RSS counts the shared pages of the
interpreter and libraries once per process, which favours the container; PSS divides them among the processes
sharing them (this bench's own process shares some too), so both are shown.

Prints one JSON line per layout, then one with the ratios (container / sum of the separate processes):
  {"bench": "container", "layout": "separate"|"container", "processes": ..., "rss_mb": ..., "hwm_mb": ...,
   "pss_mb": ..., "anon_mb": ..., "idle_rss_mb": ..., ...}
  {"bench": "container_vs_separate", "rss_ratio_container_vs_separate": ..., "hwm_ratio_container_vs_separate": ...,
   "pss_ratio_container_vs_separate": ..., "anon_ratio_container_vs_separate": ..., "target": 0.5, ...}
Target (RIP-31's issue): rss_ratio_container_vs_separate <= 0.5.

    python bench/container.py              # 4 brokers, 300 batches x 10 x 1 KiB at 50 batches/s each, SYNC
    python bench/container.py --flush ASYNC --rate 100 --batches 1000 --order container,separate
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from servers.process import free_port, start_server, stop_server, wait_healthy
from tidemq import Admin, Consumer, HttpClient, OutgoingMessage, Producer
from tidemq.credentials import Credentials, read_profile

TOPIC = "bench"
MIB_KB = 1024  # /proc reports kB


def progress(message: str) -> None:
    print(f"container bench: {message}", file=sys.stderr, flush=True)


class Layout(NamedTuple):
    """Running servers: their processes, and one broker per (url, credentials)."""

    name: str
    processes: list[subprocess.Popen]
    brokers: list[tuple[str, Credentials]]


def environment(args, **more: str) -> dict[str, str]:
    return {
        **os.environ,
        "TIDEMQ_TIER": "off",
        "TIDEMQ_LOCAL_AWS": "off",
        "TIDEMQ_FLUSH_DISK_TYPE": args.flush,
        "POWERTOOLS_METRICS_DISABLED": "true",
        **more,
    }


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:  # SIGTERM to all first: they shut down side by side
        if process.poll() is None:
            process.terminate()
    for process in processes:
        stop_server(process, timeout_s=60)


def credentials_in(home: Path) -> Credentials:
    found = read_profile(home / "credentials")
    if found is None:
        raise SystemExit(f"no credentials in {home / 'credentials'}")
    return found


@contextlib.contextmanager
def separate(args, work: Path) -> Iterator[Layout]:
    """K local gateways, one broker each."""
    processes: list[subprocess.Popen] = []
    try:
        started = []
        for i in range(args.brokers):
            home = work / f"gateway-{i}"
            home.mkdir()
            port = free_port()
            env = environment(args, TIDEMQ_HOME=str(home), TIDEMQ_PORT=str(port))
            log = work / f"gateway-{i}.log"
            processes.append(start_server(["-m", "servers.gateway"], env, log))
            started.append((processes[-1], f"http://127.0.0.1:{port}", home, log))
        brokers = []
        for process, base, home, log in started:
            wait_healthy(process, base, log)
            brokers.append((base, credentials_in(home)))
        yield Layout("separate", processes, brokers)
    finally:
        stop(processes)


@contextlib.contextmanager
def container(args, work: Path) -> Iterator[Layout]:
    """One BrokerContainer with K brokers."""
    root = work / "container"
    conf_dir = work / "container-conf"
    root.mkdir()
    conf_dir.mkdir()
    names = [f"b{i}" for i in range(args.brokers)]
    for name in names:
        (conf_dir / f"{name}.conf").write_text(f"brokerName={name}\nflushDiskType={args.flush}\n")
    port = free_port()
    conf = conf_dir / "broker-container.conf"
    paths = ":".join(f"{name}.conf" for name in names)
    conf.write_text(f"listenPort={port}\nstorePathRootDir={root}\nbrokerConfigPaths={paths}\n")
    log = work / "container.log"
    processes = [start_server(["-m", "servers.container", "-c", str(conf)], environment(args), log)]
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(processes[0], base, log)
        creds = credentials_in(root)
        yield Layout("container", processes, [(f"{base}/brokers/{name}", creds) for name in names])
    finally:
        stop(processes)


LAYOUTS = {"separate": separate, "container": container}


def descendants(pid: int) -> list[int]:
    """pid's children, grandchildren, ... (from /proc/*/stat)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon (/proc/<pid>/status) and Pss (/proc/<pid>/smaps_rollup) of one process, in kB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon"):
            fields[key] = int(value.split()[0])
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "Pss":
            fields[key] = int(value.split()[0])
    return fields


def measure(layout: Layout) -> dict:
    """The layout's memory: totals over its processes and their children (MiB), and each process's RSS."""
    pids, children = [], []
    for process in layout.processes:
        if process.poll() is not None:
            raise SystemExit(f"{layout.name}: pid {process.pid} exited with {process.returncode} during the bench")
        pids.append(process.pid)
        children += descendants(process.pid)
    each = {pid: memory_kb(pid) for pid in pids + children}
    total = {key: sum(m[key] for m in each.values()) / MIB_KB for key in ("VmRSS", "VmHWM", "Pss", "RssAnon")}
    return {
        "rss_mb": round(total["VmRSS"], 1),
        "hwm_mb": round(total["VmHWM"], 1),  # the sum of each process's peak
        "pss_mb": round(total["Pss"], 1),
        "anon_mb": round(total["RssAnon"], 1),
        "rss_mb_each": [round(each[pid]["VmRSS"] / MIB_KB, 1) for pid in pids],
        "children": len(children),
    }


def in_threads(count: int, work) -> None:
    """work(i) for i in range(count), each in its own thread; the first error is raised here."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def load(layout: Layout, args) -> dict:
    """Create a topic on each broker, send every batch at the paced rate, read it all back; check it all."""
    filler = random.Random(1).randbytes(args.size - 8)
    batches = [
        [OutgoingMessage(((k * args.batch + j).to_bytes(8, "big")) + filler) for j in range(args.batch)]
        for k in range(args.batches)
    ]
    n = args.batches * args.batch
    clients = [HttpClient(url, credentials=creds, retries=0, timeout_s=60) for url, creds in layout.brokers]
    try:
        for client in clients:
            Admin(client=client).create_topic(TOPIC, queues=args.queues)
        acknowledged = [0] * len(clients)
        behind_s = [0.0] * len(clients)
        send_s = [0.0] * len(clients)

        def sender(i: int) -> None:
            producer = Producer(TOPIC, client=clients[i])
            began = time.monotonic()
            for k, batch in enumerate(batches):
                wait = began + k / args.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                else:
                    behind_s[i] = max(behind_s[i], -wait)
                results = producer.send_batch(batch)
                if len(results) != len(batch):
                    raise SystemExit(f"{layout.brokers[i][0]}: {len(results)} acknowledgements for {len(batch)}")
                acknowledged[i] += len(results)
            send_s[i] = time.monotonic() - began

        progress(f"{layout.name}: sending {args.batches} batches x {args.batch} to each of {len(clients)} brokers")
        in_threads(len(clients), sender)
        seen = [[0] * n for _ in clients]

        def reader(i: int) -> None:
            with Consumer(TOPIC, client=clients[i]) as consumer:
                while not consumer.drained:
                    for message in consumer.poll(max_messages=1000):
                        seen[i][int.from_bytes(message.body[:8], "big")] += 1

        progress(f"{layout.name}: reading back")
        began = time.monotonic()
        in_threads(len(clients), reader)
        read_s = time.monotonic() - began
    finally:
        for client in clients:
            client.close()
    for i, counts in enumerate(seen):
        if acknowledged[i] != n or any(count != 1 for count in counts):
            missing, twice = counts.count(0), sum(1 for count in counts if count > 1)
            raise SystemExit(
                f"{layout.name}, broker {layout.brokers[i][0]}: {acknowledged[i]} of {n} acknowledged, "
                f"{missing} not read back, {twice} read more than once"
            )
    return {
        "messages_per_broker": n,
        "send_batches_per_s": round(args.batches / max(send_s), 1),  # the slowest sender's rate
        "max_behind_s": round(max(behind_s), 3),  # how late the latest batch went out (0: the pace held)
        "read_s": round(read_s, 2),
    }


def run_layout(name: str, args, work: Path, settings: dict) -> dict:
    progress(f"{name}: starting")
    with LAYOUTS[name](args, work) as layout:
        idle = measure(layout)
        figures = load(layout, args)
        if args.settle > 0:
            time.sleep(args.settle)
        memory = measure(layout)
    line = {
        "bench": "container",
        "layout": name,
        "processes": len(layout.processes),
        "brokers": len(layout.brokers),
        **memory,
        "idle_rss_mb": idle["rss_mb"],
        "idle_pss_mb": idle["pss_mb"],
        **figures,
        **settings,
    }
    print(json.dumps(line), flush=True)
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=4, help="brokers: container's, or separate processes")
    parser.add_argument("--batches", type=int, default=300, help="batches sent to each broker")
    parser.add_argument("--batch", type=int, default=10, help="messages per batch")
    parser.add_argument("--size", type=int, default=1024, help="message bytes (>= 8)")
    parser.add_argument("--rate", type=float, default=50, help="batches/s sent to each broker")
    parser.add_argument("--queues", type=int, default=4, help="queues of each broker's topic")
    parser.add_argument("--flush", choices=["SYNC", "ASYNC"], default="SYNC", help="every broker's flushDiskType")
    parser.add_argument("--settle", type=float, default=0, help="seconds to wait after the load before measuring")
    parser.add_argument("--order", default="separate,container", help="the layouts, run one after the other")
    args = parser.parse_args()
    order = [name.strip() for name in args.order.split(",")]
    if sorted(order) != ["container", "separate"]:
        parser.error("--order names separate and container once each, e.g. container,separate")
    if args.size < 8:
        parser.error("--size must be at least 8 (the sequence number)")
    if args.brokers < 1 or args.batches < 1 or args.batch < 1 or args.rate <= 0:
        parser.error("--brokers, --batches, --batch and --rate must be positive")
    settings = {
        "batches": args.batches,
        "batch": args.batch,
        "size": args.size,
        "rate": args.rate,
        "queues": args.queues,
        "flush": args.flush,
        "order": ",".join(order),
        "settle_s": args.settle,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    lines = {}
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-container-") as work:
        for name in order:
            (Path(work) / name).mkdir()
            lines[name] = run_layout(name, args, Path(work) / name, settings)
    alone, together = lines["separate"], lines["container"]
    ratios = {
        f"{kind}_ratio_container_vs_separate": round(together[f"{kind}_mb"] / alone[f"{kind}_mb"], 3)
        for kind in ("rss", "hwm", "pss", "anon")
    }
    summary = {
        "bench": "container_vs_separate",
        **ratios,
        "target": 0.5,
        "brokers": args.brokers,
        "container_rss_mb": together["rss_mb"],
        "separate_rss_mb": alone["rss_mb"],
        **settings,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
