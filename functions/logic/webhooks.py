"""Webhook push targets: a delivery POSTed as JSON, only to an address that cannot turn the platform against
itself or the network it runs in.

Which addresses (`WebhookRules`): the webhook's host is resolved and every address it resolves to must be
public. Loopback, private, link-local (where cloud metadata answers), multicast, unspecified and reserved
addresses are refused, unless the operator allows the host in `TIDEMQ_PUSH_ALLOWED_HOSTS`: an entry that is an
address or a CIDR network allows the addresses in it, any other entry allows that host name (as written in the
URL) whatever it resolves to. The platform's own endpoints (the local gateway's address and port, the AWS
endpoints this process is pointed at, such as the embedded moto server, and the Lambda runtime API) are refused
even then, since allowing 127.0.0.1 for a local demo must not let a webhook reset the embedded S3.

Where it is checked: where the connection is made (`GuardedNetwork`, the network of every webhook call), so
the connection goes to an address that was just checked, and a name that resolved to a public address when the
subscription was set and resolves to a private one now (DNS rebinding) gets no connection. Setting a
subscription makes one such call (`ping`), which must get an HTTP answer that is not a redirect: what cannot be
reached, or would only be reached through a redirect, is refused before anything is stored.

How a call is made: no redirect is followed (a 3xx is a failed call), no proxy is taken from the environment,
credentials in the URL (`https://user:password@host/...`) go as HTTP Basic authorization, and the answer's body
is never kept: at most `DRAIN_BYTES` of it are read, so that the connection may be reused, and dropped. A
failure says the status (`HTTP 403 Forbidden`, the standard phrase, not the receiver's) or one short reason; a
refused connection, a timeout and a broken answer all read `no HTTP answer`, so that nothing learns from
delivery failures which ports are open where.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from http import HTTPStatus
from urllib.parse import unquote, urlsplit

import httpcore

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]

DRAIN_BYTES = 64 * 1024
"""The most of a webhook's answer read (and dropped) so that its connection may serve the next call."""
POOL_CONNECTIONS = 32  # open connections to webhooks at most, per process (calls beyond wait for one)
KEEPALIVE_S = 30.0  # an idle connection to a webhook is closed after this long
NO_ANSWER = "no HTTP answer (the connection failed or timed out)"
ALLOWED_HOSTS = "TIDEMQ_PUSH_ALLOWED_HOSTS"


class WebhookRefused(Exception):
    """The webhook's host may not be reached (see the module docstring); the message says why."""


class WebhookFailed(Exception):
    """A webhook call did not succeed; the message is the short reason (never the answer's body)."""


@dataclass(frozen=True, slots=True)
class WebhookRules:
    """Which addresses webhooks may reach, and the longest wait for one call; see the module docstring."""

    allowed_names: frozenset[str] = frozenset()
    allowed_networks: tuple[Network, ...] = ()
    own_endpoints: frozenset[tuple[Address, int]] = frozenset()
    timeout_s: float = 30.0

    @classmethod
    def of(cls, allowed_hosts: Iterable[str], own_endpoints: Iterable[str], timeout_s: float) -> WebhookRules:
        """Rules from `TIDEMQ_PUSH_ALLOWED_HOSTS`'s entries and the platform's own `host:port` endpoints."""
        names, networks = set(), []
        for entry in allowed_hosts:
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                names.add(_host_name(entry))
        own = set()
        for endpoint in own_endpoints:
            host, _, port = endpoint.rpartition(":")
            try:
                own.update((address, int(port)) for address in _resolve(host, int(port)))
            except (ValueError, WebhookRefused):  # not an endpoint this process can reach either
                continue
        return cls(frozenset(names), tuple(networks), frozenset(own), timeout_s)

    def addresses(self, host: str, port: int) -> list[Address]:
        """The addresses `host`:`port` resolves to, each one allowed; else WebhookRefused saying why."""
        name = _host_name(host)
        found = _resolve(name, port)
        if any(self._is_own(address, port) for address in found):
            raise WebhookRefused(f"the webhook's host and port {host}:{port} are the platform's own endpoint")
        if name in self.allowed_names:
            return found
        for address in found:
            if any(address in network for network in self.allowed_networks):
                continue
            why = _not_public(address)
            if why is not None:
                raise WebhookRefused(
                    f"the webhook's host {host} resolves to {why}; webhooks reach public addresses only, unless "
                    f"the operator allows the host in {ALLOWED_HOSTS}"
                )
        return found

    def _is_own(self, address: Address, port: int) -> bool:
        """Whether `address`:`port` may be one of the platform's own endpoints: one of them, or on its port and not
        public when it listens on every address (or `address` is the unspecified one, which reaches this host)."""
        for own, own_port in self.own_endpoints:
            if own_port == port and (
                own == address or address.is_unspecified or (own.is_unspecified and _not_public(address) is not None)
            ):
                return True
        return False


def platform_endpoints(gateway_host: str, gateway_port: int) -> list[str]:
    """`host:port` of every endpoint of the platform itself this process knows: the local gateway, each AWS
    endpoint it is pointed at (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_<SERVICE>`) and the Lambda runtime API."""
    endpoints = [f"{gateway_host}:{gateway_port}"]
    for name, value in os.environ.items():
        if name.startswith("AWS_ENDPOINT_URL") and value:
            parts = urlsplit(value)
            if parts.hostname:
                endpoints.append(f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}")
    if os.environ.get("AWS_LAMBDA_RUNTIME_API"):
        endpoints.append(os.environ["AWS_LAMBDA_RUNTIME_API"])
    return endpoints


def _host_name(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _resolve(name: str, port: int) -> list[Address]:
    try:
        return [_unmapped(ipaddress.ip_address(name))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise WebhookRefused(f"the webhook's host {name} does not resolve") from None
    return list(dict.fromkeys(_unmapped(ipaddress.ip_address(info[4][0].partition("%")[0])) for info in infos))


def _unmapped(address: Address) -> Address:
    """An IPv4 address written as IPv6 (::ffff:127.0.0.1) is the IPv4 address it maps."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _not_public(address: Address) -> str | None:
    """What kind of address that is not public `address` is (None: public)."""
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a reserved address"
    return None


class GuardedNetwork(httpcore.NetworkBackend):
    """httpcore's network for webhook calls: a TCP connection goes only to an address its rules allow, checked
    as it is made."""

    def __init__(self, rules: WebhookRules) -> None:
        self.rules = rules
        self._tcp = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        failure: Exception = httpcore.ConnectError(NO_ANSWER)
        for address in self.rules.addresses(host, port):
            try:
                return self._tcp.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SocketOption] | None = None
    ) -> httpcore.NetworkStream:
        raise WebhookRefused("webhooks do not reach Unix sockets")

    def sleep(self, seconds: float) -> None:
        self._tcp.sleep(seconds)


@cache
def _pool(rules: WebhookRules) -> httpcore.ConnectionPool:
    """The connections of webhook calls made under `rules` (kept alive between calls, reached guarded)."""
    return httpcore.ConnectionPool(
        network_backend=GuardedNetwork(rules), max_connections=POOL_CONNECTIONS, keepalive_expiry=KEEPALIVE_S
    )


def call(rules: WebhookRules, url: str, body: bytes, headers: Mapping[str, str]) -> int:
    """POST `body` to the webhook `url` as the module docstring says; the answer's status, or WebhookFailed
    when there was none or it was a redirect."""
    parts = urlsplit(url)
    try:
        host, netloc = (parts.hostname or "").encode("idna").decode(), parts.netloc.rpartition("@")[2]
        sent = {"host": netloc.encode("idna").decode(), **headers}
    except UnicodeError:
        raise WebhookFailed(f"the webhook's host {parts.hostname} is not a valid host name") from None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        sent["authorization"] = "Basic " + base64.b64encode(credentials).decode()
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    address = httpcore.URL(scheme=parts.scheme, host=host, port=parts.port, target=target)
    timeout = rules.timeout_s
    try:
        with _pool(rules).stream(
            "POST",
            address,
            headers=list(sent.items()),
            content=body,
            extensions={"timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}},
        ) as answer:
            status = answer.status
            drained = 0
            for chunk in answer.iter_stream():
                drained += len(chunk)
                if drained > DRAIN_BYTES:
                    break
    except WebhookRefused as refused:
        raise WebhookFailed(str(refused)) from None
    except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError, OSError):
        raise WebhookFailed(NO_ANSWER) from None
    if 300 <= status < 400:
        raise WebhookFailed(f"{_status(status)}: a redirect, which webhooks do not follow")
    return status


def post(rules: WebhookRules, url: str, body: bytes, headers: Mapping[str, str]) -> None:
    """One delivery: `call`, successful on a 2xx; WebhookFailed with the status otherwise."""
    status = call(rules, url, body, headers)
    if not 200 <= status < 300:
        raise WebhookFailed(_status(status))


def _status(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"
