"""`python -m servers.grpc_proxy`: the gRPC proxy alone, without the HTTP gateway beside it: what the CDK app's
Fargate service runs over the serverless backend (docs/deploy.md, "The RocketMQ 5 gRPC proxy"), and what a local
run may use to serve gRPC from a process of its own.

    TIDEMQ_BACKEND=serverless TIDEMQ_HOST=0.0.0.0 TIDEMQ_GRPC_PORT=8081 ... python -m servers.grpc_proxy

Settings are read once (shared/settings.py), and the store is opened before the port is: a setting that cannot work
(a bad value, gRPC turned off, no authentication beyond loopback, a store that cannot open) ends the process at once
with exit status 2 and one line saying what to change, so that a container restarts loudly instead of serving
errors. It makes no user (the bootstrap function or the gateway does) and runs no schedule (the maintenance function
or the gateway does): any number of these processes may serve over one backend. SIGTERM or SIGINT stops it as the
gateway stops its proxy: Telemetry streams ended, requests in flight given STOP_GRACE_S.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import NoReturn

from pydantic import ValidationError

from functions.store import close_store, get_store
from servers import process
from servers.bootstrap import check_exposure
from shared.settings import InvalidConfiguration, Settings, get_settings

from . import server

MISCONFIGURED = 2
"""The exit status of a process whose settings cannot work (as a command-line usage error)."""


def checked_settings() -> Settings:
    """The process's settings, or SystemExit(MISCONFIGURED) saying what is wrong with them."""
    try:
        settings = get_settings()
    except ValidationError as error:
        refuse(f"its settings are invalid: {error}")
    if not settings.grpc_enabled:
        refuse("TIDEMQ_GRPC_ENABLED=false leaves it nothing to serve")
    try:
        check_exposure(settings)
    except SystemExit as refused:  # no authentication beyond loopback
        refuse(str(refused.code))
    return settings


def refuse(why: str) -> NoReturn:
    """End the process with MISCONFIGURED, saying why on stderr."""
    print(f"the TideMQ gRPC proxy cannot start: {why}", file=sys.stderr, flush=True)
    raise SystemExit(MISCONFIGURED)


async def serve(settings: Settings) -> None:
    """Open the store, serve until SIGTERM or SIGINT, stop."""
    try:
        await asyncio.to_thread(get_store)
    except InvalidConfiguration as error:
        refuse(str(error))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    proxy = await server.start(settings)
    process.startup_done()
    print(
        f"RocketMQ 5 gRPC proxy on {settings.host}:{proxy.port} (backend {settings.backend.value})",
        flush=True,
    )
    await stopping.wait()
    await proxy.stop()
    await asyncio.to_thread(close_store)


def main() -> None:
    asyncio.run(serve(checked_settings()))


if __name__ == "__main__":
    main()
