"""The client stands alone: its wheel, installed into a new virtualenv with its dependencies from the package
index, brings no server part, and that virtualenv's own `tidemq` command creates a topic, produces and consumes
through a live gateway (run from the server's virtualenv)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateways import gateway_as_admin

pytestmark = pytest.mark.slow  # building and installing take a while: handed out first

CLIENT_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "tidemq"
SERVER_ONLY = ("rocksdict", "moto", "uvicorn", "pynamodb", "aws-lambda-powertools", "boto3", "tidemq-server")
"""Distributions the server needs and the client must not bring."""

INSTALLED = """
import importlib.metadata, json, tidemq, tidemq_protocol
names = sorted(dist.metadata["Name"].lower().replace("_", "-") for dist in importlib.metadata.distributions())
print(json.dumps({"distributions": names, "packages": [tidemq.__file__, tidemq_protocol.__file__]}))
"""


def run(*command: str | Path, cwd: Path, input: str | None = None) -> str:
    """Run `command` to completion in `cwd`, with no trace of this process's virtualenv in its environment; its
    stdout (a failure shows stderr)."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "TIDEMQ_URL")
    }
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=environment, input=input, capture_output=True, text=True
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    """A new virtualenv holding the client's wheel and what it depends on, nothing else. The wheel is built from a
    copy of the source, so the build writes nothing into the repository; this process's pip installs into the
    virtualenv (`--python`), which saves installing pip there."""
    root = tmp_path_factory.mktemp("client-only")
    source = root / "source"
    shutil.copytree(CLIENT_SOURCE, source, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"))
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", root / "wheels", source, cwd=root)
    (wheel,) = (root / "wheels").glob("tidemq-*.whl")
    run(sys.executable, "-m", "venv", "--without-pip", root / "venv", cwd=root)
    run(sys.executable, "-m", "pip", "--python", root / "venv" / "bin" / "python", "install", "-q", wheel, cwd=root)
    return root / "venv"


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory) -> Iterator[str]:
    """A gateway from the server's virtualenv; this process (and so the client's `tidemq`) signs as its super user."""
    with gateway_as_admin(tmp_path_factory.mktemp("client-gateway") / "data") as url:
        yield url


def test_the_client_wheel_installs_no_server_dependency(client_venv, tmp_path):
    installed = json.loads(run(client_venv / "bin" / "python", "-c", INSTALLED, cwd=tmp_path))
    assert "tidemq" in installed["distributions"]
    assert [name for name in SERVER_ONLY if name in installed["distributions"]] == []
    assert all(Path(package).is_relative_to(client_venv) for package in installed["packages"]), installed


def test_the_client_alone_creates_a_topic_produces_and_consumes(client_venv, gateway_url, tmp_path):
    def tidemq(*args: str, input: str | None = None) -> str:
        return run(client_venv / "bin" / "tidemq", "--url", gateway_url, *args, cwd=tmp_path, input=input)

    created = tidemq("topic", "create", "standalone", "--queues", "2")
    assert created == "created topic 'standalone': 2 queues, retention 3d, NORMAL\n"
    produced = tidemq("produce", "standalone", "--key-prefix", "line-", "--tag", "alone", input="one\ntwo\nthree\n")
    assert produced.startswith("produced 3 messages in ")
    consumed = [json.loads(line) for line in tidemq("consume", "standalone", "--group", "alone").splitlines()]
    assert sorted((m["body"], m["keys"], m["tag"]) for m in consumed) == [
        ("one", ["line-1"], "alone"),
        ("three", ["line-3"], "alone"),
        ("two", ["line-2"], "alone"),
    ]
    assert tidemq("consume", "standalone", "--group", "alone") == ""  # the group committed what it printed
