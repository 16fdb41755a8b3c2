"""AWS with no cloud account: a moto server over real HTTP on a free loopback port.

What `make run` and the tests use for S3 (and DynamoDB) when `AWS_ENDPOINT_URL` is not set. Everything
reaches AWS through boto3 with the standard `AWS_ENDPOINT_URL`, so pointing that at LocalStack
(`http://localhost:4566`) or leaving it unset in AWS needs no code change. moto keeps its data in
memory: it is gone when the process that started the server exits.
"""

from __future__ import annotations

import logging
import os
import socket

from moto.server import ThreadedMotoServer

LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalAws:
    """A moto server on 127.0.0.1; `endpoint` is its URL, `env` what points boto3 at it."""

    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto logs every request otherwise
        self.port = free_port()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {"AWS_ENDPOINT_URL": self.endpoint, **LOCAL_CREDENTIALS}

    def start(self) -> LocalAws:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_if_needed() -> LocalAws | None:
    """Start a local moto server and point this process's boto3 at it, unless `AWS_ENDPOINT_URL` is set."""
    if os.environ.get("AWS_ENDPOINT_URL"):
        return None
    local = LocalAws().start()
    for name, value in local.env.items():
        if name == "AWS_ENDPOINT_URL" or not os.environ.get(name):
            os.environ[name] = value
    return local
