"""AWS with no cloud account: a moto server process, over real HTTP on a free loopback port; and `connect`, which
decides where a process's S3 and DynamoDB are.

Everything reaches AWS through boto3 with the standard `AWS_ENDPOINT_URL`, so pointing that at LocalStack
(`http://localhost:4566`) or leaving it unset in AWS needs no code change. The embedded server is used only when
asked for (`TIDEMQ_LOCAL_AWS=moto`: `make run` and the tests ask), never as a fallback: moto keeps its data in
memory, so a process that silently fell back to it would report `s3://my-bucket` while its uploads vanish at the
next restart. Inside AWS Lambda asking for it is a start-up error; without it, no endpoint means AWS itself, and
no credentials to reach it is a start-up error too. The server is a child process (its own interpreter, as a
remote S3 would be: it does not compete for ours), stopped with its owner.

The server answers one request at a time (`python -m shared.local_aws PORT`): moto does not make a
DynamoDB transaction atomic against concurrent requests, and DynamoDB does; serving them one by one
gives the serializability the serverless backend's protocol relies on (and costs nothing here: moto
holds one interpreter lock either way).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shared.settings import LocalAwsMode
from tidemq_store.errors import InvalidConfiguration

if TYPE_CHECKING:
    from shared.localstack import LocalStack

PR_SET_PDEATHSIG = 1
LAMBDA_FUNCTION_VARIABLE = "AWS_LAMBDA_FUNCTION_NAME"  # set by the Lambda runtime in every execution environment
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


# Servers started here listen on ports below Linux's ephemeral range (32768-60999), so no client connection of any
# process can take a port between free_port choosing it and the server binding it; each process walks the range
# from its own pid-derived start, so processes running side by side (parallel test workers, a gateway and the moto
# server it starts) do not pick the same port either.
PORT_RANGE = range(10000, 32768)
_next_port = PORT_RANGE.start + (os.getpid() * 7919) % len(PORT_RANGE)


def free_port() -> int:
    """A loopback port no one listens on, for a server about to start."""
    global _next_port
    for _ in range(len(PORT_RANGE)):
        port, _next_port = _next_port, PORT_RANGE.start + (_next_port + 1 - PORT_RANGE.start) % len(PORT_RANGE)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use
                continue
            return port
    raise RuntimeError(f"no free loopback port in {PORT_RANGE.start}-{PORT_RANGE.stop - 1}")


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when the parent dies, even by SIGKILL (Linux), so no server outlives it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class LocalAws:
    """A moto server on 127.0.0.1; `endpoint` is its URL, `env` what points boto3 at it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {"AWS_ENDPOINT_URL": self.endpoint, **LOCAL_CREDENTIALS}
        self._server: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60) -> LocalAws:
        self._server = subprocess.Popen(
            [sys.executable, "-m", "shared.local_aws", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):  # not up yet, or slow to answer
                if self._server.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the moto server on port {self.port} did not start") from None
                time.sleep(0.1)

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (Linux)."""
        fields = Path(f"/proc/{self._server.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._server is not None and self._server.poll() is None:
            self._server.terminate()
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        atexit.unregister(self.stop)

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass(frozen=True)
class AwsEndpoint:
    """Where this process reaches S3 and DynamoDB: `url` (None: AWS itself), and the local AWS this process started
    when it is that endpoint (the embedded moto server, or LocalStack)."""

    url: str | None
    embedded: LocalAws | LocalStack | None = None

    def __str__(self) -> str:
        if isinstance(self.embedded, LocalAws):
            return f"{self.url} (the embedded moto server: in memory, gone when this process stops)"
        if self.embedded is not None:
            return f"{self.url} (LocalStack, started by this process: gone when it stops; log {self.embedded.log_path})"
        return self.url or "AWS"


def connect(mode: LocalAwsMode, home: Path = Path(".tidemq")) -> AwsEndpoint:
    """Point this process's boto3 where S3 and DynamoDB are, before a store that needs them opens: an
    `AWS_ENDPOINT_URL` that is set (a LocalStack or moto server someone else runs, a test's); else with `mode` moto
    or localstack, that local AWS started now (LocalStack with its files under `home`); else AWS itself. Raises
    InvalidConfiguration for a local AWS inside AWS Lambda, and for AWS itself with no credentials to reach it
    (rather than failing at the first request, or worse, succeeding somewhere else)."""
    if mode is not LocalAwsMode.OFF and os.environ.get(LAMBDA_FUNCTION_VARIABLE):
        raise InvalidConfiguration(
            f"TIDEMQ_LOCAL_AWS={mode} inside AWS Lambda ({LAMBDA_FUNCTION_VARIABLE} is set): a local AWS keeps S3 and "
            "DynamoDB on this machine and is for local runs only; unset TIDEMQ_LOCAL_AWS"
        )
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        return AwsEndpoint(endpoint)
    if mode is not LocalAwsMode.OFF:
        if mode is LocalAwsMode.LOCALSTACK:
            from shared.localstack import LocalStack  # only when asked for: it imports this module

            local = LocalStack(home).start()  # installs on first use, saying each step on stderr
        else:
            local = LocalAws().start()
        for name, value in local.env.items():
            if name == "AWS_ENDPOINT_URL" or not os.environ.get(name):
                os.environ[name] = value
        return AwsEndpoint(local.endpoint, local)
    import boto3

    if boto3.Session().get_credentials() is None:
        raise InvalidConfiguration(
            "S3 or DynamoDB is needed (TIDEMQ_TIER=s3 or TIDEMQ_BACKEND=serverless) and no AWS credentials were found: "
            "set AWS_PROFILE or AWS credentials for AWS, AWS_ENDPOINT_URL for LocalStack, or TIDEMQ_LOCAL_AWS=moto "
            "for an in-memory moto server (local runs only)"
        )
    return AwsEndpoint(None)


def serve(port: int) -> None:
    """Serve moto on 127.0.0.1:`port`, one request at a time, until terminated."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.server import MotoRequestHandler
    from werkzeug.serving import make_server

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    make_server("127.0.0.1", port, app, threaded=False, request_handler=MotoRequestHandler).serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
