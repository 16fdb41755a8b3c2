"""`python -m servers.grpc_proxy`, the proxy alone as the CDK app's Fargate tasks run it: it refuses settings that
cannot work with exit status 2 and a line saying why, serves the load balancer's health check (an unsigned Heartbeat,
answered gRPC OK with UNAUTHORIZED in the body), and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import grpc
import pytest

from infra_cdk.grpc_proxy import HEALTH_CHECK_PATH
from servers.grpc_proxy.__main__ import MISCONFIGURED
from servers.grpc_proxy.protocol import service_pb2 as rpc
from servers.grpc_proxy.status import Code
from servers.process import free_port

DEADLINE_S = 120  # generous: a loaded 2-core machine


def proxy(home, **env: str) -> subprocess.Popen:
    environment = {**os.environ, "TIDEMQ_HOME": str(home), "TIDEMQ_BACKEND": "embedded", **env}
    return subprocess.Popen(
        [sys.executable, "-m", "servers.grpc_proxy"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"TIDEMQ_GRPC_ENABLED": "false"}, "TIDEMQ_GRPC_ENABLED=false"),
        ({"TIDEMQ_GRPC_PORT": "70000"}, "grpc_port"),
        ({"TIDEMQ_AUTH": "off", "TIDEMQ_HOST": "0.0.0.0"}, "TIDEMQ_AUTH=off"),
    ],
)
def test_settings_that_cannot_work_end_it_at_once_saying_why(tmp_path, env, said):
    process = proxy(tmp_path, **env)
    _, errors = process.communicate(timeout=DEADLINE_S)
    assert process.returncode == MISCONFIGURED
    assert "the TideMQ gRPC proxy cannot start" in errors and said in errors


def test_it_answers_the_load_balancers_health_check_and_stops_on_sigterm(tmp_path):
    port = free_port()
    process = proxy(tmp_path, TIDEMQ_GRPC_PORT=str(port))
    try:
        started = process.stdout.readline()  # blocks until the proxy listens (or ends)
        assert f"RocketMQ 5 gRPC proxy on 127.0.0.1:{port}" in started, process.stderr.read()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            heartbeat = channel.unary_unary(
                HEALTH_CHECK_PATH,
                request_serializer=rpc.HeartbeatRequest.SerializeToString,
                response_deserializer=rpc.HeartbeatResponse.FromString,
            )
            answer, call = heartbeat.with_call(rpc.HeartbeatRequest(), timeout=DEADLINE_S)
        assert call.code() is grpc.StatusCode.OK  # what the target group's matcher (GrpcCode 0) checks
        assert answer.status.code == Code.UNAUTHORIZED
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == 0
    finally:
        process.kill()
        process.communicate()
