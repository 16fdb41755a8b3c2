"""`tidemq kv ...`, run as the installed console script against a live local gateway (the embedded backend)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests.e2e.conftest import Gateway
from tests.gateways import gateway_as_admin
from tidemq import KV
from tidemq.cli import cli
from tidemq_protocol.kv import Entry, NamespaceConfig, Snapshot

TIDEMQ = Path(sys.executable).parent / "tidemq"


def command(url: str, *args: str | Path) -> list[str]:
    return [str(TIDEMQ), "--url", url, *map(str, args)]


def interruptible() -> None:
    """In the child, before it runs: Ctrl-C as a terminal sends it. A test run started in the background
    (`make test &`) ignores SIGINT, and a child inherits that: it would never see the Ctrl-C the test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "TIDEMQ_URL"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[Gateway]:
    """The embedded backend's gateway only: each command is a process of its own (about 1 s to start), and what a
    command sends is the SDK's requests, which test_kv_sdk.py runs on both backends."""
    home = tmp_path_factory.mktemp("kv-cli-gateway") / "data"
    with gateway_as_admin(home, TIDEMQ_BACKEND="embedded") as url:
        yield Gateway(url, home, "embedded")


@pytest.fixture(scope="module")
def tidemq(gateway):
    """Run `tidemq --url <gateway> ARGS...` to completion; stdin from `input` (bytes)."""

    def run(*args: str | Path, input: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            command(gateway.url, *args), input=input, capture_output=True, timeout=60, env=environment()
        )

    return run


@pytest.fixture(scope="module")
def kv(gateway) -> Iterator[KV]:
    """The SDK, for what a test sets up or checks around the command it runs."""
    with KV(gateway.url) as sdk:
        yield sdk


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert (result.returncode, result.stderr) == (0, b""), result.stderr
    return result.stdout.decode()


def one_line_error(result: subprocess.CompletedProcess[bytes]) -> str:
    """The error a failed command printed: one line, `tidemq: ...`, nothing on stdout, a non-zero exit."""
    stderr = result.stderr.decode()
    assert result.returncode != 0 and result.stdout == b"", (result.returncode, result.stdout)
    assert stderr.startswith("tidemq: ") and stderr.count("\n") == 1, stderr
    return stderr


class Lines:
    """The lines a running process prints, read on a thread of their own, so that a test waits for each at most
    `timeout_s` instead of forever."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self._lines.put(line)

    def next(self, timeout_s: float = 15) -> dict:
        return json.loads(self._lines.get(timeout=timeout_s))

    def empty(self) -> bool:
        return self._lines.empty()


def test_put_get_scan_and_del_keys_as_text_bytes_and_stdin(tidemq, kv, tmp_path):
    ok(tidemq("kv", "create", "cli-keys"))
    assert ok(tidemq("kv", "put", "cli-keys", "greeting", "héllo")) == "wrote 'greeting': version 1\n"
    binary = bytes(range(256))
    (tmp_path / "blob.bin").write_bytes(binary)
    assert ok(tidemq("kv", "put", "cli-keys", "blob", "--file", tmp_path / "blob.bin")) == "wrote 'blob': version 2\n"
    ok(tidemq("kv", "put", "cli-keys", "piped", "--file", "-", input=b"from stdin\x00"))
    assert kv.get("cli-keys", "piped").value == b"from stdin\x00"
    kv.delete("cli-keys", "piped")

    assert tidemq("kv", "get", "cli-keys", "greeting").stdout == "héllo".encode()  # as stored: no line break added
    assert tidemq("kv", "get", "cli-keys", "blob").stdout == binary

    refused = one_line_error(tidemq("kv", "put", "cli-keys", "greeting", "again", "--create-only"))
    assert "is at version 1, not absent" in refused
    stale = one_line_error(tidemq("kv", "put", "cli-keys", "greeting", "again", "--if-version", "5"))
    assert "is at version 1, not at version 5" in stale
    assert (
        ok(tidemq("kv", "put", "cli-keys", "greeting", "again", "--if-version", "1")) == "wrote 'greeting': version 5\n"
    )
    ok(tidemq("kv", "put", "cli-keys", "session/1", "token", "--ttl-ms", "3600000"))
    record = json.loads(ok(tidemq("kv", "get", "cli-keys", "session/1", "--json")))
    assert (record["key"], record["value"], record["version"], record["revision"]) == ("session/1", "dG9rZW4=", 6, 6)
    assert record["expires_at_ms"] > time.time() * 1000

    assert ok(tidemq("kv", "scan", "cli-keys")).splitlines() == ["blob", "greeting", "session/1"]
    assert ok(tidemq("kv", "scan", "cli-keys", "--prefix", "se")).splitlines() == ["session/1"]
    rows = [json.loads(line) for line in ok(tidemq("kv", "scan", "cli-keys", "--json", "--limit", "2")).splitlines()]
    assert [(row["key"], row["version"]) for row in rows] == [("blob", 2), ("greeting", 5)]

    assert "is at version 5, not at version 1" in one_line_error(
        tidemq("kv", "del", "cli-keys", "greeting", "--if-version", "1")
    )
    assert ok(tidemq("kv", "del", "cli-keys", "greeting")) == "deleted 'greeting' at revision 7\n"
    assert one_line_error(tidemq("kv", "get", "cli-keys", "greeting")) == (
        "tidemq: no key 'greeting' in KV namespace 'cli-keys'\n"
    )


def test_namespace_commands_create_list_describe_and_delete(tidemq, kv):
    created = ok(tidemq("kv", "create", "cli-ns", "--history-ms", "3600000"))
    assert created == "created KV namespace 'cli-ns': revision 0, history 1h\n"
    kv.put("cli-ns", "k", b"v")
    assert any(line.split()[:3] == ["cli-ns", "1", "1h"] for line in ok(tidemq("kv", "list")).splitlines())
    assert ok(tidemq("kv", "describe", "cli-ns")).startswith("KV namespace 'cli-ns': revision 1, history 1h, created ")
    assert "already exists" in one_line_error(tidemq("kv", "create", "cli-ns"))
    assert "pass --yes" in one_line_error(tidemq("kv", "delete", "cli-ns"))
    assert ok(tidemq("kv", "delete", "cli-ns", "--yes")) == "deleted KV namespace 'cli-ns'\n"
    assert one_line_error(tidemq("kv", "describe", "cli-ns")) == "tidemq: KV namespace 'cli-ns' does not exist\n"


def test_watch_prints_each_change_as_a_json_line_until_interrupted(tidemq, kv, gateway):
    kv.create_namespace("cli-watch")
    before = kv.put("cli-watch", "config/a", b"old")
    watcher = subprocess.Popen(
        command(gateway.url, "kv", "watch", "cli-watch"),
        stdout=subprocess.PIPE,
        env=environment(),
        preexec_fn=interruptible,
    )
    history = subprocess.Popen(
        command(gateway.url, "kv", "watch", "cli-watch", "--from-revision", "1", "--key", "config/a"),
        stdout=subprocess.PIPE,
        env=environment(),
        preexec_fn=interruptible,
    )
    try:
        lines, past = Lines(watcher), Lines(history)
        first = past.next()  # --from-revision: from there on, the changes already made too
        assert (first["revision"], first["kind"], first["key"], first["value"]) == (1, "put", "config/a", "b2xk")

        # without --from-revision the watch starts after the revision when it started: write until it shows one
        ticks = 0
        while lines.empty():
            ticks += 1
            kv.put("cli-watch", "tick", b"%d" % ticks)
            time.sleep(0.2)
            assert ticks < 100, "watch printed nothing"
        seen = lines.next()
        assert seen["key"] == "tick" and seen["revision"] > before.revision

        last = kv.put("cli-watch", "config/a", b"new")
        kv.delete("cli-watch", "config/a")
        while (change := lines.next())["key"] == "tick":
            pass
        assert (change["kind"], change["key"], change["revision"]) == ("put", "config/a", last.revision)
        assert lines.next()["kind"] == "delete"
        assert [past.next()["kind"], past.next()["kind"]] == ["put", "delete"]  # --key: no ticks
    finally:
        for process in (watcher, history):
            process.send_signal(signal.SIGINT)  # Ctrl-C
    assert watcher.wait(timeout=15) == 130 and history.wait(timeout=15) == 130


def test_export_and_import_a_namespace_through_a_snapshot_file(tidemq, kv, tmp_path):
    expiry = int(time.time() * 1000) + 3_600_000
    entries = [  # two pages of the export's scan and two parts of the import
        Entry(f"item/{i:04d}", b"value %d" % i, i + 1, expiry if i % 2 else None) for i in range(1500)
    ]
    kv.import_snapshot("cli-export", Snapshot(NamespaceConfig("cli-export"), 1500, entries))
    kv.delete("cli-export", "item/0007")
    target = tmp_path / "cli-export.snapshot"

    exported = tidemq("kv", "export", "cli-export", target)
    assert exported.returncode == 0
    assert exported.stdout.decode() == "exported 1499 keys of KV namespace 'cli-export' at revision 1501\n"
    assert exported.stderr.decode().splitlines() == ["1000 keys read", "1499 keys read"]

    imported = tidemq("kv", "import", "cli-imported", target)
    assert imported.returncode == 0
    assert imported.stdout.decode() == "imported 1499 keys into KV namespace 'cli-imported', now at revision 1500\n"
    assert imported.stderr.decode().splitlines() == ["1000 keys written", "1499 keys written"]
    copied, original = list(kv.iter_scan("cli-imported")), list(kv.iter_scan("cli-export"))
    assert copied == original and len(copied) == 1499  # keys, values, versions and expiry

    assert "is not empty" in one_line_error(tidemq("kv", "import", "cli-imported", target, "--quiet"))


@pytest.fixture(scope="module")
def bad_namespace(kv) -> str:
    return kv.create_namespace("cli-bad").name


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["kv", "put", "cli-bad", "two\nlines", "v"], "KV key 'two\\nlines' has characters outside printable ASCII"),
        (["kv", "put", "cli-bad", "k", "v", "--file", "-"], "give the value as VALUE or --file, one of them"),
        (["kv", "put", "cli-bad", "k", "v", "--if-version", "1", "--create-only"], "not both"),
        (["kv", "create", "cli-bad", "--history-ms", "10"], "Invalid value for '--history-ms'"),
        (["kv", "create", "bad name"], "KV namespace name 'bad name' must be 1-64 characters of [A-Za-z0-9_-]"),
        (["kv", "get", "no-such-namespace", "k"], "KV namespace 'no-such-namespace' does not exist"),
        (["kv", "watch", "cli-bad", "--key", "k", "--prefix", "p"], "give --key or --prefix, not both"),
        (["kv", "export", "cli-bad", "/no/such/directory/x.snapshot", "-q"], "No such file or directory"),
        (["kv", "import", "cli-bad-2", "/etc/hostname"], "not a TideMQ KV snapshot"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_a_non_zero_exit(tidemq, bad_namespace, args, error):
    assert error in one_line_error(tidemq(*args))


def test_every_kv_command_and_option_has_help():
    group = cli.commands["kv"]
    assert isinstance(group, click.Group) and group.help
    assert set(group.commands) == {
        "create",
        "list",
        "describe",
        "delete",
        "put",
        "get",
        "del",
        "scan",
        "watch",
        "export",
        "import",
    }
    for name, command in group.commands.items():
        assert command.help, name
        assert all(option.help for option in command.params if isinstance(option, click.Option)), name
