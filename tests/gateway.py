"""Start the local gateway (what `make run` starts) as a real process on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port


@contextlib.contextmanager
def running_gateway(home: Path, **env: str) -> Iterator[str]:
    """Yield the base URL of a gateway serving the store in `home`; stop it (SIGTERM) afterwards."""
    port = free_port()
    environment = {**os.environ, "TIDEMQ_PORT": str(port), "TIDEMQ_HOME": str(home), **env}
    server = subprocess.Popen([sys.executable, "-m", "functions.local_gateway"], env=environment,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=1).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    raise AssertionError(f"gateway did not start: {server.stdout.read().decode()}") from None
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
