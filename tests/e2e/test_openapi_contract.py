"""Schemathesis against /openapi.json on a live local server, each backend, with every check in every phase
(`st run --checks all`: examples, coverage, fuzzing, and stateful sequences along the document's links).

It holds the document exact: a request the document calls valid is accepted, or refused only for the store's state
(404, 409, and for KV 410 and 412: tests/schemathesis.toml); one it calls invalid is refused; every answer has a
status, content type, headers and body the document declares; a resource deleted stays deleted and one created is
there; a method a path does not have is a 405 naming the ones it has; nothing is a 5xx.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import push_targets
from tests.gateways import gateway_as_admin
from tidemq import Admin, Producer

ROOT = Path(__file__).parents[2]
CONFIG = ROOT / "tests" / "schemathesis.toml"
EXAMPLES = {"embedded": 25, "serverless": 10}
"""Per operation and phase. The serverless backend on moto takes seconds for a topic of 1024 queues (a request per
queue), which the fuzzer creates often: its run takes minutes (3-5 on two cores), so make test-long runs it."""
QUICK_EXAMPLES = 8
"""make test's run on the embedded backend (a minute at 25 examples; make test-long runs those)."""
LONGEST_ANSWER_S = 120
"""A hang, not a speed: the machine is shared, and the API's longest answer is a long poll (1 s here)."""


@pytest.fixture(
    params=[
        pytest.param(("embedded", QUICK_EXAMPLES), id="embedded-quick"),
        pytest.param(("embedded", EXAMPLES["embedded"]), marks=pytest.mark.long, id="embedded"),
        pytest.param(("serverless", EXAMPLES["serverless"]), marks=pytest.mark.long, id="serverless"),
    ]
)
def served(request, tmp_path, monkeypatch) -> Iterator[tuple[str, int]]:
    """A gateway whose long polls wait at most 1 s (its document says so), seeded through the SDK, with this
    process (and so Schemathesis, which inherits its environment) signing as its super user, and a webhook on
    loopback (which the gateway allows) for the subscriptions Schemathesis sets; yields its URL and how many
    examples to try."""
    backend, examples = request.param
    settings = {
        "TIDEMQ_BACKEND": backend,
        "TIDEMQ_MAX_GET_WAIT_MS": "1000",
        "TIDEMQ_GRPC_ENABLED": "false",  # the HTTP API's contract
        **push_targets.ALLOWED,
    }
    with push_targets.Webhook() as webhook, gateway_as_admin(tmp_path / "data", **settings) as url:
        monkeypatch.setenv("TIDEMQ_CONTRACT_WEBHOOK", webhook.url)
        with Admin(url) as admin:
            admin.create_topic("orders", queues=2)
            admin.create_group("g")
        with Producer("orders", url=url) as producer:
            producer.send("hello", keys=["k"], tag="A")
        yield url, examples


def schemathesis(base_url: str, examples: int, workdir: Path) -> subprocess.CompletedProcess[str]:
    """`st run` with every check against the live server; `tests.schemathesis_hooks` signs each request and teaches
    it the binary batch encoding. Its cache goes to `workdir`, not the repository."""
    command = [
        *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "run", f"{base_url}/openapi.json"),
        *("--checks", "all", "--max-examples", str(examples)),
        *("--request-timeout", str(LONGEST_ANSWER_S), "--max-response-time", str(LONGEST_ANSWER_S)),
    ]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks", "PYTHONPATH": path}
    return subprocess.run(command, cwd=workdir, env=environment, capture_output=True, text=True, timeout=3600)


def test_schemathesis_with_every_check_finds_nothing(served, tmp_path):
    url, examples = served
    run = schemathesis(url, examples, tmp_path)
    assert run.returncode == 0, run.stdout[-40_000:] + run.stderr[-5_000:]
