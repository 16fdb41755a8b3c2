"""LocalStack running: started in host mode on a free loopback port with its files under a home directory, ready
once S3 and DynamoDB answer, and stopped together with every process it started (installed first if need be).

- Host mode (`python -m localstack.runtime.main`, `OVERRIDE_IN_DOCKER=0`: else it writes under /var/lib/localstack,
  /etc/localstack and /tmp/localstack) with every directory under `FILESYSTEM_ROOT`.
- Queue URLs: `SQS_ENDPOINT_STRATEGY=path` alone still names the host `localhost.localstack.cloud`, which resolves
  only through public DNS; `LOCALSTACK_HOST=127.0.0.1:<port>` makes them `<endpoint>/queue/<region>/<account>/<name>`.
- `GATEWAY_LISTEN=127.0.0.1:<port>` alone binds all interfaces: its twisted gateway drops the host of an IPv4
  address (`runtime/server/twisted.py`: "TODO: interface = host?"). LocalStack therefore starts through
  `_LOOPBACK_MAIN`, which makes twisted's TCP4 server endpoints default to 127.0.0.1 (its hypercorn gateway,
  `GATEWAY_SERVER=hypercorn`, binds the host but moved S3 bytes ~40% slower here). DynamoDB Local's JVM still listens
  on all interfaces, on a random port: it has no option to choose.
- Its account id is `000000000000` (moto's is `123456789012`): code takes it from ARNs, never from a constant.

What one LocalStack writes lives under `<home>/localstack` (its FILESYSTEM_ROOT, whose `usr/lib/localstack` links to
the installed `.localstack/lib`), its log in `<home>/localstack.log`. Like the embedded moto server, its state lasts
as long as it runs: each start begins empty (persistence across restarts is not enabled).

LocalStack starts DynamoDB Local in a session of its own, so stopping it by process group alone would leave the JVM
running: every process it starts inherits a tag in its environment (`TAG_VARIABLE`), and `stop` ends the tagged
processes and LocalStack's descendants, then checks that none is left.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

from devtools.moto_server import LOCAL_CREDENTIALS
from servers.process import die_with_parent, free_port

from .install import REPO_ROOT, STATIC_LIBS, Installation, install
from .report import LocalStackError, say, tail

SERVICES = "s3,dynamodb,sqs,events"
READY_SERVICES = ("s3", "dynamodb")  # what start waits for
READY_STATES = ("available", "running")
TAG_VARIABLE = "TIDEMQ_LOCALSTACK_TAG"
STOP_GRACE_S = 20  # LocalStack's own shutdown (it stops DynamoDB Local) takes ~6 s on 2 busy cores

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
        say(f"starting LocalStack on {self.endpoint} (files under {self.filesystem_root}, log {self.log_path})")
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
                raise LocalStackError(f"starting LocalStack: it {why}; {self.log_path} ends:\n{self.log_tail()}")
            time.sleep(0.25)
        say(f"LocalStack ready on {self.endpoint} after {time.monotonic() - started:.1f} s")
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

    def log_tail(self) -> str:
        """The end of its log, for an error message."""
        try:
            return tail(self.log_path.read_text(errors="replace"))
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
