"""The local gateway: a real HTTP server in front of the Lambda handlers, as API Gateway is in AWS
(`servers.adapter` turns each request into the function's event).

    python -m servers.gateway       # what `make run` starts; TIDEMQ_HOST / TIDEMQ_PORT

`servers.process.running_gateway` starts one as a child process on a free loopback port (tests and benchmarks).

With `TIDEMQ_PUSH_MODE=local` (the default) the process also runs the push worker (`functions.push.worker`), where
AWS would invoke the push function: started here, it is the push notifier the handlers give the produce and
subscription logic. Beside HTTP it serves RocketMQ 5's gRPC protocol (`servers.grpc_proxy`, on TIDEMQ_GRPC_PORT:
8081 unless TIDEMQ_GRPC_ENABLED=false) over the same store, on an event loop of its own (its server.py says why). It
runs the maintenance schedule (with the embedded engine, only its transactions job), and it starts the local AWS
(`TIDEMQ_LOCAL_AWS`) that its settings ask for.
"""

from __future__ import annotations

import asyncio
import os

from devtools import local_aws
from functions import store as process_store
from functions.api.errors import no_route
from functions.push import trigger
from functions.routes import allowed_methods
from functions.store import aws_endpoint, close_store, get_store
from servers import process, stream
from servers.adapter import (
    LocalContext,
    body_or_refusal,
    dispatch,
    match_route,
    send_response,
    send_result,
    start_pools,
)
from servers.bootstrap import check_exposure, first_super_user
from servers.grpc_proxy import server as grpc_proxy
from shared.settings import InvalidConfiguration, PushMode, get_settings
from tidemq_store import Backend


def _start_schedule():
    """What AWS runs on EventBridge schedules runs here on timers (the maintenance function): with the serverless
    backend upload to the cold tier, clean-up, retention and due timer messages (the embedded engine does its own);
    with either, the transactional messages' check-backs and the console's rolling series."""
    settings = get_settings()
    from functions.maintenance.schedule import LocalSchedule

    checks_every_s = min(settings.transaction_timeout_ms, settings.transaction_check_interval_ms) / 1000
    console_every_s = settings.console_sample_interval_s if settings.console_enabled else None
    if settings.backend is not Backend.SERVERLESS:
        return LocalSchedule(None, None, LocalContext, checks_every_s, console_every_s=console_every_s).start()
    return LocalSchedule(
        settings.maintenance_interval_s,
        settings.clean_interval_s,
        LocalContext,
        checks_every_s,
        timers_every_s=settings.timer_job_interval_s,
        console_every_s=console_every_s,
    ).start()


async def app(scope, receive, send) -> None:
    """The ASGI application uvicorn serves."""
    if scope["type"] == "lifespan":
        schedule = proxy = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                start_pools()
                try:
                    store = await asyncio.to_thread(get_store)  # open (and recover) the store before serving
                except InvalidConfiguration as error:  # say what to change, without a traceback
                    await send({"type": "lifespan.startup.failed", "message": f"TideMQ cannot start: {error}"})
                    return
                aws = aws_endpoint()
                if store.tier_medium:
                    via = f" via {aws}" if aws is not None and store.tier_medium.startswith("s3:") else ""
                    print(f"cold tier {store.tier_medium}{via}, reads {get_settings().tier_level}", flush=True)
                if get_settings().backend is Backend.SERVERLESS:
                    print(f"DynamoDB via {aws}", flush=True)
                await asyncio.to_thread(first_super_user, store)
                if get_settings().push_mode is PushMode.LOCAL:
                    await asyncio.to_thread(trigger.start_worker, store)  # the notifier; it catches up
                schedule = _start_schedule()
                proxy = await grpc_proxy.start_beside(get_settings(), "a client snippet: tidemq grpc endpoint")
                process.startup_done()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if proxy is not None:
                    await proxy.stop()
                if schedule is not None:
                    await asyncio.to_thread(schedule.stop)
                await asyncio.to_thread(trigger.stop_worker)
                await asyncio.to_thread(close_store)
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = await body_or_refusal(scope, receive, send)
    if body is None:
        return
    if stream.wants(scope["method"], scope["path"]):
        await stream.serve(scope, receive, send, body)
        return
    matched = match_route(scope["method"], scope["path"])
    if matched is None:
        refused = no_route(scope["method"], scope["path"], allowed_methods(scope["path"]))
        await send_response(send, refused.status_code, refused.headers, refused.body.encode())
        return
    await send_result(send, await dispatch(scope, body, matched))


def main() -> None:
    # Locally, EMF metric lines would drown the console; POWERTOOLS_METRICS_DISABLED=false brings them back.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    settings = get_settings()
    check_exposure(settings)
    process_store.allow_local_aws(local_aws.start)
    print(f"TideMQ local gateway on http://{settings.host}:{settings.port} (data in {settings.home.resolve()})")
    if settings.console_enabled:
        print(f"web console on http://{settings.host}:{settings.port}/console (docs/console.md)")
    process.serve(app, settings.host, settings.port)
