"""bench/grpc.py runs, at a tiny size, to its end: the real RocketMQ client's processes against a gateway's gRPC
proxy, every message received once (the bench checks it), and every line it prints is one the docs quote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpc.py"


def test_the_grpc_bench_prints_its_lines_at_a_tiny_size():
    run = subprocess.run(
        [sys.executable, str(BENCH), "-n", "16", "--warmup", "2", "--repeat", "1", "--clients", "1", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    phases = [("send", 1), ("receive_ack", 1), ("send", 2), ("receive_ack", 2), ("http_single_send", None)]
    phases.append(("raw_grpc", None))
    printed = [(line.get("phase"), line.get("clients"), line["run"]) for line in lines]
    assert printed == [(*phase, 1) for phase in phases] + [(*phase, "median") for phase in phases] + [
        (None, None, "median")
    ]
    sends = [line for line in lines if line.get("phase") == "send" and line["run"] == 1]
    assert [line["messages"] for line in sends] == [16, 16]
    assert all(line["gateway_cpu_ms_per_msg"] >= 0 and line["send_p99_ms"] >= line["send_p50_ms"] for line in sends)
    received = [line["messages"] for line in lines if line.get("phase") == "receive_ack" and line["run"] == 1]
    assert received == [18, 20]  # the warm-ups too
    assert {"grpc_single_send_p50_ms", "http_single_send_p50_ms", "grpc_vs_http_single_send_p50"} <= set(lines[-1])
