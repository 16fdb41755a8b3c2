"""Which broker a RocketMQ 5 client's gRPC call is for, in a BrokerContainer: the client's namespace.

The container serves one gRPC proxy (servers/grpc_proxy) for all its brokers, on one port (the container file's
`grpcServerPort`, else TIDEMQ_GRPC_PORT; none with TIDEMQ_GRPC_ENABLED=false), as it serves their HTTP APIs on one
port. A RocketMQ 5 client sends its namespace (`ClientConfiguration(endpoint, credentials, namespace="a")`, Java's
`setNamespace("a")`) with every call, as the `x-mq-namespace` header: here it names the broker, as the path prefix
`/brokers/<brokerName>` does over HTTP. A call is then served as that broker's HTTP requests are: from its store, in
its logging context, counted in flight (removing the broker waits for it: a receive's long poll too), on a slave
only if it reads no more than routes and settings (else BrokerReadOnly: FORBIDDEN, as RocketMQ answers a write to a
slave), and past the broker's disk quota a send is refused (DiskQuotaExceeded: TOO_MANY_REQUESTS). A Telemetry stream
is bound to the broker's store but not counted in flight: it stays open for the client's life. A call without a
namespace (BAD_REQUEST) or naming no broker here (NOT_FOUND) is answered so, saying which brokers there are.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from typing import Any

import grpc
from google.protobuf.message_factory import GetMessageClass

from functions.store import serving
from servers.grpc_proxy.protocol import MESSAGING_SERVICE, SERVICE
from servers.grpc_proxy.server import answering_only, method_handler
from servers.grpc_proxy.status import Code, Refused, status_of
from tidemq_protocol.errors import StoreUnavailable

from .broker import Broker
from .logs import as_broker
from .state import container

NAMESPACE = "x-mq-namespace"
ON_A_SLAVE = frozenset({"QueryRoute", "QueryAssignment", "Heartbeat", "Telemetry", "NotifyClientTermination"})
"""What a slave serves: routes, settings and liveness. A receive pops (it writes the delivery), so it is a master's."""
STORES_MESSAGES = frozenset({"SendMessage"})


class BrokerRouting(grpc.aio.ServerInterceptor):
    """Serves each call of RocketMQ's MessagingService as a call of the broker its namespace names (see the module
    docstring)."""

    async def intercept_service(self, continuation: Callable, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        service, _, name = details.method.rpartition("/")
        method = MESSAGING_SERVICE.methods_by_name.get(name)
        if handler is None or method is None or service != f"/{SERVICE}":
            return handler
        namespace = next((value for key, value in details.invocation_metadata or () if key == NAMESPACE), "")
        try:
            broker = broker_for(namespace, name)
        except Exception as error:  # answered with a status, as every error of the proxy is
            return method_handler(method, answering_only(method, status_of(error)))
        return method_handler(method, served_by(broker, method, implementation(handler)))


def broker_for(namespace: str, method: str) -> Broker:
    """The broker a call of `method` in `namespace` is for, or why none serves it."""
    if not namespace:
        names = ", ".join(broker.name for broker in container().brokers()) or "none yet"
        raise Refused(
            Code.BAD_REQUEST,
            f"set the client's namespace to the name of the broker it is for (this container's brokers: {names})",
        )
    broker = container().get(namespace)  # BrokerNotFound
    refused = broker.refusal(master_only=method not in ON_A_SLAVE, stores_messages=method in STORES_MESSAGES)
    if refused is not None:
        raise refused
    return broker


def implementation(handler: grpc.RpcMethodHandler) -> Callable:
    return handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream


def served_by(broker: Broker, method: Any, inner: Callable) -> Callable:
    """`inner` (the proxy's implementation of `method`) served as a call of `broker` (see the module docstring)."""
    response = GetMessageClass(method.output_type)
    if method.client_streaming:  # Telemetry: open as long as the client is, so bound to the store, not counted

        async def stream(requests: Any, context: Any) -> AsyncIterator[Any]:
            with as_broker(broker.identity), serving(broker.store):
                async for answer in inner(requests, context):
                    yield answer

        return stream

    if method.server_streaming:

        async def streamed(request: Any, context: Any) -> AsyncIterator[Any]:
            with ExitStack() as calling:
                try:
                    calling.enter_context(broker.serving())
                except StoreUnavailable as error:  # the broker is being removed or restarted
                    yield response(status=status_of(error))
                    return
                async for answer in inner(request, context):
                    yield answer

        return streamed

    async def unary(request: Any, context: Any) -> Any:
        with ExitStack() as calling:
            try:
                calling.enter_context(broker.serving())
            except StoreUnavailable as error:
                return response(status=status_of(error))
            return await inner(request, context)

    return unary
