"""What the functions and the Spark jobs are deployed from, built without Docker into `build/infra_cdk/`:

    code-<hash>/                     the functions' own modules (functions/, shared/): each handler's imports
                                     followed through the project, as the Spark package follows the jobs'
    engine-<hash>/python/            the store engine (layers/store_engine/tidemq_store) and the vocabulary it
                                     shares with the client (shared/tidemq/src/tidemq_protocol), a Lambda layer
    dependencies-<hash>/python/      the third-party packages the handlers import, a Lambda layer, installed with
                                     `pip install --target ... --platform manylinux_2_34..2_17_aarch64
                                     --python-version 3.12 --implementation cp --only-binary=:all:` (Lambda's
                                     python3.12 runs on Amazon Linux 2023, glibc 2.34, as EMR 7 does), never from
                                     this machine's installed packages

    proxy-<hash>/                    the gRPC proxy's container image context (infra_cdk/grpc_proxy.py): its
                                     Dockerfile (infra_cdk/proxy/Dockerfile), app/ (what `python -m
                                     servers.grpc_proxy` imports, and the whole engine) and packages/ (its
                                     third-party packages, installed as the dependencies layer's are): the image
                                     only copies them onto Python 3.12, so an arm64 image builds on any machine

Each directory is named by a hash of what it holds, written whole into a scratch directory and then renamed into
place, so a second synth (or a concurrent one) reuses it: the dependencies are downloaded once per set of versions.
Versions are those of this virtualenv (the ones the tests ran with), as constraints.

The Spark package is `make spark-package`'s (spark_emr/package.py), built here when missing or out of date.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

from shared.settings import EmrPlatform
from spark_emr import package as spark_package
from spark_emr.package import REPO, Imports, Target, canonical, pip, requirements, scan, source_roots

BUILD = REPO / "build" / "infra_cdk"
ENGINE = REPO / "layers" / "store_engine" / "tidemq_store"
PROTOCOL = REPO / "shared" / "tidemq" / "src" / "tidemq_protocol"
ENGINE_PACKAGES = (ENGINE, PROTOCOL)
LAMBDA_TARGET = Target(EmrPlatform.AARCH64, "3.12")
LAYER_ROOT = "python"
"""Where a Lambda layer's Python packages go: /opt/python is on the python3.12 runtime's path."""
CODE_PACKAGES = ("functions", "shared")
"""The project packages in the function code; the engine (tidemq_store, with tidemq_protocol) comes as its own
layer."""
LOCAL_ONLY = frozenset({"moto", "werkzeug"})
"""Imports of the development tools (devtools/: the embedded moto server), which nothing Lambda runs imports (an
import-linter contract): never shipped (tests/infra/test_assets.py checks no handler reaches them)."""
STALE_AFTER_S = 3600.0
PROXY_ENTRY = "servers.grpc_proxy.__main__"
PROXY_DOCKERFILE = REPO / "infra_cdk" / "proxy" / "Dockerfile"
IMAGE_CODE, IMAGE_PACKAGES = "app", "packages"
"""Where the proxy's image context holds the project's modules and the third-party packages (the Dockerfile's
PYTHONPATH)."""


def handler_modules(functions: Iterable[str]) -> list[str]:
    """The module of each function's entry point (`functions.<name>.handler`, as functions/routes.py names them)."""
    return [f"functions.{name}.handler" for name in functions]


def lambda_imports(functions: Iterable[str]) -> Imports:
    """What the handlers of `functions` import, followed through the project's code."""
    return scan(handler_modules(functions), source_roots())


def third_party_tops(imports: Imports) -> set[str]:
    """The top-level names of the third-party imports the functions need in Lambda."""
    return {name.partition(".")[0] for name in imports.third_party} - LOCAL_ONLY


def lambda_requirements(imports: Imports) -> list[str]:
    """pyproject.toml's requirement for each distribution the functions import (extras included: Powertools'
    tracer), plus by name each imported distribution pyproject.toml does not declare (it arrives through another
    one locally, and may not in Lambda)."""
    tops = third_party_tops(imports)
    declared = requirements({name for name in imports.third_party if name.partition(".")[0] in tops})
    named = {canonical(Requirement(spec).name) for spec in declared}
    by_import = packages_distributions()
    undeclared = {canonical(dist) for top in tops for dist in by_import.get(top, [top])} - named
    return sorted(declared) + sorted(undeclared)


def closure(specs: Iterable[str]) -> dict[str, str]:
    """Every distribution `specs` need on Lambda (markers judged for CPython 3.12 on Linux aarch64), with the version
    this virtualenv has: the constraints of the install, and what the asset test expects to find."""
    environment = {
        **default_environment(),
        "python_version": LAMBDA_TARGET.python_version,
        "python_full_version": f"{LAMBDA_TARGET.python_version}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": LAMBDA_TARGET.platform.value,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    found: dict[str, str] = {}
    todo = [Requirement(spec) for spec in specs]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        requirement = todo.pop()
        name = canonical(requirement.name)
        extras = frozenset(requirement.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise ValueError(f"{name} is needed in Lambda but not installed here: pip install it first") from None
        found[name] = dist.version
        for line in dist.requires or []:
            need = Requirement(line)
            wanted = [{**environment, "extra": extra} for extra in extras] or [{**environment, "extra": ""}]
            if need.marker is None or any(need.marker.evaluate(env) for env in wanted):
                todo.append(need)
    return dict(sorted(found.items()))


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _materialize(name: str, digest: str, fill) -> Path:
    """`BUILD/<name>-<digest>`, made by `fill(scratch)` unless it is there already; stale siblings go."""
    BUILD.mkdir(parents=True, exist_ok=True)
    final = BUILD / f"{name}-{digest}"
    if not final.is_dir():
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=BUILD))
        try:
            fill(scratch)
            os.rename(scratch, final)
        except OSError:
            if not final.is_dir():  # not a concurrent build that finished first
                raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    for sibling in BUILD.glob(f"{name}-*"):
        if sibling != final and time.time() - sibling.stat().st_mtime > STALE_AFTER_S:
            shutil.rmtree(sibling, ignore_errors=True)
    return final


def _source_digest(files: dict[str, Path]) -> str:
    hashed = hashlib.sha256()
    for inside, source in sorted(files.items()):
        hashed.update(inside.encode() + b"\0" + source.read_bytes() + b"\0")
    return hashed.hexdigest()[:16]


def _copy_files(files: dict[str, Path], root: Path) -> None:
    for inside, source in files.items():
        target = root / inside
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def module_path(name: str, source: Path) -> str:
    """Where module `name` goes in a package tree."""
    return name.replace(".", "/") + ("/__init__.py" if source.name == "__init__.py" else ".py")


@dataclass(frozen=True)
class LambdaAssets:
    """The directories the functions are deployed from, and what went into them."""

    code: Path
    engine: Path
    dependencies: Path
    requirements: tuple[str, ...]
    distributions: dict[str, str]
    imports: Imports


PACKAGE_DATA = ("functions/console/templates", "functions/console/static")
"""Files beside the code that a function reads at run time (the console's pages and vendored front-end files)."""


def code_files(imports: Imports) -> dict[str, Path]:
    modules = {
        module_path(name, source): source
        for name, source in imports.modules.items()
        if name.partition(".")[0] in CODE_PACKAGES
    }
    if "functions/console/handler.py" not in modules:
        return modules
    data = {
        path.relative_to(REPO).as_posix(): path
        for directory in PACKAGE_DATA
        for path in sorted((REPO / directory).iterdir())
        if path.is_file()
    }
    return {**modules, **data}


def engine_files() -> dict[str, Path]:
    return {
        f"{LAYER_ROOT}/{path.relative_to(package.parent).as_posix()}": path
        for package in ENGINE_PACKAGES
        for path in sorted(package.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def build_code(imports: Imports) -> Path:
    files = code_files(imports)
    return _materialize("code", _source_digest(files), lambda root: _copy_files(files, root))


def build_engine() -> Path:
    files = engine_files()
    return _materialize("engine", _source_digest(files), lambda root: _copy_files(files, root))


def build_dependencies(specs: list[str], pins: dict[str, str]) -> Path:
    """The dependencies layer for `specs`, constrained to `pins`; downloaded only when no layer of these exact
    versions was built before."""

    def install(root: Path) -> None:
        constraints = root / "constraints.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
        target = ["--target", str(root / LAYER_ROOT), "--no-compile", *LAMBDA_TARGET.pip_options()]
        pip("install", "--quiet", *target, "--constraint", str(constraints), *specs)
        constraints.unlink()
        (root / "requirements.json").write_text(json.dumps({"requirements": specs, "versions": pins}, indent=2))

    return _materialize("dependencies", _digest(specs, pins, LAMBDA_TARGET.pip_options()), install)


def build_lambda_assets(functions: Iterable[str]) -> LambdaAssets:
    """Build (or find built) the code, engine and dependencies of `functions`' handlers."""
    functions = list(functions)
    imports = lambda_imports(functions)
    specs = lambda_requirements(imports)
    pins = closure(specs)
    return LambdaAssets(
        code=build_code(imports),
        engine=build_engine(),
        dependencies=build_dependencies(specs, pins),
        requirements=tuple(specs),
        distributions=pins,
        imports=imports,
    )


def build_proxy_context() -> Path:
    """The gRPC proxy's image context (the module docstring says what it holds); its packages are those of a Lambda
    layer (CPython 3.12, manylinux aarch64), built once per set of versions."""
    imports = scan([PROXY_ENTRY], source_roots())
    specs = lambda_requirements(imports)
    dependencies = build_dependencies(specs, closure(specs))
    project = {module_path(name, source): source for name, source in imports.modules.items()}
    engine = {inside.removeprefix(f"{LAYER_ROOT}/"): source for inside, source in engine_files().items()}
    files = {f"{IMAGE_CODE}/{inside}": source for inside, source in {**project, **engine}.items()}
    files[PROXY_DOCKERFILE.name] = PROXY_DOCKERFILE

    def fill(root: Path) -> None:
        _copy_files(files, root)
        shutil.copytree(dependencies / LAYER_ROOT, root / IMAGE_PACKAGES)

    return _materialize("proxy", _digest(_source_digest(files), dependencies.name), fill)


# ---- the Spark package ------------------------------------------------------------------------------


def spark_package_is_current(directory: Path, target: Target) -> bool:
    """Whether the package in `directory` is whole, for `target`, and holds the jobs and code as they are now."""
    manifest_file = directory / spark_package.MANIFEST
    if not manifest_file.is_file():
        return False
    manifest = json.loads(manifest_file.read_text())
    if manifest.get("platform") != target.platform or manifest.get("python_version") != target.python_version:
        return False
    names = spark_package.jobs()
    if set(manifest.get("entry_points", {})) != set(names):
        return False
    for job in names:
        entry = directory / spark_package.ENTRY_POINTS / f"{job}.py"
        if not entry.is_file() or entry.read_bytes() != (spark_package.JOBS / f"{job}.py").read_bytes():
            return False
    imports = scan([f"spark_emr.jobs.{job}" for job in names], source_roots())
    if manifest.get("requirements") != requirements(imports.third_party):
        return False
    try:
        with zipfile.ZipFile(directory / spark_package.CODE_ZIP) as code:
            packed = {name: code.read(name) for name in code.namelist()}
    except (OSError, zipfile.BadZipFile):
        return False
    wanted = {module_path(name, source): source.read_bytes() for name, source in imports.modules.items()}
    return packed == wanted and (directory / spark_package.ENVIRONMENT).is_file()


def ensure_spark_package(directory: Path, target: Target) -> dict:
    """The manifest of the Spark package in `directory`, built first (as `make spark-package` does) when it is
    missing, for another target, or older than the jobs' code."""
    if not spark_package_is_current(directory, target):
        spark_package.build(directory, target, lambda line: print(line, file=sys.stderr, flush=True))
    return json.loads((directory / spark_package.MANIFEST).read_text())
