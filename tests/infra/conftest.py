"""The infrastructure tests' one synthesized app: `infra_cdk.app.build_app` synthesized once per session, under
pytest-xdist too (it builds the function and Spark assets, reused from build/infra_cdk/ and dist/spark/ when they
are current), read back from disk as the CDK CLI reads the cloud assembly it deploys."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # before jsii starts node

from infra_cdk.config import DeployConfig
from tests.infra.cloud import Synthesized

SYNTHESIZED = ".synthesized"


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    with lock.open("w") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


PROXY_CONTEXT = {
    "grpc_proxy": "true",
    "grpc_proxy_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
    "grpc_proxy_max_tasks": "6",
}
"""The app with the RocketMQ 5 gRPC proxy on, as `cdk synth -c ...` gives it (strings)."""


def synthesize(outdir: Path, context: dict[str, str] | None = None) -> None:
    from infra_cdk.app import build_app

    app, _ = build_app(context, outdir=str(outdir))
    app.synth()
    (outdir / SYNTHESIZED).touch()


def synthesized_once(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, context: dict[str, str] | None = None
) -> Synthesized:
    """The app synthesized once: by this process, or under pytest-xdist by whichever worker gets there first, into
    the session's shared temporary directory (the others wait, then read it)."""
    if worker_id == "master":
        outdir = tmp_path_factory.mktemp(name)
        synthesize(outdir, context)
    else:
        shared = tmp_path_factory.getbasetemp().parent
        outdir = shared / name
        with exclusive(shared / f"{name}.lock"):
            if not (outdir / SYNTHESIZED).is_file():
                shutil.rmtree(outdir, ignore_errors=True)
                synthesize(outdir, context)
    return Synthesized.read(outdir, DeployConfig().stack_name)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Synthesized:
    """The app as `make synth` gives it, with every option at its default."""
    return synthesized_once(tmp_path_factory, worker_id, "cdk.out")


@pytest.fixture(scope="session")
def synthesized_with_proxy(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Synthesized:
    """The app with the gRPC proxy deployed (PROXY_CONTEXT)."""
    return synthesized_once(tmp_path_factory, worker_id, "cdk.out.proxy", PROXY_CONTEXT)


@pytest.fixture(scope="session")
def functions_by_name(synthesized: Synthesized) -> dict[str, tuple[str, dict]]:
    """Each function by its TideMQ name (`produce`, ...): (logical id, properties)."""
    prefix = f"{DeployConfig().prefix}-"
    return {
        properties["FunctionName"].removeprefix(prefix): (name, properties)
        for name, resource in synthesized.of_type("AWS::Lambda::Function").items()
        if isinstance((properties := resource["Properties"]).get("FunctionName"), str)
        and properties["FunctionName"].startswith(prefix)
    }
