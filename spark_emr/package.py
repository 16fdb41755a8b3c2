"""What EMR Serverless runs, built into one directory (`make spark-package`, `python -m spark_emr package`) and
uploaded to S3 (`python -m spark_emr upload`):

    manifest.json             what is here and for which platform and Python (job runs read it, see emr.py)
    jobs/<job>.py             each job's entry point (a job run's `entryPoint`)
    tidemq-spark-code.zip     the project's modules the jobs import, and no other (`spark.submit.pyFiles`)
    tidemq-spark-env.tar.gz   the jobs' Python environment for EMR's platform (`spark.archives`, as `environment`):
        bin/python            the image's python3.X with site-packages/ first on its path (PYSPARK_PYTHON)
        site-packages/        the third-party packages, installed for the target platform from...
        wheels/               ...these wheels, fetched with `pip download --platform ... --only-binary=:all:`
                              (never this machine's installed packages), kept to check or rebuild site-packages

Which code and which packages: the jobs' imports are followed through their source (every import statement,
those inside functions too) within the project's package directories (pyproject.toml's `packages.find.where`).
A project module reached goes into the code zip. Any other import that is neither the standard library nor Spark
(pyspark, py4j: EMR brings them) is a requirement, with the version range pyproject.toml's dependencies give its
distribution; pip adds what those depend on, and the build fails if an import is then still missing.

The target: an architecture (aarch64 or x86_64) and a Python version (major.minor), manylinux wheels up to
EMR 7's glibc (Amazon Linux 2023). The archive brings packages, not an interpreter: the application's image must
have that python3.X on its PATH.
"""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import packages_distributions
from pathlib import Path

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError

from shared.settings import EmrPlatform
from tidemq_store.tiered.s3 import s3_client

REPO = Path(__file__).resolve().parents[1]
JOBS = Path(__file__).with_name("jobs")

MANIFEST = "manifest.json"
ENTRY_POINTS = "jobs"
CODE_ZIP = "tidemq-spark-code.zip"
ENVIRONMENT = "tidemq-spark-env.tar.gz"
ENVIRONMENT_ALIAS = "environment"
"""The directory a job run unpacks the environment archive into (`spark.archives=...#environment`)."""
ENVIRONMENT_PYTHON = f"./{ENVIRONMENT_ALIAS}/bin/python"

PROVIDED_BY_EMR = frozenset({"pyspark", "py4j"})
GLIBC_MINOR = 34
"""EMR 7's images are Amazon Linux 2023, glibc 2.34: wheels for manylinux_2_17 up to manylinux_2_34 run there."""
IMPLIED = {"pynamodb.signals": "blinker"}
"""Distributions a module needs that no import shows: pynamodb's signals raise on `connect` without blinker (the
serverless tables connect one), and pynamodb does not require it."""

WRAPPER = """#!/bin/sh
# The jobs' Python on EMR Serverless (PYSPARK_PYTHON={python}): the image's python{version} with this
# archive's packages first on its path. Written by spark_emr/package.py.
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$here/site-packages${{PYTHONPATH:+:$PYTHONPATH}}" exec python{version} "$@"
"""


FAILURES = (OSError, ValueError, SyntaxError, tarfile.TarError, Boto3Error, BotoCoreError, ClientError)
"""What a step turns into a PackageError (anything else is a bug, and keeps its traceback)."""


class PackageError(Exception):
    """A build or upload step failed; the message is one line naming the step."""

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"package: {step} failed: {reason}")


def jobs() -> list[str]:
    """The jobs: every module of spark_emr/jobs/, each a spark-submit entry point."""
    return sorted(path.stem for path in JOBS.glob("*.py") if not path.stem.startswith("_"))


@dataclass(frozen=True, slots=True)
class Target:
    """The platform a package is built for: an architecture (`aarch64`, `x86_64`) and a Python (`3.11`)."""

    platform: EmrPlatform
    python_version: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"3\.\d{1,2}", self.python_version):
            raise ValueError(f"python version {self.python_version!r} is not 3.X")

    def pip_options(self) -> list[str]:
        """What makes pip choose wheels for this target, whatever this machine is."""
        tags = [f"manylinux_2_{minor}_{self.platform}" for minor in range(GLIBC_MINOR, 16, -1)]
        tags.append(f"manylinux2014_{self.platform}")
        platforms = [option for tag in tags for option in ("--platform", tag)]
        return [*platforms, "--python-version", self.python_version, "--implementation", "cp", "--only-binary=:all:"]


@dataclass(slots=True)
class Imports:
    """What the jobs import: the project's modules (dotted name: file) and every other import (dotted names)."""

    modules: dict[str, Path] = field(default_factory=dict)
    third_party: set[str] = field(default_factory=set)


DISTRIBUTIONS = (REPO, REPO / "shared" / "tidemq")
"""The project's two distributions: the server (the repository's root) and the client it depends on (shared/tidemq,
which holds the vocabulary both sides share). Their code is shipped as project code, not installed from PyPI."""


def pyproject(directory: Path = REPO) -> dict:
    return tomllib.loads((directory / "pyproject.toml").read_text())


def source_roots() -> list[Path]:
    """The directories the project's packages live under (the store engine's is layers/store_engine, the client's
    shared/tidemq/src)."""
    return [
        directory / where
        for directory in DISTRIBUTIONS
        for where in pyproject(directory)["tool"]["setuptools"]["packages"]["find"]["where"]
    ]


def declared_dependencies() -> list[str]:
    """Every third-party requirement of the project's distributions (not the client itself: its code ships as the
    project's)."""
    names = {canonical(pyproject(directory)["project"]["name"]) for directory in DISTRIBUTIONS}
    return [
        dep
        for directory in DISTRIBUTIONS
        for dep in pyproject(directory)["project"]["dependencies"]
        if canonical(re.match(r"[A-Za-z0-9._-]+", dep).group()) not in names
    ]


def module_file(name: str, roots: list[Path]) -> Path | None:
    """The source of project module `name`, or None when it is not the project's."""
    for root in roots:
        base = root.joinpath(*name.split("."))
        for candidate in (base / "__init__.py", base.parent / f"{base.name}.py"):
            if candidate.is_file():
                return candidate
    return None


def imports_of(path: Path, package: str) -> Iterator[tuple[str, list[str]]]:
    """Each import in the module at `path` (of `package`): the module it names, and the names it takes from it
    (which may be submodules)."""
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            yield base, [alias.name for alias in node.names if alias.name != "*"]


def scan(entry_modules: list[str], roots: list[Path]) -> Imports:
    """Follow the imports of `entry_modules` through the project's code."""
    found = Imports()
    todo = list(entry_modules)
    while todo:
        name = todo.pop()
        if name in found.modules:
            continue
        path = module_file(name, roots)
        if path is None:
            raise ValueError(f"{name} is imported but is no module under {', '.join(map(str, roots))}")
        found.modules[name] = path
        if "." in name:
            todo.append(name.rpartition(".")[0])  # a package's __init__ runs before its modules
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for base, names in imports_of(path, package):
            top = base.partition(".")[0]
            if module_file(top, roots) is not None:
                todo.append(base)
                todo.extend(f"{base}.{n}" for n in names if module_file(f"{base}.{n}", roots) is not None)
            elif top not in sys.stdlib_module_names and top not in PROVIDED_BY_EMR:
                found.third_party.add(base)
    return found


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(third_party: set[str]) -> list[str]:
    """pyproject.toml's requirement of each distribution the imports need (and of those IMPLIED); an import no
    dependency declares is left to pip's resolution (botocore comes with boto3), and checked after install."""
    declared = {canonical(re.match(r"[A-Za-z0-9._-]+", dep).group()): dep for dep in declared_dependencies()}
    by_import = packages_distributions()
    tops = {name.partition(".")[0] for name in third_party}
    needed = {canonical(dist) for top in tops for dist in by_import.get(top, [top])}
    implied = {canonical(IMPLIED[name]) for name in third_party if name in IMPLIED}
    if undeclared := sorted(implied - declared.keys()):
        raise ValueError(f"{', '.join(undeclared)} must be in pyproject.toml's dependencies (see IMPLIED)")
    return [declared[name] for name in sorted((needed | implied) & declared.keys())]


@contextmanager
def step(name: str, doing: str, say: Callable[[str], None]) -> Iterator[None]:
    """One step of the build: say what it does; a failure becomes a PackageError naming it."""
    say(f"package: {name}: {doing}")
    try:
        yield
    except PackageError:
        raise
    except FAILURES as error:
        raise PackageError(name, str(error) or type(error).__name__) from error


def pip(*arguments: str) -> None:
    """Run this interpreter's pip; a failure is a ValueError with pip's own last error line."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *arguments]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines or [f"pip exited {done.returncode}"]
        raise ValueError(errors[-1])


def write_code_zip(path: Path, modules: dict[str, Path]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as code:
        for name, source in sorted(modules.items()):
            inside = name.replace(".", "/") + ("/__init__.py" if source.name == "__init__.py" else ".py")
            code.write(source, inside)


def write_environment(path: Path, site: Path, wheels: Path, python_version: str) -> None:
    wrapper = WRAPPER.format(python=ENVIRONMENT_PYTHON, version=python_version).encode()
    with tarfile.open(path, "w:gz", compresslevel=6) as archive:
        entry = tarfile.TarInfo("bin/python")
        entry.size, entry.mode, entry.mtime = len(wrapper), 0o755, int(time.time())
        archive.addfile(entry, io.BytesIO(wrapper))
        archive.add(site, "site-packages")
        archive.add(wheels, "wheels")


def progress(line: str) -> None:
    """One line of progress, on stderr (stdout stays for what a command answers)."""
    print(line, file=sys.stderr, flush=True)


def build(output: Path, target: Target, say: Callable[[str], None] = progress) -> dict:
    """Build the package of every job for `target` into `output`, replacing the one there; return its manifest."""
    names = jobs()
    with step("scan", f"following the imports of the jobs {', '.join(names)}", say):
        imports = scan([f"spark_emr.jobs.{job}" for job in names], source_roots())
        wanted = requirements(imports.third_party)
    say(f"package: scan: {len(imports.modules)} project modules; requirements: {' '.join(wanted)}")
    output.mkdir(parents=True, exist_ok=True)
    (output / MANIFEST).unlink(missing_ok=True)  # no manifest until the package it describes is whole
    with tempfile.TemporaryDirectory(prefix="tidemq-spark-package-") as scratch:
        wheels, site = Path(scratch, "wheels"), Path(scratch, "site-packages")
        with step("download", f"fetching wheels for {target.platform}, Python {target.python_version}", say):
            pip("download", "--dest", str(wheels), *target.pip_options(), *wanted)
        with step("environment", f"installing {len(list(wheels.iterdir()))} wheels for the target", say):
            target_options = ["--target", str(site), "--no-compile", *target.pip_options()]
            pip("install", "--no-index", "--find-links", str(wheels), *target_options, *wanted)
            check_environment(site, imports.third_party)
        with step("entry points", f"copying {len(names)} jobs into {output / ENTRY_POINTS}", say):
            shutil.rmtree(output / ENTRY_POINTS, ignore_errors=True)
            (output / ENTRY_POINTS).mkdir()
            for job in names:
                shutil.copyfile(JOBS / f"{job}.py", output / ENTRY_POINTS / f"{job}.py")
        with step("code", f"zipping {len(imports.modules)} modules into {output / CODE_ZIP}", say):
            write_code_zip(output / CODE_ZIP, imports.modules)
        with step("archive", f"packing bin/python, site-packages and wheels into {output / ENVIRONMENT}", say):
            write_environment(output / ENVIRONMENT, site, wheels, target.python_version)
        manifest = {
            "platform": target.platform,
            "python_version": target.python_version,
            "entry_points": {job: f"{ENTRY_POINTS}/{job}.py" for job in names},
            "code": CODE_ZIP,
            "environment": ENVIRONMENT,
            "python": ENVIRONMENT_PYTHON,
            "requirements": wanted,
            "wheels": sorted(path.name for path in wheels.iterdir()),
        }
    with step("manifest", f"writing {output / MANIFEST}", say):
        (output / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def check_environment(site: Path, third_party: set[str]) -> None:
    """Every third-party import is installed, in a way the environment's bin/python (PYTHONPATH) reads."""
    present = {entry.name.partition(".")[0] for entry in site.iterdir()}
    if missing := sorted({name.partition(".")[0] for name in third_party} - present):
        raise ValueError(f"the jobs import {', '.join(missing)}, which no wheel provides: declare it in pyproject.toml")
    if startup := sorted(path.name for path in site.glob("*.pth")):
        raise ValueError(f"{', '.join(startup)} would not run: PYTHONPATH entries read no .pth files")


@dataclass(frozen=True, slots=True)
class PackageUri:
    """Where a package is in S3 (TIDEMQ_EMR_PACKAGE_URI: s3://bucket/prefix)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> PackageUri:
        match = re.fullmatch(r"s3://([^/]+)/?(.*)", uri)
        if match is None:
            raise ValueError(f"{uri!r} is not s3://bucket/prefix")
        return cls(match[1], match[2].strip("/"))

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"


def package_files(manifest: dict) -> list[str]:
    """The files a manifest names, relative to the package (the manifest itself aside)."""
    return [*manifest["entry_points"].values(), manifest["code"], manifest["environment"]]


def upload(package: Path, location: PackageUri, say: Callable[[str], None] = progress) -> dict:
    """Upload the package built in `package` to `location`, the manifest last (a job run started meanwhile reads
    the previous one, whose files are all there); return the manifest."""
    with step("upload", f"copying {package} to {location.uri('')}", say):
        if not (package / MANIFEST).is_file():
            raise ValueError(f"no package in {package} (make spark-package builds one)")
        manifest = json.loads((package / MANIFEST).read_text())
        client = s3_client()
        for name in [*package_files(manifest), MANIFEST]:
            client.upload_file(str(package / name), location.bucket, location.key(name))
            say(f"package: upload: {location.uri(name)}")
    return manifest
