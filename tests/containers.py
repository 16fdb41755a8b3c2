"""BrokerContainer processes for tests: `python -m servers.container -c <conf>` on a free loopback port, with the
credentials of the super user it made on its first start."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from servers.grpc_proxy.protocol import SERVICE
from servers.grpc_proxy.protocol import service_pb2 as rpc
from servers.process import free_port, start_server, stop_server, wait_healthy
from tidemq import Admin
from tidemq.client import HttpClient
from tidemq.credentials import Credentials, read_profile


@dataclass
class RunningContainer:
    url: str
    root: Path
    conf: Path
    process: subprocess.Popen

    @property
    def credentials(self) -> Credentials:
        return read_profile(self.root / "credentials")

    def client(self, path: str = "") -> HttpClient:
        return HttpClient(self.url + path, credentials=self.credentials, retries=0, timeout_s=30)

    def brokers(self) -> dict[str, dict]:
        """The container's brokers as its admin API lists them, by name."""
        listed = self.client().request("GET", "/container/v1/brokers").json()["brokers"]
        return {broker["name"]: broker for broker in listed}

    def add(self, properties: str) -> dict:
        return self.client().request("POST", "/container/v1/brokers", json={"properties": properties}).json()

    def broker(self, name: str) -> Admin:
        return Admin(client=self.client(f"/brokers/{name}"))

    def log(self) -> str:
        return (self.root.parent / f"{self.root.name}.out").read_text(errors="replace")


def grpc_call(running: RunningContainer, method: str, request, namespace: str | None):
    """One raw unary call of RocketMQ's MessagingService to the container's gRPC proxy (on the `grpcServerPort` its
    config file names), signed as its super user, in `namespace` (the broker; None: no namespace header)."""
    from tests.e2e.test_rocketmq_clients import Proxy, signed

    port = next(line.split("=", 1)[1] for line in running.conf.read_text().splitlines() if "grpcServerPort=" in line)
    credentials = running.credentials
    signer = Proxy(f"127.0.0.1:{port}", None, credentials.access_key, credentials.secret_key, running.root)
    metadata = signed(signer) + ([("x-mq-namespace", namespace)] if namespace is not None else [])
    with grpc.insecure_channel(signer.endpoint) as channel:
        stub = channel.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=getattr(rpc, f"{method}Response").FromString,
        )
        return stub(request, metadata=metadata, timeout=30)


def write_container(directory: Path, brokers: Mapping[str, str], **settings: str) -> Path:
    """A container config, `broker-container.conf` in `directory`, naming one broker config per entry of `brokers`
    (file name -> its text)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in brokers.items():
        (directory / name).write_text(text)
    lines = {"listenPort": str(free_port()), "brokerConfigPaths": ":".join(brokers), **settings}
    conf = directory / "broker-container.conf"
    conf.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    return conf


def start_container(root: Path, conf: Path, command: Sequence[str] | None = None) -> RunningContainer:
    """Start a container keeping its files in `root` (its stdout and stderr in `<root>.out`), by `command`
    (Python's arguments; else `-m servers.container -c <conf>`); wait for /health."""
    port = next(line.split("=", 1)[1] for line in conf.read_text().splitlines() if line.startswith("listenPort="))
    output = root.parent / f"{root.name}.out"
    process = start_server(command or ["-m", "servers.container", "-c", str(conf)], environment(root), output)
    running = RunningContainer(f"http://127.0.0.1:{port}", root, conf, process)
    wait_healthy(process, running.url, output)
    return running


def environment(root: Path) -> dict[str, str]:
    return {**os.environ, "TIDEMQ_HOME": str(root)}


def conf_directory(root: Path) -> Path:
    """Where `container_running` writes the config files of a container keeping its files in `root`."""
    return root.parent / f"{root.name}-conf"


@contextlib.contextmanager
def container_running(
    root: Path, brokers: Mapping[str, str], command: Sequence[str] | None = None, **settings: str
) -> Iterator[RunningContainer]:
    """A container started (`start_container`) with the broker configs `brokers`, stopped with SIGTERM after."""
    conf = write_container(conf_directory(root), brokers, **settings)
    running = start_container(root, conf, command)
    try:
        yield running
    finally:
        stop_server(running.process)
