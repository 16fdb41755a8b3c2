"""The gRPC server the proxy runs in, on grpc.aio: started inside a server's event loop (the local gateway's, beside
its HTTP), so long polls and Telemetry streams are coroutines, and store calls run on a pool of its own.

    proxy = await start(get_settings())     # listening on TIDEMQ_HOST:TIDEMQ_GRPC_PORT
    ...
    await proxy.stop()

The handlers are made from the service's descriptor (protocol/__init__.py says why not from a generated servicer):
each method of `apache.rocketmq.v2.MessagingService` is served by MessagingService's method of that name, or
answered UNSUPPORTED (with a status, as every error is) when it has none.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message_factory import GetMessageClass

from functions.store import get_store
from shared.settings import Settings
from tidemq_protocol.limits import MIB
from tidemq_store import MessageStore

from .protocol import MESSAGING_SERVICE, SERVICE
from .service import MessagingService
from .status import Code, status

BROKER = "tidemq"
"""The broker name routes give (one broker: this proxy, over the store)."""
STOP_GRACE_S = 2.0

KINDS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def answering_only(method: Any, answer: Any) -> Callable:
    """A handler answering every call of `method` with the status `answer` and nothing else."""
    response = GetMessageClass(method.output_type)

    if method.server_streaming:

        async def streamed(request: Any, context: Any) -> AsyncIterator[Any]:
            yield response(status=answer)

        return streamed

    async def unary(request: Any, context: Any) -> Any:
        return response(status=answer)

    return unary


def unsupported(method: Any) -> Callable:
    """A handler answering `method` with UNSUPPORTED."""
    return answering_only(
        method, status(Code.UNSUPPORTED, f"{method.name} is not served by TideMQ (docs/rocketmq-clients.md)")
    )


def method_handler(method: Any, implementation: Callable) -> grpc.RpcMethodHandler:
    """`method` of the service served by `implementation` (a coroutine, or an async generator for a streaming
    answer), with the method's own message types."""
    make = KINDS[(method.client_streaming, method.server_streaming)]
    return make(
        implementation,
        request_deserializer=GetMessageClass(method.input_type).FromString,
        response_serializer=GetMessageClass(method.output_type).SerializeToString,
    )


def handlers(service: MessagingService) -> grpc.GenericRpcHandler:
    """Every method of the service, served by `service` (see the module docstring)."""
    methods = {
        method.name: method_handler(method, getattr(service, method.name, None) or unsupported(method))
        for method in MESSAGING_SERVICE.methods
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)


@dataclass
class RunningProxy:
    """A started proxy: where it listens, and how it stops."""

    server: grpc.aio.Server
    service: MessagingService
    threads: ThreadPoolExecutor
    port: int
    checks: asyncio.Task

    async def stop(self) -> None:
        """End the Telemetry streams, let requests in flight finish (briefly), then stop."""
        self.checks.cancel()
        self.service.clients.stop()
        await self.server.stop(STOP_GRACE_S)
        await asyncio.to_thread(self.threads.shutdown)


async def start(
    settings: Settings,
    store: Callable[[], MessageStore] = get_store,
    broker: str = BROKER,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> RunningProxy:
    """Serve the proxy on TIDEMQ_HOST:TIDEMQ_GRPC_PORT (RuntimeError if the address cannot be bound);
    `interceptors` see each call first (a BrokerContainer's pick the broker it is for)."""
    limit = settings.max_request_bytes + MIB  # a SendMessage's messages and their framing
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)],
    )
    threads = ThreadPoolExecutor(settings.grpc_threads, thread_name_prefix="tidemq-grpc")
    service = MessagingService(settings, threads, broker, (settings.host, settings.grpc_port), store)
    server.add_generic_rpc_handlers((handlers(service),))
    port = server.add_insecure_port(f"{settings.host}:{settings.grpc_port}")
    if port == 0:
        raise RuntimeError(f"the gRPC proxy cannot listen on {settings.host}:{settings.grpc_port}")
    service.address = (settings.host, port)
    await server.start()
    return RunningProxy(server, service, threads, port, asyncio.create_task(service.checks.forever()))


async def start_beside(settings: Settings, server: str, **options: Any) -> RunningProxy | None:
    """The proxy beside a server's HTTP API (`server` names it in the line printed), on its event loop; None when
    TIDEMQ_GRPC_ENABLED=false. `options`: start's."""
    if not settings.grpc_enabled:
        return None
    proxy = await start(settings, **options)
    print(f"RocketMQ 5 gRPC proxy on {settings.host}:{proxy.port} ({server})", flush=True)
    return proxy
