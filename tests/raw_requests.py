"""Requests the SDK would never send (too large, not UTF-8, nested too deep, malformed), for the tests of what the
server refuses. Tests make them here and nowhere else, so that what every request carries (its signature, as the
process's credentials make it) is added in one place."""

from __future__ import annotations

import http.client
import select
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx

from tidemq.httpx_auth import signed_client


class RawApi:
    """The HTTP API at `url`, spoken without the SDK."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = signed_client(url, timeout=30, limits=httpx.Limits(max_connections=1000))

    def request(self, method: str, path: str, **options) -> httpx.Response:
        """One request as httpx sends it (`content=`, `json=`, `headers=`, `params=`)."""
        return self.client.request(method, path, **options)

    @contextmanager
    def upload(self, method: str, path: str, headers: dict[str, str]) -> Iterator[Upload]:
        """A request whose head is sent at once and whose body the test sends piece by piece (`Upload.send`),
        watching for an answer in between: what a server that reads a body as it arrives can answer early. It is
        not signed: a signature covers the whole body, and the body limit is enforced before anyone looks at it."""
        address = urlsplit(self.url)
        connection = socket.create_connection((address.hostname, address.port), timeout=30)
        head = [f"{method} {path} HTTP/1.1", f"Host: {address.netloc}", *(f"{k}: {v}" for k, v in headers.items())]
        connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        try:
            yield Upload(connection)
        finally:
            connection.close()

    def close(self) -> None:
        self.client.close()


class Upload:
    """The body of a request on its way (see `RawApi.upload`)."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.sent = 0

    def send(self, data: bytes, chunked: bool = False) -> bool:
        """Send a piece of the body (as one chunk of a chunked body if `chunked`); False if the server no longer
        takes it (it answered and closed)."""
        try:
            self.connection.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        except (BrokenPipeError, ConnectionResetError):
            return False
        self.sent += len(data)
        return True

    def answered(self, wait_s: float = 0.1) -> bool:
        """Whether the server has started answering (waiting at most `wait_s` for it)."""
        return bool(select.select([self.connection], [], [], wait_s)[0])

    def response(self) -> tuple[int, dict[str, str], bytes]:
        """The server's answer: status, headers (lower-case names) and body."""
        answer = http.client.HTTPResponse(self.connection)
        answer.begin()
        return answer.status, {name.lower(): value for name, value in answer.getheaders()}, answer.read()
