"""Server processes, started, waited for and stopped: the one way tests, benchmarks and the servers themselves do it.

    port = free_port()                                   # a loopback port no one listens on
    server = start_server(["-m", "servers.gateway"], env, log)
    wait_healthy(server, f"http://127.0.0.1:{port}", log)  # its /health answers
    stop_server(server)                                   # SIGTERM, then SIGKILL if it lingers

`running_gateway` does all of it for a local gateway serving a store directory; `serve` is what the servers' own
`main` calls, and `startup_done` what their startup calls last. A child started with
`preexec_fn=die_with_parent` is sent SIGTERM when its parent dies, even by SIGKILL, so no server outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1


# Servers started here listen on ports below Linux's ephemeral range (32768-60999), so no client connection of any
# process can take a port between free_port choosing it and the server binding it; each process walks the range
# from its own pid-derived start, so processes running side by side (parallel test workers, a gateway and the moto
# server it starts) do not pick the same port either.
PORT_RANGE = range(10000, 32768)
_next_port = PORT_RANGE.start + (os.getpid() * 7919) % len(PORT_RANGE)


def free_port() -> int:
    """A loopback port no one listens on, for a server about to start."""
    global _next_port
    for _ in range(len(PORT_RANGE)):
        port, _next_port = _next_port, PORT_RANGE.start + (_next_port + 1 - PORT_RANGE.start) % len(PORT_RANGE)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use
                continue
            return port
    raise RuntimeError(f"no free loopback port in {PORT_RANGE.start}-{PORT_RANGE.stop - 1}")


def serve(app, host: str, port: int, **options) -> None:
    """Serve an ASGI app (a gateway, a container) with uvicorn until SIGTERM or Ctrl-C, its lifespan on.

    SIGTERM becomes SystemExit once uvicorn has shut down (uvicorn raises the signal that stopped it again), so the
    process's atexit hooks run (the store closed, a LocalStack it started stopped) instead of dying with them undone.
    Answers in flight get `stream.shutdown_grace_s()` to finish; `options` go to `uvicorn.run` (e.g. log_config)."""
    import uvicorn

    from servers import stream

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=stream.shutdown_grace_s(),
        **options,
    )


def startup_done() -> None:
    """The last step of a server's startup (the gateway, the container, the gRPC proxy alone): what it made to
    start (modules, routes, models, the opened store: some 300,000 objects) is left out of the garbage collector's
    full collections from now on (`gc.freeze`), so that one walks only what serving made. A full collection over
    all of it took 50-150 ms, every message in flight waiting (seen in the end-to-end latencies of
    `bench/peers.sh`: docs/performance.md, "Where the end-to-end tail came from")."""
    gc.collect()
    gc.freeze()


def die_with_parent() -> None:
    """In the child: receive SIGTERM when the parent dies, even by SIGKILL (Linux), so no server outlives it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def running_gateway(home: Path, command: Sequence[str] = ("-m", "servers.gateway"), **env: str) -> Iterator[str]:
    """Run a gateway process serving the store in `home` on a free loopback port (`env`: more settings,
    e.g. TIDEMQ_FLUSH_DISK_TYPE="ASYNC"; `command`: Python's arguments, a test's wrapper of this module); yield
    its base URL, then stop it with SIGTERM."""
    port = free_port()
    environment = {**os.environ, "TIDEMQ_PORT": str(port), "TIDEMQ_HOME": str(home), **env}
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    server = start_server(command, environment, home / "gateway.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(server, base, home / "gateway.log")
        yield base
    finally:
        stop_server(server)


def start_server(command: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start `python <command>` (a gateway, a container), its output appended to `log`: a file, not a pipe (a full
    pipe would stall the server). A gateway's gRPC proxy listens on a free port unless `env` names one, so that
    servers side by side do not all ask for the default one."""
    env = {"TIDEMQ_GRPC_PORT": str(free_port()), **env}
    with log.open("ab") as output:
        return subprocess.Popen([sys.executable, *command], env=env, stdout=output, stderr=subprocess.STDOUT)


def wait_healthy(server: subprocess.Popen, base: str, log: Path, timeout_s: float = 180) -> None:
    """Return once `base`/health answers; RuntimeError with the server's output (and the server killed) if it
    stops first or does not answer within `timeout_s` (a gateway that starts LocalStack takes 10-20 s, more on
    busy cores)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{base}/health", timeout=1).close()
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):  # not up yet, or slow to answer
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"{base} did not start: {log.read_text(errors='replace')}") from None
            time.sleep(0.1)


def stop_server(server: subprocess.Popen, timeout_s: float = 90) -> None:
    """Stop a server with SIGTERM, and SIGKILL if it takes longer than `timeout_s` (its own shutdown: a LocalStack
    it started takes up to ~25 s to stop)."""
    if server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
