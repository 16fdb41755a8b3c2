"""RocketMQ 5's Python client against TideMQ's gRPC proxy: what an unchanged RocketMQ application gets from a local
gateway, and the same run's single send over HTTP with TideMQ's SDK to compare with.

One gateway (embedded, SYNC, authentication on, as the other benches) with its gRPC proxy on a free port. For 1 and
8 concurrent clients, each client a process of its own running `rocketmq-python-client` (so that the proxy, not one
client's GIL, is what is measured): the producers send N messages of S bytes in all, one `Producer.send` each
(timed), after W warm-up sends each; then as many `SimpleConsumer`s receive (batches of B) and ack (one by one, as
the client acks) every message of the topic, each checked to come back once. The gateway process's CPU time
(user + sys, from /proc) over each phase, divided by its messages, is the proxy's CPU per message (the store's
work included: it runs in that process). Then L single sends with the SDK (`Producer.send`, one message a request,
same body size) over HTTP to the same gateway.

Then the proxy without RocketMQ's client (grpcio's blocking stub in the bench's process, the proxy's protobuf
modules): single calls of a method it answers UNSUPPORTED on its event loop (what grpc.aio costs alone), of
Heartbeat (authentication and a hop to the proxy's threads besides) and of SendMessage.

Prints one JSON line per phase and run, one per phase with the medians, and the comparison:
  {"bench": "grpc", "phase": "send", "clients": 1, "send_p50_ms": ..., "send_p99_ms": ..., "msgs_per_s": ...,
   "gateway_cpu_ms_per_msg": ...}
  {"bench": "grpc", "phase": "receive_ack", "clients": 8, "msgs_per_s": ..., "gateway_cpu_ms_per_msg": ...}
  {"bench": "grpc", "phase": "http_single_send", "send_p50_ms": ..., "send_p99_ms": ...}
  {"bench": "grpc", "phase": "raw_grpc", "unserved_p50_ms": ..., "heartbeat_p50_ms": ..., "send_p50_ms": ...,
   "send_gateway_cpu_ms_per_call": ...}
  {"bench": "grpc", "run": "median", ..., "grpc_vs_http_single_send_p50": ...}   # the 1-client gRPC send p50 / HTTP's

    .venv/bin/python bench/grpc.py                        # 4,000 x 1 KiB per phase, 1 and 8 clients, 3 runs
    .venv/bin/python bench/grpc.py -n 400 --repeat 1 --clients 1 2
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named like the grpc package: keep its directory behind site-packages, so that `import grpc` (the
# RocketMQ client's, and grpc.aio's below) finds the library, and siblings (http_api) are still importable.
_here = str(Path(__file__).resolve().parent)
sys.path = [p for p in sys.path if p and str(Path(p).resolve()) != _here] + [_here]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import hmac  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from typing import NamedTuple  # noqa: E402

from http_api import Server, percentile, send_latencies_ms  # noqa: E402

from servers.process import free_port, start_server, stop_server, wait_healthy  # noqa: E402
from tidemq import Admin, HttpClient  # noqa: E402
from tidemq.credentials import Credentials, read_profile  # noqa: E402

CLIENT_DEADLINE_S = 600
"""The longest a client process may take for its phase (a bound, so that a stuck client fails the run)."""


# ---- the client processes (this file run with --client <spec>) --------------------------------------------------


def body(seq: int, size: int) -> bytes:
    return seq.to_bytes(8, "big") + bytes(size - 8)


def client_main(spec: dict) -> None:
    """One RocketMQ client: start, say ready, wait for `go` on stdin, do its part, print its result (JSON)."""
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    config = ClientConfiguration(spec["endpoint"], Credentials(spec["access_key"], spec["secret_key"]))
    if spec["role"] == "producer":
        producer = Producer(config, (spec["topic"],))
        producer.startup()

        def one(seq: int) -> None:
            message = Message()
            message.topic, message.body = spec["topic"], body(seq, spec["size"])
            producer.send(message)

        for seq in spec["warmup"]:
            one(seq)
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
        latencies, began = [], time.monotonic()
        for seq in spec["seqs"]:
            sent = time.perf_counter()
            one(seq)
            latencies.append((time.perf_counter() - sent) * 1000)
        result = {"latencies_ms": latencies, "began": began, "ended": time.monotonic()}
        producer.shutdown()
    else:
        consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=1)
        consumer.startup()
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
        seqs, began, last = [], time.monotonic(), None
        while batch := consumer.receive(spec["batch"], 60):  # empty: every message is taken
            for message in batch:
                consumer.ack(message)
                seqs.append(int.from_bytes(message.body[:8], "big"))
            last = time.monotonic()
        result = {"seqs": seqs, "began": began, "ended": last}
        consumer.shutdown()
    print(json.dumps(result), flush=True)


# ---- the bench --------------------------------------------------------------------------------------------------


class Gateway(NamedTuple):
    """The gateway under test: its HTTP URL, gRPC endpoint, credentials and process."""

    url: str
    endpoint: str
    credentials: Credentials
    process: subprocess.Popen


@contextmanager
def gateway(home: Path, flush: str) -> Iterator[Gateway]:
    port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "TIDEMQ_PORT": str(port),
        "TIDEMQ_HOME": str(home),
        "TIDEMQ_FLUSH_DISK_TYPE": flush,
        "TIDEMQ_GRPC_PORT": str(grpc_port),
        "TIDEMQ_GRPC_MIN_LONG_POLLING_MS": "1000",  # a consumer's last, empty receive ends in 1 s
    }
    home.mkdir(parents=True, exist_ok=True)
    log = home / "gateway.log"
    process = start_server(["-m", "servers.gateway"], env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(process, url, log)
        yield Gateway(url, f"127.0.0.1:{grpc_port}", read_profile(home / "credentials"), process)
    finally:
        stop_server(process)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used (/proc/<pid>/stat: utime, stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_clients(server: Gateway, specs: list[dict], home: Path) -> tuple[list[dict], float]:
    """Start a client process per spec, wait until all are ready, let them go together; their results, and the
    gateway's CPU seconds from the go to the last result."""
    processes = []
    for i, spec in enumerate(specs):
        client_home = home / f"client-{uuid.uuid4().hex[:8]}-{i}"  # the client logs under $HOME/logs
        client_home.mkdir(parents=True)
        credentials = {"access_key": server.credentials.access_key, "secret_key": server.credentials.secret_key}
        full = {"endpoint": server.endpoint, **credentials, **spec}
        processes.append(
            subprocess.Popen(
                [sys.executable, __file__, "--client", json.dumps(full)],
                env={**os.environ, "HOME": str(client_home)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for process in processes:
            if json.loads(process.stdout.readline() or "{}").get("ready") is not True:
                raise SystemExit("a client did not start (its log: under the bench's temporary directory)")
        cpu_before = cpu_s(server.process.pid)
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        results = []
        for process in processes:
            out, _ = process.communicate(timeout=CLIENT_DEADLINE_S)
            results.append(json.loads(out.strip().splitlines()[-1]))
            if process.returncode != 0:
                raise SystemExit(f"a client failed (exit {process.returncode})")
        return results, cpu_s(server.process.pid) - cpu_before
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def phases(server: Gateway, clients: int, args, home: Path) -> tuple[dict, dict]:
    """Send, then receive + ack, with `clients` clients: the two result lines' figures."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"grpc-{suffix}", f"g-{suffix}"
    with Admin(client=HttpClient(server.url, credentials=server.credentials)) as admin:
        admin.create_topic(topic, queues=args.queues)
        admin.create_group(group)
    share = args.n // clients
    specs = [
        {
            "role": "producer",
            "topic": topic,
            "size": args.size,
            "warmup": list(range(i * 1_000_000, i * 1_000_000 + args.warmup)),
            "seqs": list(range(i * 1_000_000 + args.warmup, i * 1_000_000 + args.warmup + share)),
        }
        for i in range(clients)
    ]
    sent, send_cpu = run_clients(server, specs, home)
    latencies = sorted(ms for result in sent for ms in result["latencies_ms"])
    send_s = max(r["ended"] for r in sent) - min(r["began"] for r in sent)
    send = {
        "send_p50_ms": round(percentile(latencies, 50), 3),
        "send_p99_ms": round(percentile(latencies, 99), 3),
        "msgs_per_s": round(len(latencies) / send_s),
        "gateway_cpu_ms_per_msg": round(send_cpu * 1000 / len(latencies), 3),
        "messages": len(latencies),
    }
    consumers = [{"role": "consumer", "topic": topic, "group": group, "batch": args.batch}] * clients
    received, receive_cpu = run_clients(server, consumers, home)
    expected = sorted(seq for spec in specs for seq in spec["warmup"] + spec["seqs"])
    got = sorted(seq for result in received for seq in result["seqs"])
    if got != expected:
        raise SystemExit(f"received {len(got)} messages ({len(set(got))} distinct), sent {len(expected)}")
    receive_s = max(r["ended"] for r in received if r["ended"]) - min(r["began"] for r in received)
    receive = {
        "msgs_per_s": round(len(got) / receive_s),
        "gateway_cpu_ms_per_msg": round(receive_cpu * 1000 / len(got), 3),
        "messages": len(got),
    }
    return send, receive


def http_single_send(server: Gateway, args) -> dict:
    """Single sends with TideMQ's SDK over HTTP, one message a request (bench/http_api.py's latency phase)."""
    http = Server(server.url, lambda: HttpClient(server.url, credentials=server.credentials))
    topic = f"http-{uuid.uuid4().hex[:8]}"
    with Admin(client=http.connect()) as admin:
        admin.create_topic(topic, queues=args.queues)
    lat_args = argparse.Namespace(lat_warmup=args.warmup, lat_count=args.n)
    latencies = send_latencies_ms(http, topic, body(0, args.size), lat_args)
    return {"send_p50_ms": round(percentile(latencies, 50), 3), "send_p99_ms": round(percentile(latencies, 99), 3)}


UNSERVED = "QueryOffset"
"""A method the proxy answers UNSUPPORTED on its event loop (a pull RPC): what a call costs grpc.aio alone."""


def signed_metadata(credentials: Credentials) -> list[tuple[str, str]]:
    """Headers as a RocketMQ 5 client signs a call (docs/rocketmq-clients.md#authentication)."""
    date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    signature = hmac.new(credentials.secret_key.encode(), date.encode(), hashlib.sha1).hexdigest()
    authorization = (
        f"MQv2-HMAC-SHA1 Credential={credentials.access_key}, SignedHeaders=x-mq-date-time, Signature={signature}"
    )
    return [("x-mq-date-time", date), ("x-mq-client-id", "bench"), ("authorization", authorization)]


def raw_calls(server: Gateway, args) -> dict:
    """The proxy without RocketMQ's client: single calls from grpcio's blocking stub in this process (the proxy's
    own protobuf modules), each timed: a method answered UNSUPPORTED (grpc.aio's cost alone), Heartbeat (and
    authentication, on the proxy's threads) and SendMessage of one message (and the store's put)."""
    import grpc

    from servers.grpc_proxy.protocol import SERVICE
    from servers.grpc_proxy.protocol import definition_pb2 as pb
    from servers.grpc_proxy.protocol import service_pb2 as rpc

    topic = f"raw-{uuid.uuid4().hex[:8]}"
    with Admin(client=HttpClient(server.url, credentials=server.credentials)) as admin:
        admin.create_topic(topic, queues=args.queues)

    def message(i: int) -> rpc.SendMessageRequest:
        system = pb.SystemProperties(message_id=f"raw-{i}", message_type=pb.NORMAL)
        return rpc.SendMessageRequest(
            messages=[pb.Message(topic=pb.Resource(name=topic), system_properties=system, body=body(i, args.size))]
        )

    calls = {
        "unserved": (UNSERVED, lambda i: rpc.QueryOffsetRequest(), pb.UNSUPPORTED),
        "heartbeat": ("Heartbeat", lambda i: rpc.HeartbeatRequest(), pb.OK),
        "send": ("SendMessage", message, pb.OK),
    }
    figures = {}
    with grpc.insecure_channel(server.endpoint) as channel:
        for name, (method, request, expected) in calls.items():
            stub = channel.unary_unary(
                f"/{SERVICE}/{method}",
                request_serializer=lambda r: r.SerializeToString(),
                response_deserializer=getattr(rpc, f"{method}Response").FromString,
            )
            latencies = []
            cpu_before = None
            for i in range(args.warmup + args.n):
                if i == args.warmup:
                    cpu_before = cpu_s(server.process.pid)
                called = time.perf_counter()
                answer = stub(request(i), metadata=signed_metadata(server.credentials), timeout=30)
                if i >= args.warmup:
                    latencies.append((time.perf_counter() - called) * 1000)
                if answer.status.code != expected:
                    raise SystemExit(f"{method} answered {answer.status}")
            cpu = cpu_s(server.process.pid) - cpu_before
            latencies.sort()
            figures |= {
                f"{name}_p50_ms": round(percentile(latencies, 50), 3),
                f"{name}_gateway_cpu_ms_per_call": round(cpu * 1000 / args.n, 3),
            }
    return figures


def medians(lines: list[dict]) -> dict:
    """The median of each figure of `lines` (one phase's, one per run)."""
    figures = {}
    for key in lines[0]:
        values = [line[key] for line in lines]
        median = statistics.median(values)
        figures[key] = round(median) if all(isinstance(v, int) for v in values) else round(median, 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=4000, help="messages per phase, shared by its clients")
    parser.add_argument("-s", "--size", type=int, default=1024, help="body bytes (>= 8)")
    parser.add_argument("-q", "--queues", type=int, default=8)
    parser.add_argument("-b", "--batch", type=int, default=32, help="messages per receive")
    parser.add_argument("--warmup", type=int, default=50, help="sends per client before timing")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8], help="concurrent clients of each phase")
    parser.add_argument("--flush", choices=["SYNC", "ASYNC"], default="SYNC")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--client", help=argparse.SUPPRESS)  # a client process's spec (this file runs them)
    args = parser.parse_args()
    if args.client:
        client_main(json.loads(args.client))
        return
    if args.size < 8:
        parser.error("--size must be at least 8 (the sequence number)")
    settings = {
        "messages_per_phase": args.n,
        "size": args.size,
        "queues": args.queues,
        "batch": args.batch,
        "warmup": args.warmup,
        "flush": args.flush,
        "auth": "on",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg": round(os.getloadavg()[0], 2),
    }
    results: dict[tuple[str, int | None], list[dict]] = {}

    def report(phase: str, clients: int | None, run: int, figures: dict) -> None:
        results.setdefault((phase, clients), []).append(figures)
        line = {"bench": "grpc", "phase": phase, **({"clients": clients} if clients else {}), "run": run}
        print(json.dumps({**line, **figures, **settings}), flush=True)

    with (
        tempfile.TemporaryDirectory(prefix="tidemq-bench-grpc-") as temp,
        gateway(Path(temp) / "data", args.flush) as gw,
    ):
        for run in range(1, args.repeat + 1):
            for clients in args.clients:
                send, receive = phases(gw, clients, args, Path(temp))
                report("send", clients, run, send)
                report("receive_ack", clients, run, receive)
            report("http_single_send", None, run, http_single_send(gw, args))
            report("raw_grpc", None, run, raw_calls(gw, args))
    for (phase, clients), lines in results.items():
        line = {"bench": "grpc", "phase": phase, **({"clients": clients} if clients else {}), "run": "median"}
        print(json.dumps({**line, **medians(lines), **settings}), flush=True)
    http_p50 = medians(results[("http_single_send", None)])["send_p50_ms"]
    line = {"bench": "grpc", "run": "median", "http_single_send_p50_ms": http_p50}
    if ("send", 1) in results:
        grpc_p50 = medians(results[("send", 1)])["send_p50_ms"]
        ratio = round(grpc_p50 / http_p50, 3)
        line |= {"grpc_single_send_p50_ms": grpc_p50, "grpc_vs_http_single_send_p50": ratio}
    print(json.dumps({**line, **settings}), flush=True)


if __name__ == "__main__":
    main()
