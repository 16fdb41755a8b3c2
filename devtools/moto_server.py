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
import copy
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
    undo_transactions_by_item()
    app = DomainDispatcherApplication(create_backend_app)
    make_server("127.0.0.1", port, app, threaded=False, request_handler=MotoRequestHandler).serve_forever()


def undo_transactions_by_item() -> None:
    """Make moto's TransactWriteItems cost what its items do, not what its tables hold.

    moto 5 deep-copies every table a transaction names before applying it, to restore them if it is cancelled: a
    transaction costs time in proportion to the table, so a serverless run slows as its tables grow (the fault load,
    at 50 msg/s: the moto server's CPU per message from 15 ms to 46 ms in three minutes, the server saturated and
    produce down from 56 to 21 msg/s; the gateway's own CPU per message unchanged). Here the tables are not copied;
    the items the transaction names are kept before it runs and put back (or deleted, when there were none) if it
    is cancelled. That is the same undo, given that the server applies one request at a time (`serve`)."""
    import moto.dynamodb.models as dynamodb
    from moto.dynamodb.models.table import Table

    copying = [False]  # whether moto's deep copy of the tables is on (an item this cannot read ahead of moto)

    class TablesNotCopied:  # what `copy` is inside moto.dynamodb.models: a Table's "copy" is itself
        @staticmethod
        def deepcopy(value, memo=None):
            return value if isinstance(value, Table) and not copying[0] else copy.deepcopy(value, memo)

    dynamodb.copy = TablesNotCopied
    apply = dynamodb.DynamoDBBackend.transact_write_items

    def item_before(backend, operation: str, request: dict) -> tuple[str, dict, dict | None]:
        """(table, key, the item's attributes now, or None) of one entry of a transaction."""
        table = backend.get_table(request["TableName"])
        if operation == "Put":
            names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
            key = {name: request["Item"][name] for name in names}
        else:
            key = request["Key"]
        before = backend.get_item(table.name, key)
        return table.name, key, copy.deepcopy(before.to_json()["Attributes"]) if before else None

    def transact_write_items(backend, transact_items: list[dict]) -> None:
        try:
            kept = [item_before(backend, *next(iter(entry.items()))) for entry in transact_items]
        except Exception:  # malformed: moto's own checks answer it, its tables copied as it does
            copying[0] = True
            try:
                return apply(backend, transact_items)
            finally:
                copying[0] = False
        try:
            apply(backend, transact_items)
        except Exception:
            for table_name, key, attributes in reversed(kept):
                if attributes is None:
                    backend.delete_item(table_name, key)
                else:
                    backend.put_item(table_name, attributes)
            raise

    dynamodb.DynamoDBBackend.transact_write_items = transact_write_items


if __name__ == "__main__":
    serve(int(sys.argv[1]))
