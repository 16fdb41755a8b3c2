"""`tidemq container -c broker-container.conf`: the BrokerContainer's one server (RIP-31's shared transport).

One uvicorn server, one event loop and one pool of handler threads serve every broker, each under its own path
prefix on the container's port, with the functions the local gateway runs (the same handlers as in Lambda):

    /brokers/<brokerName>/v1/...   the broker's HTTP API (topics, messages, groups, KV), served from its store
    /container/v1/brokers...       the container's admin API (servers/container/handler.py)
    /v1/users..., /v1/whoami       the container's users, who may call any of its brokers (their policies say what)
    /console                       the web console: its login, users, health and this container's brokers
    /brokers/<brokerName>/console  the web console of one broker (topics, groups, messages, dead letters)
    /health                        public

A client of broker `a` uses `http://<host>:<listenPort>/brokers/a` as its URL (the SDK, CLI and signatures take a
base URL with a path). A slave serves reads (GET routes) only, and a broker refusing writes for its disk quota
refuses produces and KV writes (507); push delivery is not run in a container, so push subscriptions are refused.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from functools import cache
from pathlib import Path

from functions.api.errors import client_error_response, error_response
from functions.api.routing import Route, routes_of
from functions.console.pages import system as console
from functions.store import close_store, install_store, process_store
from servers import process, stream
from servers.adapter import as_result, body_or_refusal, dispatch, match_route, send_result, start_pools
from servers.bootstrap import check_exposure, first_super_user
from servers.grpc_proxy import server as grpc_proxy
from shared.settings import get_settings
from tidemq_protocol.api.common import ErrorBody
from tidemq_protocol.api.messages import SEND_STATUS_HEADER
from tidemq_protocol.errors import ClientError, InvalidArgument, StoreUnavailable, TideMQError
from tidemq_store import open_store
from tidemq_store.config import Backend, StoreConfig, TierMedium

from . import handler
from .broker import Broker
from .config import ContainerConfig
from .container import BrokerContainer
from .grpc_routing import BrokerRouting
from .logs import LogRouter, as_broker
from .logs import install as install_logs
from .replication import noting_outcome
from .state import container, set_container

log = logging.getLogger("tidemq.access")
BROKERS = "/brokers/"
ROOT_PATHS = ("/health", "/v1/whoami", "/v1/users", "/console")  # the container's own (users live in its store)
_config: ContainerConfig | None = None
_logs: LogRouter | None = None


@cache
def container_routes() -> tuple[Route, ...]:
    return tuple(routes_of("container", handler.app, handler.__name__))


def _not_here(path: str, why: str):
    return error_response(404, ErrorBody(error="RouteNotFound", message=f"no route for {path} here: {why}"))


def refusal(broker: Broker, route: Route) -> ClientError | None:
    """Why a broker does not serve a route now: a slave takes no writes; a broker past its disk quota takes no
    messages."""
    reads = route.method == "GET" or route.path.endswith("/batch-get")
    kv = route.function == "kv"  # a slave's KV state is not replicated: a master serves all of it
    return broker.refusal(
        master_only=not reads or kv, stores_messages=route.function == "produce" or (kv and not reads)
    )


async def app(scope, receive, send) -> None:
    """The ASGI application uvicorn serves."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    body = await body_or_refusal(scope, receive, send)
    if body is None:
        return
    path, method = scope["path"], scope["method"]
    if path.startswith(BROKERS):
        await _serve_broker(scope, receive, send, body)
        return
    table = container_routes() if path.startswith("/container/") else None
    matched = match_route(method, path, table) if table else None
    if table is None and path.startswith(ROOT_PATHS):
        matched = match_route(method, path)
    if matched is None:
        why = "a broker's API is under /brokers/<brokerName>, the container's under /container/v1"
        await send_result(send, as_result(_not_here(path, why)))
        return
    await send_result(send, await dispatch(scope, body, matched))


async def _serve_broker(scope, receive, send, body: bytes) -> None:
    started = time.perf_counter()
    name, _, rest = scope["path"][len(BROKERS) :].partition("/")
    rest = "/" + rest
    try:
        broker = container().get(name)
    except ClientError as error:
        await send_result(send, as_result(client_error_response(error)))
        return
    if stream.wants(scope["method"], rest):
        await stream.serve(scope, receive, send, body, path=rest, binding=broker.serving)
        return
    matched = match_route(scope["method"], rest)
    if matched is None:
        await send_result(send, as_result(_not_here(scope["path"], f"the broker's routes are {BROKERS}{name}/v1/...")))
        return
    route = matched[0]
    if rest.startswith("/v1/users"):
        await send_result(send, as_result(_not_here(scope["path"], "users are the container's: /v1/users")))
        return
    if rest.endswith("/push") and route.method != "GET":
        await send_result(send, as_result(_not_here(scope["path"], "push delivery is not run in a BrokerContainer")))
        return
    if (refused := refusal(broker, route)) is not None:
        await send_result(send, as_result(client_error_response(refused)))
        return
    try:
        with broker.serving(), noting_outcome() as outcome:
            result = await dispatch(scope, body, matched, path=rest)
    except StoreUnavailable as error:  # the broker is closing
        closing = error_response(503, ErrorBody(error=type(error).__name__, message=str(error)))
        await send_result(send, as_result(closing, **{"retry-after": "1"}))
        return
    if outcome.status is not None:
        result.setdefault("headers", {})[SEND_STATUS_HEADER] = outcome.status.value
    with as_broker(broker.identity):
        log.info(
            "%s %s %s %.1f ms", scope["method"], rest, result.get("statusCode"), (time.perf_counter() - started) * 1000
        )
    await send_result(send, result)


async def _lifespan(receive, send) -> None:
    proxy = None
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            start_pools()
            try:
                await asyncio.to_thread(start)
            except (TideMQError, OSError) as error:  # say what to change, without a traceback
                await _failed(send, error)
                return
            try:
                why = "a broker's clients set their namespace to its name"
                proxy = await grpc_proxy.start_beside(get_settings(), why, interceptors=[BrokerRouting()])
            except RuntimeError as error:  # its port is taken
                await asyncio.to_thread(stop)
                await _failed(send, error)
                return
            process.startup_done()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if proxy is not None:
                await proxy.stop()
            await asyncio.to_thread(stop)
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _failed(send, error: Exception) -> None:
    await send({"type": "lifespan.startup.failed", "message": f"TideMQ container cannot start: {error}"})


def start() -> BrokerContainer:
    """Open the container's own store (its users), make its first super user, then start its brokers."""
    settings = get_settings()
    root = settings.home
    own = StoreConfig(home=root / "container", backend=Backend.EMBEDDED, tier=TierMedium.OFF)
    install_store(open_store(own))
    first_super_user(process_store())
    running = BrokerContainer(root, _logs).start(_config.broker_files)
    set_container(running)
    console.serve_brokers(lambda: [handler.view(broker) for broker in container().brokers()])
    names = ", ".join(broker.name for broker in running.brokers()) or "none yet"
    print(f"TideMQ container on http://{settings.host}:{settings.port} (brokers: {names})", flush=True)
    return running


def stop() -> None:
    try:
        container().close()
    finally:
        set_container(None)
        close_store()


def main(argv: list[str] | None = None) -> None:
    global _config, _logs
    parser = argparse.ArgumentParser(prog="tidemq container", description="Run a BrokerContainer (RIP-31).")
    parser.add_argument("-c", "--config", required=True, type=Path, help="broker-container.conf")
    arguments = parser.parse_args(argv)
    try:
        _config = ContainerConfig.read(arguments.config)
    except InvalidArgument as error:
        raise SystemExit(f"tidemq container: {error}") from None
    # The container's file says where the process listens and keeps its files; the rest of the process's settings
    # (auth, limits) come from the environment as anywhere else.
    overrides = {
        "TIDEMQ_PORT": _config.listen_port,
        "TIDEMQ_HOST": _config.broker_container_ip,
        "TIDEMQ_HOME": _config.store_path_root_dir,
        "TIDEMQ_GRPC_PORT": _config.grpc_server_port,
    }
    os.environ.update({name: str(value) for name, value in overrides.items() if value is not None})
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    settings = get_settings()
    check_exposure(settings)
    _logs = install_logs(settings.home / "logs")
    # log_config=None: uvicorn leaves the logging set up here as it is (its lines go through the router too)
    process.serve(app, settings.host, settings.port, log_config=None)


if __name__ == "__main__":
    main()
