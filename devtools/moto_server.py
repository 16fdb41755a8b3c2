"""The embedded moto server: S3 and DynamoDB with no cloud account, over real HTTP on a free loopback port, for local
runs and tests only (`TIDEMQ_LOCAL_AWS=moto`; `shared.aws.connect` says where a process's AWS is).

moto keeps its data in memory: it is started only when asked for, never as a fallback (a process that silently fell
back to it would report `s3://my-bucket` while its uploads vanish at the next restart). The server is a child
process (its own interpreter, as a remote S3 would be: it does not compete for ours), stopped with its owner.

The server answers one request at a time (`python -m devtools.moto_server PORT`): moto does not make a
DynamoDB transaction atomic against concurrent requests, and DynamoDB does; serving them one by one
gives the serializability the serverless backend's protocol relies on (and costs nothing here: moto
holds one interpreter lock either way).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from servers.process import die_with_parent, free_port

LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


class LocalAws:
    """A moto server on 127.0.0.1; `endpoint` is its URL, `env` what points boto3 at it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {"AWS_ENDPOINT_URL": self.endpoint, **LOCAL_CREDENTIALS}
        self._server: subprocess.Popen | None = None

    description = "the embedded moto server: in memory, gone when this process stops"

    def start(self, timeout_s: float = 60) -> LocalAws:
        self._server = subprocess.Popen(
            [sys.executable, "-m", "devtools.moto_server", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):  # not up yet, or slow to answer
                if self._server.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the moto server on port {self.port} did not start") from None
                time.sleep(0.1)

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (Linux)."""
        fields = Path(f"/proc/{self._server.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._server is not None and self._server.poll() is None:
            self._server.terminate()
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        atexit.unregister(self.stop)

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve(port: int) -> None:
    """Serve moto on 127.0.0.1:`port`, one request at a time, until terminated."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.server import MotoRequestHandler
    from werkzeug.serving import make_server

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    make_server("127.0.0.1", port, app, threaded=False, request_handler=MotoRequestHandler).serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
