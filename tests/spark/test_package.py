"""The EMR package (`make spark-package`), built here for this machine's architecture and Python as it is built for
EMR's: every job's entry point, a code zip of what they import, and an environment archive whose wheels install
alone in a fresh virtualenv, where every job module then imports from the code zip with Spark beside it (as EMR
provides Spark); the archive's own bin/python, run as EMR runs it, does the same."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

JOBS = Path(__file__).parents[2] / "spark_emr" / "jobs"

PROBE = """
import importlib, json, sys

for job in sys.argv[1:]:
    importlib.import_module(job)
from tidemq_store.serverless.tables import Tables

Tables("probe")  # connects a pynamodb signal, which needs blinker: no import shows that
import boto3, spark_emr, tidemq_store

print(json.dumps({"boto3": boto3.__file__, "spark_emr": spark_emr.__file__, "tidemq_store": tidemq_store.__file__}))
"""


def job_names() -> list[str]:
    return sorted(path.stem for path in JOBS.glob("*.py") if not path.stem.startswith("_"))


@pytest.fixture(scope="module")
def manifest(emr_package: Path) -> dict:
    return json.loads((emr_package / "manifest.json").read_text())


@pytest.fixture(scope="module")
def unpacked(emr_package: Path, manifest: dict, tmp_path_factory) -> Path:
    """The environment archive unpacked, as a job run unpacks it (`environment/`)."""
    environment = tmp_path_factory.mktemp("run") / "environment"
    with tarfile.open(emr_package / manifest["environment"]) as archive:
        archive.extractall(environment, filter="data")
    return environment


@pytest.fixture(scope="module")
def spark_beside(tmp_path_factory) -> Path:
    """Spark's Python side (pyspark, py4j) alone in a directory, as EMR puts it on the workers' path."""
    spark = tmp_path_factory.mktemp("spark-python")
    for name in ("pyspark", "py4j"):
        (spark / name).symlink_to(Path(importlib.util.find_spec(name).origin).parent)
    return spark


def probe(python: Path, code_zip: Path, spark: Path, jobs: list[str], **env: str) -> dict[str, str]:
    """Import every job module with `python`, the code zip and Spark alone on its path; where the modules came
    from."""
    environment = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{code_zip}{os.pathsep}{spark}", **env}
    command = [str(python), "-c", PROBE, *(f"spark_emr.jobs.{job}" for job in jobs)]
    done = subprocess.run(command, env=environment, cwd=spark, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_package_holds_every_job_entry_point_and_the_code_they_import(emr_package, manifest):
    assert (manifest["platform"], manifest["python_version"]) == (platform.machine(), f"3.{sys.version_info.minor}")
    assert sorted(manifest["entry_points"]) == job_names()
    for job, entry_point in manifest["entry_points"].items():
        assert (emr_package / entry_point).read_bytes() == (JOBS / f"{job}.py").read_bytes()

    with zipfile.ZipFile(emr_package / manifest["code"]) as code:
        inside = set(code.namelist())
    assert {f"spark_emr/jobs/{job}.py" for job in job_names()} <= inside
    assert {"spark_emr/__init__.py", "spark_emr/session.py", "spark_emr/tier.py", "tidemq_store/__init__.py"} <= inside
    assert {
        "tidemq_protocol/record/__init__.py",
        "tidemq_protocol/record/reader.py",
        "tidemq_protocol/record/v1.py",
        "tidemq_protocol/record/v2.py",
        "tidemq_store/tiered/container.py",
        "tidemq_store/serverless/store.py",
    } <= inside
    assert not inside & {"spark_emr/__main__.py", "spark_emr/package.py", "spark_emr/emr.py"}  # not imported by jobs
    assert not [name for name in inside if name.startswith(("shared/", "functions/", "tidemq/"))]

    with tarfile.open(emr_package / manifest["environment"]) as archive:
        members = {member.name: member for member in archive.getmembers()}
    assert members["bin/python"].mode & 0o111
    wheels = sorted(name.removeprefix("wheels/") for name in members if name.endswith(".whl"))
    assert wheels == manifest["wheels"]
    assert not [wheel for wheel in wheels if wheel.lower().startswith(("pyspark", "py4j"))]  # EMR brings Spark
    binary = [wheel for wheel in wheels if not wheel.endswith("-none-any.whl")]
    assert binary and all(f"cp3{sys.version_info.minor}" in w and platform.machine() in w for w in binary)
    assert "site-packages/boto3/__init__.py" in members


def test_the_wheels_install_alone_in_a_fresh_virtualenv_where_every_job_imports_from_the_code_zip(
    emr_package, manifest, unpacked, spark_beside, tmp_path
):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    wheels = ["--no-index", "--find-links", str(unpacked / "wheels"), *manifest["requirements"]]
    install = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python), "install", *wheels]
    installed = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr

    found = probe(python, emr_package / manifest["code"], spark_beside, job_names())
    assert found["boto3"].startswith(str(venv))
    assert found["spark_emr"].startswith(str(emr_package / manifest["code"]))
    assert found["tidemq_store"].startswith(str(emr_package / manifest["code"]))


def test_the_archives_python_runs_the_images_python_over_its_own_packages(
    emr_package, manifest, unpacked, spark_beside, tmp_path
):
    """bin/python is what PYSPARK_PYTHON names on EMR: the image's python3.X (here this machine's, first on PATH)
    with the archive's site-packages first on its path."""
    image = tmp_path / "image-bin"
    image.mkdir()
    version = manifest["python_version"]
    (image / f"python{version}").symlink_to(Path(sys.base_prefix) / "bin" / f"python{version}")
    path = os.pathsep.join([str(image), "/usr/bin", "/bin"])
    found = probe(unpacked / "bin" / "python", emr_package / manifest["code"], spark_beside, job_names(), PATH=path)
    assert found["boto3"].startswith(str(unpacked / "site-packages"))
    assert found["spark_emr"].startswith(str(emr_package / manifest["code"]))
