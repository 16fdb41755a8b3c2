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


def synthesize(outdir: Path) -> None:
    from infra_cdk.app import build_app

    app, _ = build_app(outdir=str(outdir))
    app.synth()
    (outdir / SYNTHESIZED).touch()


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Synthesized:
    """The app synthesized once: by this process, or under pytest-xdist by whichever worker gets there first, into
    the session's shared temporary directory (the others wait, then read it)."""
    if worker_id == "master":
        outdir = tmp_path_factory.mktemp("cdk.out")
        synthesize(outdir)
    else:
        shared = tmp_path_factory.getbasetemp().parent
        outdir = shared / "cdk.out"
        with exclusive(shared / "cdk.out.lock"):
            if not (outdir / SYNTHESIZED).is_file():
                shutil.rmtree(outdir, ignore_errors=True)
                synthesize(outdir)
    return Synthesized.read(outdir, DeployConfig().stack_name)


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
