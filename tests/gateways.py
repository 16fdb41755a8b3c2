"""Gateways for tests, with this test process signing as the gateway's first super user (the credentials file
the gateway writes under its home on first start, as `make run` does)."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import pytest
import requests

from servers.process import free_port, running_gateway, start_server, stop_server, wait_healthy
from tidemq.auth import find_credentials
from tidemq.httpx_auth import signed_client
from tidemq_protocol import signing
from tidemq_protocol.clock import now_ms


@contextlib.contextmanager
def signing_with(credentials_file: Path) -> Iterator[None]:
    """Have the SDK (and the CLI, which inherits the environment) use `credentials_file` meanwhile."""
    before = os.environ.get("TIDEMQ_CREDENTIALS_FILE")
    os.environ["TIDEMQ_CREDENTIALS_FILE"] = str(credentials_file)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TIDEMQ_CREDENTIALS_FILE", None)
        else:
            os.environ["TIDEMQ_CREDENTIALS_FILE"] = before


DISPATCHES = ("lean", "events")
"""How a gateway serves the hot routes (TIDEMQ_GATEWAY_DISPATCH): both must answer alike."""


@pytest.fixture(scope="module", params=DISPATCHES, name="dispatch")
def each_dispatch(request) -> str:
    """A test module's gateways under each dispatch in turn: a module imports this to run its tests against both
    (tests/e2e/conftest.py's `dispatch`, which it overrides, is the default, lean)."""
    return request.param


@contextlib.contextmanager
def gateway_as_admin(home: Path, command: Sequence[str] | None = None, **env: str) -> Iterator[str]:
    """`running_gateway` (`command`: Python's arguments instead of the gateway module), with this process signing
    as its super user; yields the base URL. A serverless gateway gets DynamoDB tables of its own (a prefix of its
    own, unless given one): it may share a local AWS with others (one whose AWS_ENDPOINT_URL this process has, as
    the Spark tests' session does), and a store that has users already makes no first super user."""
    env.setdefault("TIDEMQ_DYNAMODB_PREFIX", f"gw{uuid.uuid4().hex[:10]}")
    with (
        running_gateway(Path(home), *([command] if command else []), **env) as url,
        signing_with(Path(home) / "credentials"),
    ):
        yield url


def signed_http() -> httpx.Client:
    """An httpx client signing as this process's credentials now (those `signing_with` set), for raw requests."""
    return _client_for(os.environ.get("TIDEMQ_CREDENTIALS_FILE"))


@functools.cache
def _client_for(credentials_file: str | None) -> httpx.Client:
    return signed_client("", timeout=30)


class RequestsSigner(requests.auth.AuthBase):
    """Signs a `requests` request (what Schemathesis sends) as this process's credentials now."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        credentials = find_credentials()
        url = urlsplit(request.url)
        body = request.body.encode() if isinstance(request.body, str) else request.body or b""
        digest, nonce = signing.body_sha256(body), signing.new_nonce()
        signed = signing.SignedRequest(request.method, unquote(url.path), url.query, digest, now_ms(), nonce)
        request.headers.update(signing.headers(credentials.access_key, credentials.secret_key, signed))
        return request


class RestartedGateway:
    """A gateway process on one port and one store, killed and started again. The port stays free between a kill and
    the next start: free_port's ports lie below the ephemeral range, so no client connection takes it, and the
    gateway binds it with SO_REUSEADDR (uvicorn's), past the killed one's connections in TIME_WAIT."""

    def __init__(self, home: Path, **settings: str) -> None:
        self.home, self.port = home, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "TIDEMQ_PORT": str(self.port), "TIDEMQ_HOME": str(home), **settings}
        self.log = home / "gateway.log"
        home.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None

    def start(self, healthy: bool = True) -> None:
        self.process = start_server(["-m", "servers.gateway"], self.env, self.log)
        if healthy:
            wait_healthy(self.process, self.url, self.log)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=60) == -signal.SIGKILL, self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process is not None:
            stop_server(self.process)


@contextlib.contextmanager
def restarted_gateway(request, tmp_path: Path, backend: str, **settings: str) -> Iterator[RestartedGateway]:
    """A RestartedGateway of `backend` (serverless: on the session's local AWS, tables of its own), started, with
    this process signing as its super user; stopped at the end."""
    settings = {"TIDEMQ_BACKEND": backend, **settings}
    if backend == "serverless":
        prefix = f"kill{uuid.uuid4().hex[:8]}"
        settings |= {**request.getfixturevalue("local_aws").env, "TIDEMQ_DYNAMODB_PREFIX": prefix}
    gateway = RestartedGateway(tmp_path / "data", **settings)
    try:
        gateway.start()
        with signing_with(gateway.home / "credentials"):
            yield gateway
    finally:
        gateway.stop()
