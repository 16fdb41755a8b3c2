"""`make run`'s server: a real HTTP server on loopback serving the Lambda handlers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import free_port


@pytest.fixture
def gateway(tmp_path):
    port = free_port()
    env = {**os.environ, "TIDEMQ_PORT": str(port), "TIDEMQ_HOME": str(tmp_path / "data")}
    server = subprocess.Popen([sys.executable, "-m", "functions.local_gateway"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{base}/health", timeout=1)
            break
        except (urllib.error.URLError, ConnectionError):
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise AssertionError(f"gateway did not start: {server.stdout.read().decode()}") from None
            time.sleep(0.1)
    yield base, tmp_path / "data"
    server.terminate()
    server.wait(timeout=30)


def test_health_answers_200_and_the_store_lives_under_tidemq_home(gateway):
    base, home = gateway
    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
        assert response.status == 200
        assert json.loads(response.read()) == {"status": "ok"}
    assert (home / "commitlog").is_dir() and (home / "metadata").is_dir()


def test_unknown_routes_are_404(gateway):
    base, _ = gateway
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{base}/no/such/route", timeout=5)
    assert raised.value.code == 404
