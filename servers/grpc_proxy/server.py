"""The gRPC server the proxy runs in, on grpc.aio: long polls and Telemetry streams are coroutines, and store calls
run on a pool of its own (or, served inline, on the proxy's event loop: service.py `call`).

    proxy = await start(get_settings())     # listening on TIDEMQ_HOST:TIDEMQ_GRPC_PORT, on the running event loop
    proxy = await start_beside(get_settings(), "...")   # beside a server's HTTP: on an event loop of its own
    ...
    await proxy.stop()

Beside a server's HTTP (the local gateway, the BrokerContainer) the proxy runs on an event loop of its own, in a
thread of its own (`ProxyThread`), a plain asyncio loop whatever loop the HTTP server chose: so that a call the proxy
serves inline blocks no HTTP request, and neither server's calls wait behind the other's callbacks.

The handlers are made from the service's descriptor (protocol/__init__.py says why not from a generated servicer):
each method of `apache.rocketmq.v2.MessagingService` is served by MessagingService's method of that name, or
answered UNSUPPORTED (with a status, as every error is) when it has none.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message_factory import GetMessageClass

from functions.store import get_store
from shared.settings import Settings
from tidemq_protocol.limits import MIB
from tidemq_store import Backend, MessageStore

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
    inline_when_idle: bool = False,
) -> RunningProxy:
    """Serve the proxy on TIDEMQ_HOST:TIDEMQ_GRPC_PORT (RuntimeError if the address cannot be bound);
    `interceptors` see each call first (a BrokerContainer's pick the broker it is for); `inline_when_idle`: see
    MessagingService (only where the event loop is the proxy's alone and store calls are local)."""
    limit = settings.max_request_bytes + MIB  # a SendMessage's messages and their framing
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)],
    )
    threads = ThreadPoolExecutor(settings.grpc_threads, thread_name_prefix="tidemq-grpc")
    service = MessagingService(settings, threads, broker, (settings.host, settings.grpc_port), store, inline_when_idle)
    server.add_generic_rpc_handlers((handlers(service),))
    port = server.add_insecure_port(f"{settings.host}:{settings.grpc_port}")
    if port == 0:
        raise RuntimeError(f"the gRPC proxy cannot listen on {settings.host}:{settings.grpc_port}")
    service.address = (settings.host, port)
    await server.start()
    return RunningProxy(server, service, threads, port, asyncio.create_task(service.checks.forever()))


@dataclass
class ProxyThread:
    """A proxy served on an event loop of its own in a thread of its own (the module docstring says why)."""

    proxy: RunningProxy
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def port(self) -> int:
        return self.proxy.port

    @classmethod
    async def start(cls, settings: Settings, **options: Any) -> ProxyThread:
        """`start(settings, **options)` on a new loop in a new thread (its error, if it fails, with the thread gone)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="tidemq-grpc-loop", daemon=True)
        thread.start()
        running = cls(None, loop, thread)  # type: ignore[arg-type]  # the proxy comes next
        try:
            running.proxy = await running.on_loop(start(settings, **options))
        except BaseException:
            await running.end_loop()
            raise
        return running

    async def on_loop(self, work: Any) -> Any:
        """Await the coroutine `work` run on the proxy's loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    async def stop(self) -> None:
        """The proxy stopped on its loop (RunningProxy.stop), then the loop and its thread."""
        try:
            await self.on_loop(self.proxy.stop())
        finally:
            await self.end_loop()

    async def end_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self.thread.join)
        self.loop.close()


async def start_beside(settings: Settings, server: str, **options: Any) -> ProxyThread | None:
    """The proxy beside a server's HTTP API (`server` names it in the line printed), on an event loop of its own;
    None when TIDEMQ_GRPC_ENABLED=false. `options`: start's. Its calls are served inline when it is idle with the
    embedded engine (a local put: MessagingService says why)."""
    if not settings.grpc_enabled:
        return None
    options.setdefault("inline_when_idle", settings.backend is Backend.EMBEDDED)
    proxy = await ProxyThread.start(settings, **options)
    print(f"RocketMQ 5 gRPC proxy on {settings.host}:{proxy.port} ({server})", flush=True)
    return proxy
