"""How fast one acknowledged send can be here: the full path against a floor without the Lambda layers.

In one run, on one keep-alive connection each, `--count` single 1 KiB sends (SYNC: fsync'd before the answer):

    {"bench": "send_floor", "path": "bare", ...}     uvicorn (httptools) with one thread hop to
                                                     `MessageStore.put_records`: no API Gateway event, no
                                                     Powertools, no authentication
    {"bench": "send_floor", "path": "gateway", ...}  the local gateway as `make run` serves it, the SDK sending
                                                     (`Producer.send`, signed): the lean dispatch of the hot
                                                     routes (servers/lean.py), TIDEMQ_GATEWAY_DISPATCH=lean
    {"bench": "send_floor", "path": "gateway_events", ...}  the same through an API Gateway event and the
                                                     function's resolver, as every request was before
                                                     (TIDEMQ_GATEWAY_DISPATCH=events)
    {"bench": "send_floor", "path": "store", ...}    `MessageStore.put_records` in-process, one writer: what
                                                     group commit costs a lone writer (no HTTP)
    {"bench": "send_floor", "path": "fdatasync", ...}  fdatasync alone after a 1 KiB append, same disk
    {"bench": "send_floor", "path": "fdatasync_zeros", ...}  the same, the append landing in zeros written
                                                     and fdatasync'd before (a preallocated commit-log segment)

The bare and gateway lines also say `server_cpu_ms_per_send`: the server process's CPU time (all its threads,
from /proc) over the sends, per send, which the machine's load moves less than latency. Last, the ratios of the
gateway's single-send p50 to the bare server's, each dispatch's:

    {"bench": "send_floor", "lean_vs_floor_single_send_p50": ..., "events_vs_floor_single_send_p50": ...}

Every line also says `preallocate_bytes`, the commit log's TIDEMQ_COMMITLOG_PREALLOCATE_BYTES (0: off) for the
bare, gateway and store paths: run with it set to 0 and unset, alternately, to compare.

    .venv/bin/python bench/send_floor.py                 # 3,000 sends each
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import platform
import socket
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

import uvicorn

from servers.process import running_gateway
from tidemq import Admin, HttpClient, Producer
from tidemq.credentials import read_profile
from tidemq_protocol import codec
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TopicConfig, open_store


def serve_bare(port: int, home: str) -> None:
    store = open_store(StoreConfig(home=Path(home)))
    store.create_topic(TopicConfig(name="lat", queues=1))

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        stored = (await asyncio.to_thread(store.put_records, "lat", body))[0]
        answer = f"{stored.msg_id} {stored.queue} {stored.queue_offset}\n".encode()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]}
        )
        await send({"type": "http.response.body", "body": answer})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentiles(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99)] * 1000, 3),
    }


def bare(count: int, payload: bytes) -> dict:
    port = free_port()
    server = multiprocessing.Process(target=serve_bare, args=(port, tempfile.mkdtemp(prefix="tidemq-floor-")))
    server.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port)
                connection.connect()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        times = []
        cpu_before = cpu_s(server.pid)
        for _ in range(count):
            began = time.perf_counter()
            connection.request("POST", "/", body=codec.encode_records("lat", [Message(payload, 0)]))
            response = connection.getresponse()
            response.read()
            times.append(time.perf_counter() - began)
            assert response.status == 200
        return {**percentiles(times[50:]), **server_cpu(cpu_s(server.pid) - cpu_before, count)}
    finally:
        server.terminate()
        server.join()


def gateway(count: int, payload: bytes, dispatch: str = "lean") -> dict:
    home = Path(tempfile.mkdtemp(prefix="tidemq-floor-"))
    with running_gateway(home, TIDEMQ_GATEWAY_DISPATCH=dispatch) as url:
        client = HttpClient(url, credentials=read_profile(home / "credentials"))
        Admin(client=client).create_topic("lat", queues=1)
        producer = Producer("lat", client=client)
        server = child_serving(home)
        times = []
        cpu_before = cpu_s(server)
        for _ in range(count):
            began = time.perf_counter()
            producer.send(payload)
            times.append(time.perf_counter() - began)
        cpu = server_cpu(cpu_s(server) - cpu_before, count)
        client.close()
    return {**percentiles(times[50:]), **cpu}


def child_serving(home: Path) -> int:
    """The pid of this process's child serving the store in `home` (the gateway `running_gateway` started)."""
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            environment = (entry / "environ").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and f"TIDEMQ_HOME={home}".encode() in environment.split(b"\0"):
            return int(entry.name)
    raise LookupError(f"no child process serves {home}")


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system, every thread) process `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(seconds: float, count: int) -> dict:
    """The server process's CPU time per send (all its threads: what a send costs it, whatever the load beside)."""
    return {"server_cpu_ms_per_send": round(seconds / count * 1000, 3)}


def store(count: int, payload: bytes) -> dict:
    with open_store(StoreConfig(home=Path(tempfile.mkdtemp(prefix="tidemq-floor-")))) as opened:
        opened.create_topic(TopicConfig(name="lat", queues=1))
        records = codec.encode_records("lat", [Message(payload, 0)])
        times = []
        for _ in range(count):
            began = time.perf_counter()
            opened.put_records("lat", records)
            times.append(time.perf_counter() - began)
    return percentiles(times[50:])


def fdatasync(count: int, payload: bytes, zeros: bool = False) -> dict:
    directory = tempfile.mkdtemp(prefix="tidemq-floor-")
    fd = os.open(os.path.join(directory, "log"), os.O_WRONLY | os.O_CREAT, 0o644)
    if zeros:
        os.pwrite(fd, bytes(count * len(payload)), 0)
        os.fsync(fd)
    times = []
    try:
        for position in range(0, count * len(payload), len(payload)):
            os.pwrite(fd, payload, position)
            began = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - began)
    finally:
        os.close(fd)
    return percentiles(times[50:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000, help="sends per path (default 3000)")
    args = parser.parse_args()
    payload = os.urandom(1024)
    host = {"python": platform.python_version(), "cpus": os.cpu_count()}
    preallocate = {"preallocate_bytes": StoreConfig().commitlog_preallocate_bytes}
    paths = (
        ("bare", bare),
        ("gateway", gateway),
        ("gateway_events", partial(gateway, dispatch="events")),
        ("store", store),
        ("fdatasync", fdatasync),
        ("fdatasync_zeros", partial(fdatasync, zeros=True)),
    )
    p50 = {}
    for name, run in paths:
        result = run(args.count, payload)
        p50[name] = result["p50_ms"]
        line = {"bench": "send_floor", "path": name, "count": args.count, **result, **preallocate, **host}
        print(json.dumps({**line, "loadavg": round(os.getloadavg()[0], 2)}), flush=True)
    ratios = {
        "lean_vs_floor_single_send_p50": round(p50["gateway"] / p50["bare"], 2),
        "events_vs_floor_single_send_p50": round(p50["gateway_events"] / p50["bare"], 2),
    }
    print(json.dumps({"bench": "send_floor", **ratios, "loadavg": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    main()
