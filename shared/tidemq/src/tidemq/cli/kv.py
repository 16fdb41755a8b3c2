"""`tidemq kv ...`: KV namespaces and their keys: write, read, scan, follow changes, export and import snapshots."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

import click

from tidemq_protocol.api.kv import KvChangeView, KvEntryView, KvRead, NamespaceView
from tidemq_protocol.kv import MAX_PAGE, MAX_TTL_MS

from ..client import HttpClient
from ..kv import KV
from .options import deleting
from .output import duration, stderr, stdout, table, timestamp

HISTORY_MS = click.IntRange(60_000, MAX_TTL_MS)
VERSION = click.IntRange(min=1)


def settings(view: NamespaceView) -> str:
    return f"revision {view.revision}, history {duration(view.history_ms)}"


@click.group()
def kv() -> None:
    """KV namespaces: keys with versioned values, conditional writes, watches and snapshots.

    \b
    Every write gives the key a new version (the namespace's revision after it); --if-version writes only if
    the key is still at that version (compare-and-set), --create-only only if it does not exist.
    """


# ---- namespaces ------------------------------------------------------------------------------------


@kv.command("create")
@click.argument("namespace")
@click.option(
    "--history-ms",
    type=HISTORY_MS,
    help="How long changes stay watchable on the serverless backend, at least 60000 [default: 7 days].",
)
@click.pass_obj
def create(client: HttpClient, namespace: str, history_ms: int | None) -> None:
    """Create KV namespace NAMESPACE."""
    view = KV(client=client).create_namespace(namespace, history_ms)
    stdout.print(f"created KV namespace {view.name!r}: {settings(view)}")


@kv.command("list")
@click.pass_obj
def list_(client: HttpClient) -> None:
    """List every KV namespace, with its revision (its last write's)."""
    rows = table("namespace", "revision", "history", "created", numeric=["revision"])
    for view in KV(client=client).iter_namespaces():
        rows.add_row(view.name, str(view.revision), duration(view.history_ms), timestamp(view.created_at))
    stdout.print(rows)


@kv.command("describe")
@click.argument("namespace")
@click.pass_obj
def describe(client: HttpClient, namespace: str) -> None:
    """Show KV namespace NAMESPACE: its revision and settings."""
    view = KV(client=client).describe_namespace(namespace)
    stdout.print(f"KV namespace {view.name!r}: {settings(view)}, created {timestamp(view.created_at)}")


@kv.command("delete")
@deleting("namespace", "KV namespace", "Delete KV namespace {!r} and all its keys?")
def delete(client: HttpClient, namespace: str) -> None:
    """Delete KV namespace NAMESPACE with every key and its history."""
    KV(client=client).delete_namespace(namespace)


# ---- keys ------------------------------------------------------------------------------------------


@kv.command("put")
@click.argument("namespace")
@click.argument("key")
@click.argument("value", required=False)
@click.option(
    "--file",
    "-f",
    "source",
    type=click.File("rb"),
    help="Take the value's bytes from this file ('-': stdin) instead of VALUE.",
)
@click.option("--ttl-ms", type=click.IntRange(1, MAX_TTL_MS), help="Expire the key this many ms from now.")
@click.option("--if-version", type=VERSION, help="Write only if the key is at this version (compare-and-set).")
@click.option("--create-only", is_flag=True, help="Write only if the key does not exist.")
@click.pass_obj
def put(
    client: HttpClient,
    namespace: str,
    key: str,
    value: str | None,
    source: BinaryIO | None,
    ttl_ms: int | None,
    if_version: int | None,
    create_only: bool,
) -> None:
    """Set KEY of NAMESPACE to VALUE (text, UTF-8) or to the bytes of --file, and print its new version."""
    if (value is None) == (source is None):
        raise click.UsageError("give the value as VALUE or --file, one of them")
    if if_version is not None and create_only:
        raise click.UsageError("give --if-version or --create-only, not both")
    data = source.read() if source is not None else value.encode()
    written = KV(client=client).put(namespace, key, data, ttl_ms=ttl_ms, if_version=if_version, create_only=create_only)
    click.echo(f"wrote {key!r}: version {written.version}")


@kv.command("get")
@click.argument("namespace")
@click.argument("key")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the whole record as JSON: key, value (base64), version, expires_at_ms, revision.",
)
@click.pass_obj
def get(client: HttpClient, namespace: str, key: str, as_json: bool) -> None:
    """Print the value of KEY in NAMESPACE: its bytes as stored (with a line break after it on a terminal)."""
    read = KV(client=client).get(namespace, key)
    if as_json:
        record = KvRead(**KvEntryView.of(read.entry()).model_dump(), revision=read.revision)
        click.echo(record.model_dump_json())
        return
    out = sys.stdout.buffer
    out.write(read.value + (b"\n" if sys.stdout.isatty() else b""))
    out.flush()


@kv.command("del")
@click.argument("namespace")
@click.argument("key")
@click.option("--if-version", type=VERSION, help="Delete only if the key is at this version.")
@click.pass_obj
def del_(client: HttpClient, namespace: str, key: str, if_version: int | None) -> None:
    """Delete KEY of NAMESPACE."""
    written = KV(client=client).delete(namespace, key, if_version=if_version)
    click.echo(f"deleted {key!r} at revision {written.revision}")


@kv.command("scan")
@click.argument("namespace")
@click.option("--prefix", default="", help="Only keys starting with this [default: every key].")
@click.option("--limit", type=click.IntRange(min=1), help="Stop after this many keys [default: every key].")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per key (key, value in base64, version, expires_at_ms) instead of the key alone.",
)
@click.pass_obj
def scan(client: HttpClient, namespace: str, prefix: str, limit: int | None, as_json: bool) -> None:
    """Print the keys of NAMESPACE in key order, one per line."""
    page_size = MAX_PAGE if limit is None else min(limit, MAX_PAGE)
    for shown, entry in enumerate(KV(client=client).iter_scan(namespace, prefix, page_size), 1):
        click.echo(KvEntryView.of(entry).model_dump_json() if as_json else entry.key)
        if shown == limit:
            break


@kv.command("watch")
@click.argument("namespace")
@click.option(
    "--from-revision",
    type=VERSION,
    help="Print changes from this revision on [default: those after the namespace's revision now].",
)
@click.option("--key", help="Only this key's changes.")
@click.option("--prefix", help="Only changes to keys starting with this.")
@click.pass_obj
def watch(client: HttpClient, namespace: str, from_revision: int | None, key: str | None, prefix: str | None) -> None:
    """Print the changes of NAMESPACE as they happen, one JSON object per line (revision, previous, kind, key,
    value in base64, version, expires_at_ms), until interrupted."""
    if key is not None and prefix is not None:
        raise click.UsageError("give --key or --prefix, not both")
    store = KV(client=client)
    start = from_revision if from_revision is not None else store.describe_namespace(namespace).revision + 1
    for change in store.follow(namespace, start, key=key, prefix=prefix):
        click.echo(KvChangeView.of(change).model_dump_json())


# ---- snapshots -------------------------------------------------------------------------------------


quiet_option = click.option("--quiet", "-q", is_flag=True, help="Show no progress on stderr.")


@kv.command("export")
@click.argument("namespace")
@click.argument("target")
@quiet_option
@click.pass_obj
def export(client: HttpClient, namespace: str, target: str, quiet: bool) -> None:
    """Write NAMESPACE's keys, as of one revision, to the snapshot file TARGET (a path or s3://bucket/key)."""
    with _snapshot_file(target):
        exported = KV(client=client).export_to(namespace, target, progress=None if quiet else _progress("read"))
    click.echo(f"exported {_keys(len(exported.entries))} of KV namespace {namespace!r} at revision {exported.revision}")


@kv.command("import")
@click.argument("namespace")
@click.argument("source")
@quiet_option
@click.pass_obj
def import_(client: HttpClient, namespace: str, source: str, quiet: bool) -> None:
    """Write the keys of the snapshot file SOURCE (a path or s3://bucket/key) into NAMESPACE, keeping their
    versions and expiry; NAMESPACE must be empty or missing (it is created)."""
    with _snapshot_file(source):
        imported = KV(client=client).import_from(namespace, source, progress=None if quiet else _progress("written"))
    click.echo(f"imported {_keys(imported.keys)} into KV namespace {namespace!r}, now at revision {imported.revision}")


def _keys(count: int) -> str:
    return f"{count} key" if count == 1 else f"{count} keys"


def _progress(done: str) -> Callable[[int], None]:
    """Progress on stderr, a line per page: "2000 keys written"."""

    def show(keys: int) -> None:
        stderr.print(f"{_keys(keys)} {done}", markup=False)

    return show


@contextmanager
def _snapshot_file(location: str) -> Iterator[None]:
    """A snapshot file that cannot be read or written ends the command with one line saying why."""
    from botocore.exceptions import BotoCoreError
    from botocore.exceptions import ClientError as AwsError

    try:
        yield
    except OSError as error:
        raise click.ClickException(f"{location}: {error.strerror or error}") from None
    except (BotoCoreError, AwsError) as error:
        raise click.ClickException(f"{location}: {error}") from None
