"""A fault injector where the network is: an HTTP/1.1 proxy between TideMQ and its AWS endpoint (the moto server or
LocalStack) that, as told, answers a request with the error the service really sends, resets the connection before
or after the service applied the call, cuts a response in the middle of its body, stalls, or slows every request.

    with FaultProxy(local_aws.endpoint) as proxy:          # a child process on a free loopback port
        env = {**local_aws.env, **proxy.env}                # AWS_ENDPOINT_URL now points at the proxy
        proxy.set(Fault("throttle", service="dynamodb", rate=0.3), Fault("reset_after", rate=0.05))
        ...
        proxy.clear()                                       # every request goes through untouched again
        proxy.counts()                                      # {"dynamodb throttle": 412, "any reset_after": 37, ...}

Each request is matched against the faults in the order given; the first that matches it and wins its roll (`rate`)
acts. What each kind does:

    throttle      DynamoDB: 400 ProvisionedThroughputExceededException or ThrottlingException (alternately), the
                  bodies and headers DynamoDB sends; S3: 503 SlowDown. The call is not applied.
    conflict      DynamoDB writes only: TransactWriteItems cancelled with reason TransactionConflict (one reason per
                  item, as DynamoDB lists them), any other write 400 TransactionConflictException. Not applied.
    error         a 500 (DynamoDB InternalServerError, S3 InternalError), or with `status=503` a 503 (DynamoDB
                  ServiceUnavailable, S3 SlowDown). Not applied.
    reset_before  the connection is reset (RST) before the request reaches the service: not applied.
    reset_after   the request is applied, then the connection is reset before any byte of the answer.
    cut           the request is applied, the answer's headers and half its body are sent, then a reset.
    stall         the request waits `seconds` before it is sent on (an endpoint that accepts a connection and does
                  not answer); one whose caller gave up meanwhile is never sent.
    delay         the request and its answer each wait `seconds` / 2 (a slow network): applied, answered late.

The proxy is a child process (its own interpreter, as the network is not in TideMQ's); the test talks to it over
HTTP on the same port (`/__faults__`, a path no AWS request has: S3 bucket names cannot hold `_`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import h11

from servers.process import die_with_parent, free_port

CONTROL_PATH = "/__faults__"
Kind = Literal["throttle", "conflict", "error", "reset_before", "reset_after", "cut", "stall", "delay"]
Service = Literal["dynamodb", "s3"]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]
DYNAMODB_TARGET = "DynamoDB_20120810."
CONFLICTING = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"})
MOST_BODY_BYTES = 64 * 1024 * 1024  # a request or answer bigger than this is refused: the proxy is for tests


@dataclass(frozen=True)
class Fault:
    """One kind of fault, and which requests it hits: of `service` (None: any), whose operation is one of
    `operations` (DynamoDB's, e.g. "UpdateItem"; S3's HTTP method, e.g. "PUT"; empty: any), whose body holds
    `body_has` (None: any), each with probability `rate`, at most `limit` times (None: no limit)."""

    kind: Kind
    service: Service | None = None
    operations: tuple[str, ...] = ()
    body_has: str | None = None
    rate: float = 1.0
    seconds: float = 0.0  # stall, delay
    status: int = 500  # error: 500 or 503
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}: one of {', '.join(KINDS)}")
        if not 0 <= self.rate <= 1:
            raise ValueError(f"rate must be within [0, 1], got {self.rate}")

    @property
    def label(self) -> str:
        return f"{self.service or 'any'} {self.kind}"


class FaultProxy:
    """The proxy as a child process on a free loopback port in front of `upstream` (an http:// endpoint)."""

    def __init__(self, upstream: str, seed: int = 7) -> None:
        self.upstream, self.seed = upstream, seed
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {"AWS_ENDPOINT_URL": self.endpoint}
        self._process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30) -> FaultProxy:
        command = [sys.executable, "-m", "devtools.aws_faults", "--port", str(self.port), "--upstream", self.upstream]
        self._process = subprocess.Popen(
            [*command, "--seed", str(self.seed)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.counts()
                return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the fault proxy on port {self.port} did not start") from None
                time.sleep(0.05)

    def set(self, *faults: Fault) -> None:
        """From now on, inject `faults` (replacing those set before)."""
        self._control("PUT", [asdict(fault) for fault in faults])

    def clear(self) -> None:
        """From now on, pass every request through untouched."""
        self.set()

    def reset(self) -> None:
        """Clear the faults and the counts."""
        self._control("DELETE")

    def counts(self) -> dict[str, int]:
        """Faults injected so far, by label ("dynamodb throttle"), and "requests": every request seen."""
        return self._control("GET")

    def _control(self, method: str, body: object = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.endpoint + CONTROL_PATH, data=data, method=method)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# ---- the child process -------------------------------------------------------------------------------------------


@dataclass
class Exchange:
    """One request as the proxy read it."""

    request: h11.Request
    body: bytes
    service: Service = field(init=False)
    operation: str = field(init=False)

    def __post_init__(self) -> None:
        target = self.header(b"x-amz-target")
        if target.startswith(DYNAMODB_TARGET):
            self.service, self.operation = "dynamodb", target.removeprefix(DYNAMODB_TARGET)
        else:
            self.service, self.operation = "s3", self.request.method.decode()

    def header(self, name: bytes) -> str:
        return next((value.decode() for key, value in self.request.headers if key.lower() == name), "")

    def matches(self, fault: Fault) -> bool:
        if fault.kind == "conflict" and self.operation not in CONFLICTING:
            return False  # DynamoDB answers a conflict with a transaction to a write only
        return (
            (fault.service is None or fault.service == self.service)
            and (not fault.operations or self.operation in fault.operations)
            and (fault.body_has is None or fault.body_has.encode() in self.body)
        )


class Plan:
    """The faults in force, and what they did."""

    def __init__(self, seed: int) -> None:
        self.faults: list[Fault] = []
        self.used: Counter[int] = Counter()  # injections per fault, for `limit`
        self.counts: Counter[str] = Counter()
        self.rng = random.Random(seed)

    def set(self, faults: list[Fault]) -> None:
        self.faults, self.used = faults, Counter()

    def pick(self, exchange: Exchange) -> Fault | None:
        self.counts["requests"] += 1
        for number, fault in enumerate(self.faults):
            if not exchange.matches(fault) or (fault.limit is not None and self.used[number] >= fault.limit):
                continue
            if self.rng.random() < fault.rate:
                self.used[number] += 1
                self.counts[fault.label] += 1
                return fault
        return None


def _dynamodb_error(status: int, code: str, message: str, namespace: str = "com.amazonaws.dynamodb.v20120810"):
    body = json.dumps({"__type": f"{namespace}#{code}", "message": message}).encode()
    headers = [
        (b"content-type", b"application/x-amz-json-1.0"),
        (b"x-amzn-errortype", f"{code}:http://internal.amazon.com/coral/{namespace}/".encode()),
    ]
    return status, headers, body


def _s3_error(status: int, code: str, message: str):
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>{random.getrandbits(64):016X}</RequestId></Error>"
    ).encode()
    return status, [(b"content-type", b"application/xml")], body


THROTTLES = (
    (
        "ProvisionedThroughputExceededException",
        "The level of configured provisioned throughput for the table was exceeded. Consider increasing your "
        "provisioning level with the UpdateTable API.",
        "com.amazonaws.dynamodb.v20120810",
    ),
    ("ThrottlingException", "Rate of requests exceeds the allowed throughput.", "com.amazon.coral.availability"),
)


def error_answer(fault: Fault, exchange: Exchange, count: int) -> tuple[int, list, bytes]:
    """The status, headers and body the service answers for `fault`, in its own wire form."""
    if exchange.service == "s3":
        if fault.kind == "throttle" or fault.status == 503:
            return _s3_error(503, "SlowDown", "Please reduce your request rate.")
        return _s3_error(500, "InternalError", "We encountered an internal error. Please try again.")
    if fault.kind == "throttle":
        code, message, namespace = THROTTLES[count % len(THROTTLES)]
        return _dynamodb_error(400, code, message, namespace)
    if fault.kind == "conflict":
        if exchange.operation == "TransactWriteItems":
            items = len(json.loads(exchange.body).get("TransactItems", []))
            reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}]
            reasons += [{"Code": "None"}] * (items - 1)
            body = {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "CancellationReasons": reasons,
                "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
                "[TransactionConflict" + ", None" * (items - 1) + "]",
            }
            headers = [(b"content-type", b"application/x-amz-json-1.0")]
            return 400, headers, json.dumps(body).encode()
        return _dynamodb_error(400, "TransactionConflictException", "Transaction is ongoing for the item")
    if fault.status == 503:
        unavailable = ("ServiceUnavailable", "The service is unavailable.", "com.amazon.coral.availability")
        return _dynamodb_error(503, *unavailable)
    return _dynamodb_error(500, "InternalServerError", "Internal server error")


class ProxyServer:
    """The asyncio proxy: each client connection read with h11, each request sent on to `upstream` on a connection of
    its own (the service's loopback server: nothing to gain from keeping them), unless a fault says otherwise."""

    def __init__(self, upstream: str, plan: Plan) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.plan = plan

    async def serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MOST_BODY_BYTES)
        try:
            while True:
                exchange = await self._read_request(connection, reader, writer)
                if exchange is None:
                    return
                if exchange.request.target.decode().startswith(CONTROL_PATH):
                    await self._send(connection, writer, *self._control(exchange))
                elif not await self._proxy(connection, exchange, reader, writer):
                    return
                if connection.our_state is h11.MUST_CLOSE or connection.their_state is h11.MUST_CLOSE:
                    return
                connection.start_next_cycle()
        except (ConnectionError, h11.ProtocolError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # the client went, or the proxy is stopping
        finally:
            writer.close()

    async def _proxy(self, connection, exchange: Exchange, reader, writer) -> bool:
        """Answer one request as the plan says; False once the connection is gone."""
        fault = self.plan.pick(exchange)
        kind = fault.kind if fault else None
        if kind in ("throttle", "conflict", "error"):
            answer = error_answer(fault, exchange, self.plan.counts[fault.label])
            await self._send(connection, writer, *answer, head=exchange.request.method == b"HEAD")
            return True
        if kind == "reset_before":
            reset(writer)
            return False
        if kind == "stall" and await _client_gone_within(reader, connection, fault.seconds):
            reset(writer)
            return False
        if kind == "delay":
            await asyncio.sleep(fault.seconds / 2)
        status, headers, body = await self._forward(exchange)
        if kind == "delay":
            await asyncio.sleep(fault.seconds / 2)
        if kind == "reset_after":
            reset(writer)
            return False
        if kind == "cut":
            headers = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"transfer-encoding")]
            head = h11.Response(status_code=status, headers=[*headers, (b"content-length", str(len(body)).encode())])
            writer.write(connection.send(head) + connection.send(h11.Data(data=body[: len(body) // 2])))
            await writer.drain()
            reset(writer)
            return False
        await self._send(connection, writer, status, headers, body)
        return True

    async def _read_request(self, connection, reader, writer) -> Exchange | None:
        request, parts = None, []
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                if connection.they_are_waiting_for_100_continue:
                    writer.write(connection.send(h11.InformationalResponse(status_code=100, headers=[])))
                data = await reader.read(65536)
                connection.receive_data(data)
                if not data and request is None:
                    return None
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return Exchange(request, b"".join(parts))

    async def _forward(self, exchange: Exchange) -> tuple[int, list, bytes]:
        """Send the request to the service on a connection of its own; its answer, read whole."""
        reader, writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        try:
            upstream = h11.Connection(h11.CLIENT, max_incomplete_event_size=MOST_BODY_BYTES)
            skip = (b"expect", b"connection", b"content-length", b"transfer-encoding")
            headers = [(k, v) for k, v in exchange.request.headers if k.lower() not in skip]
            headers += [(b"content-length", str(len(exchange.body)).encode()), (b"connection", b"close")]
            request = h11.Request(method=exchange.request.method, target=exchange.request.target, headers=headers)
            writer.write(upstream.send(request) + upstream.send(h11.Data(data=exchange.body)))
            writer.write(upstream.send(h11.EndOfMessage()))
            await writer.drain()
            response, parts = None, []
            while True:
                event = upstream.next_event()
                if event is h11.NEED_DATA:
                    upstream.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    response = event
                elif isinstance(event, h11.Data):
                    parts.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    break
            drop = (b"connection", b"content-length", b"transfer-encoding", b"keep-alive")
            kept = [(k, v) for k, v in response.headers if k.lower() not in drop]
            body = b"".join(parts)
            if exchange.request.method != b"HEAD":
                kept.append((b"content-length", str(len(body)).encode()))
            else:
                kept += [(k, v) for k, v in response.headers if k.lower() == b"content-length"]
            return response.status_code, kept, body
        finally:
            writer.close()

    async def _send(self, connection, writer, status: int, headers: list, body: bytes, head: bool = False) -> None:
        if not any(k.lower() == b"content-length" for k, _ in headers):
            headers = [*headers, (b"content-length", str(len(body)).encode())]
        data = connection.send(h11.Response(status_code=status, headers=headers))
        if body and not head:  # the answer to a HEAD has the headers of a body, and none
            data += connection.send(h11.Data(data=body))
        writer.write(data + connection.send(h11.EndOfMessage()))
        await writer.drain()

    def _control(self, exchange: Exchange) -> tuple[int, list, bytes]:
        if exchange.request.method == b"DELETE":
            self.plan.set([])
            self.plan.counts.clear()
        elif exchange.request.method == b"PUT":
            try:
                specs = json.loads(exchange.body)
                self.plan.set([Fault(**{**spec, "operations": tuple(spec.get("operations", ()))}) for spec in specs])
            except (TypeError, ValueError, KeyError) as error:
                return 400, [(b"content-type", b"text/plain")], str(error).encode()
        return 200, [(b"content-type", b"application/json")], json.dumps(dict(self.plan.counts)).encode()


async def _client_gone_within(reader: asyncio.StreamReader, connection: h11.Connection, seconds: float) -> bool:
    """Wait `seconds`; whether the client closed its connection meanwhile (it gave up: the request is not sent)."""
    try:
        data = await asyncio.wait_for(reader.read(65536), seconds)
    except TimeoutError:
        return False
    connection.receive_data(data)  # a pipelined request's first bytes (no AWS SDK pipelines): kept for later
    return not data


def reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a TCP reset, as a network fault does (not an orderly FIN)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _serve(port: int, upstream: str, seed: int) -> None:
    proxy = ProxyServer(upstream, Plan(seed))
    server = await asyncio.start_server(proxy.serve_client, "127.0.0.1", port, backlog=1024)
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    async with server:
        await stopped.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the AWS endpoint, e.g. http://127.0.0.1:5000")
    parser.add_argument("--seed", type=int, default=7, help="the faults' random rolls (one run repeats another)")
    arguments = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(arguments.port, arguments.upstream, arguments.seed))


if __name__ == "__main__":
    main()
