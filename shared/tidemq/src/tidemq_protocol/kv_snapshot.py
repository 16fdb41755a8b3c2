"""The one format of a KV snapshot file (`tidemq kv export`, `KeyValueStore.export`): JSON lines, first a header,
then one line per key in key order.

    {"format": "tidemq-kv-snapshot/1", "namespace": "...", "revision": 42, "history_ms": ..., "entries": 2}
    {"key": "a", "value": "<base64>", "version": 7, "expires_at_ms": null}

`write`/`read` take a local path or an `s3://bucket/key` URI (boto3, so `AWS_ENDPOINT_URL` points it at a local AWS).
"""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from . import clock
from .errors import InvalidArgument
from .kv import ChangeKind, ChangePage, Entry, EntryPage, NamespaceConfig, Snapshot

FORMAT = "tidemq-kv-snapshot/1"


def lines(snapshot: Snapshot) -> Iterator[bytes]:
    header = {
        "format": FORMAT,
        "namespace": snapshot.config.name,
        "revision": snapshot.revision,
        "history_ms": snapshot.config.history_ms,
        "entries": len(snapshot.entries),
    }
    yield json.dumps(header).encode() + b"\n"
    for entry in snapshot.entries:
        line = {
            "key": entry.key,
            "value": base64.b64encode(entry.value).decode("ascii"),
            "version": entry.version,
            "expires_at_ms": entry.expires_at_ms,
        }
        yield json.dumps(line, ensure_ascii=False).encode() + b"\n"


def parse(stream: Iterator[bytes]) -> Snapshot:
    try:
        header = json.loads(next(stream))
    except (StopIteration, ValueError):
        raise InvalidArgument("not a TideMQ KV snapshot: no header line") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidArgument(f"not a TideMQ KV snapshot (format {FORMAT!r} expected)")
    entries = []
    for number, raw in enumerate(stream, start=2):
        try:
            line = json.loads(raw)
            value = base64.b64decode(line["value"], validate=True)
            entries.append(Entry(line["key"], value, int(line["version"]), line.get("expires_at_ms")))
        except (ValueError, KeyError, TypeError) as error:
            raise InvalidArgument(f"KV snapshot line {number} is malformed: {error}") from None
    if len(entries) != header.get("entries"):
        raise InvalidArgument(f"KV snapshot is truncated: {len(entries)} of {header.get('entries')} entries")
    config = NamespaceConfig(header["namespace"], int(header["history_ms"]))
    return Snapshot(config, int(header["revision"]), entries)


def write(snapshot: Snapshot, target: str) -> None:
    """Write `snapshot` to a file (atomically: a temporary file renamed) or to `s3://bucket/key`."""
    data = b"".join(lines(snapshot))
    if target.startswith("s3://"):
        bucket, key = _s3(target)
        import boto3

        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data)
        return
    path = Path(target)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def read(source: str) -> Snapshot:
    if source.startswith("s3://"):
        bucket, key = _s3(source)
        import boto3

        body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        return parse(iter(io.BytesIO(body)))
    with open(source, "rb") as file:
        return parse(iter(file))


def _s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not bucket or not key:
        raise InvalidArgument(f"{uri!r} is not s3://bucket/key")
    return bucket, key


def read_at_one_revision(
    config: NamespaceConfig,
    revision: Callable[[], int],
    scan: Callable[[str | None], EntryPage],
    watch: Callable[[int], ChangePage],
    progress: Callable[[int], None] | None = None,
) -> Snapshot:
    """A namespace's contents at one revision, from reads that each see their own moment: its revision r0, a scan of
    every key (`scan(after)`, page by page), its revision r1, then the changes (r0, r1] (`watch(from_revision)`)
    applied over the scan, each key's last change winning. A key the scan read is at some revision up to r1, and
    each change in the window is its state from then on, so the result is the namespace at r1: no mix of before and
    after. Expired keys are left out. `progress` is told the keys read so far after each page. The engine's
    `export` and the SDK's (which reads over HTTP) are both this."""
    start = revision()
    entries: dict[str, Entry] = {}
    after: str | None = None
    while True:
        page = scan(after)
        entries.update((entry.key, entry) for entry in page.entries)
        if progress is not None:
            progress(len(entries))
        if page.next_after is None:
            break
        after = page.next_after
    end = revision()
    at = start + 1
    while at <= end:
        changes = watch(at)
        for change in changes.changes:
            if change.revision > end:
                break
            if change.kind is ChangeKind.PUT:
                entries[change.key] = Entry(change.key, change.value, change.version, change.expires_at_ms)
            else:
                entries.pop(change.key, None)
        if changes.next_revision <= at:  # a watch answering so would have this loop spin forever
            raise RuntimeError(f"a watch of KV namespace {config.name!r} from revision {at} got nowhere")
        at = changes.next_revision
    now = clock.now_ms()
    return Snapshot(config, end, [entries[key] for key in sorted(entries) if entries[key].live(now)])
