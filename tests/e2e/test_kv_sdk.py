"""The Python SDK's KV namespaces (`tidemq.KV`) against a live local gateway, on each backend."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import boto3
import pytest

from tests.gateways import gateway_as_admin
from tidemq import KV, HttpClient, KeyValue
from tidemq_protocol import kv_snapshot as snapshot
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import (
    InvalidArgument,
    InvalidName,
    KeyNotFound,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    RevisionCompacted,
    VersionMismatch,
)
from tidemq_protocol.kv import (
    DEFAULT_HISTORY_MS,
    MAX_PAGE,
    MAX_VALUE_BYTES,
    ChangeKind,
    Entry,
    NamespaceConfig,
    Snapshot,
)


class KvGateway(NamedTuple):
    url: str
    backend: str
    dynamodb_prefix: str | None


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def gateway(request, tmp_path_factory) -> Iterator[KvGateway]:
    """A gateway per backend; the serverless one on the session's moto server, under a table prefix of its own, so
    that a test can take a change out of DynamoDB as its TTL would."""
    home = Path(tmp_path_factory.mktemp(f"kv-gateway-{request.param}")) / "data"
    env = {"TIDEMQ_BACKEND": request.param}
    prefix = None
    if request.param == "serverless":
        prefix = f"kvsdk{uuid.uuid4().hex[:8]}"
        env |= {**request.getfixturevalue("local_aws").env, "TIDEMQ_DYNAMODB_PREFIX": prefix}
    with gateway_as_admin(home, **env) as url:
        yield KvGateway(url, request.param, prefix)


@pytest.fixture(scope="module")
def kv(gateway) -> Iterator[KV]:
    with HttpClient(gateway.url) as client:
        yield KV(client=client)


def entries_of(kv: KV, namespace: str) -> list[Entry]:
    return list(kv.iter_scan(namespace))


def replayed(kv: KV, namespace: str, up_to: int) -> dict[str, Entry]:
    """The namespace's keys at revision `up_to`, rebuilt from its watch stream alone."""
    state: dict[str, Entry] = {}
    revision = 1
    while revision <= up_to:
        page = kv.watch(namespace, revision, limit=MAX_PAGE)
        for change in page.changes:
            if change.revision > up_to:
                break
            if change.kind is ChangeKind.PUT:
                state[change.key] = Entry(change.key, change.value, change.version, change.expires_at_ms)
            else:
                del state[change.key]
        revision = page.next_revision
    return state


def test_namespaces_are_created_described_listed_page_by_page_and_deleted(kv):
    created = kv.create_namespace("sdk-ns-a", history_ms=120_000)
    assert (created.name, created.history_ms, created.revision) == ("sdk-ns-a", 120_000, 0)
    assert created.created_at > 0
    assert kv.create_namespace("sdk-ns-b").history_ms == DEFAULT_HISTORY_MS
    with pytest.raises(NamespaceExists) as exists:
        kv.create_namespace("sdk-ns-a")
    assert exists.value.namespace == "sdk-ns-a"

    kv.put("sdk-ns-a", "k", b"v")
    assert kv.describe_namespace("sdk-ns-a").revision == 1
    first = kv.list_namespaces(after="sdk-ns-", limit=1)
    assert [view.name for view in first.namespaces] == ["sdk-ns-a"] and first.next_after == "sdk-ns-a"
    assert [view.name for view in kv.iter_namespaces(page_size=1) if view.name.startswith("sdk-ns-")] == [
        "sdk-ns-a",
        "sdk-ns-b",
    ]

    kv.delete_namespace("sdk-ns-a")
    with pytest.raises(NamespaceNotFound) as missing:
        kv.describe_namespace("sdk-ns-a")
    assert missing.value.namespace == "sdk-ns-a"
    with pytest.raises(NamespaceNotFound):
        kv.get("sdk-ns-a", "k")
    assert "sdk-ns-a" not in {view.name for view in kv.iter_namespaces()}


def test_put_get_and_delete_keep_bytes_intact_and_versions_rising(kv):
    kv.create_namespace("sdk-keys")
    first = kv.put("sdk-keys", "blob", bytes(range(256)))
    assert (first.key, first.version, first.revision) == ("blob", 1, 1)
    assert kv.get("sdk-keys", "blob") == KeyValue("blob", bytes(range(256)), 1, 1, None)
    text = kv.put("sdk-keys", "greeting [1] ~!", "héllo")  # any printable ASCII key; a str value goes as UTF-8
    assert text.version == 2 and kv.get("sdk-keys", "greeting [1] ~!").value == "héllo".encode()
    assert kv.put("sdk-keys", "empty", b"").version == 3 and kv.get("sdk-keys", "empty").value == b""
    big = bytes(MAX_VALUE_BYTES - 1)  # the API takes 256 KiB - 1 at most (its base64 bound)
    kv.put("sdk-keys", "big", big)
    assert kv.get("sdk-keys", "big").value == big

    before = now_ms()
    expiring = kv.put("sdk-keys", "session", b"token", ttl_ms=3_600_000)
    read = kv.get("sdk-keys", "session")
    assert read.version == expiring.version and before + 3_600_000 <= read.expires_at_ms <= now_ms() + 3_600_000

    again = kv.put("sdk-keys", "blob", b"second")
    assert again.version == again.revision == expiring.revision + 1
    assert kv.get("sdk-keys", "blob").version == again.version

    deleted = kv.delete("sdk-keys", "blob")
    assert deleted.version == deleted.revision == again.revision + 1
    with pytest.raises(KeyNotFound) as missing:
        kv.get("sdk-keys", "blob")
    assert (missing.value.namespace, missing.value.key) == ("sdk-keys", "blob")
    with pytest.raises(KeyNotFound):
        kv.delete("sdk-keys", "blob")
    assert kv.put("sdk-keys", "blob", b"back").version == deleted.revision + 1  # versions never go back

    kv.put("sdk-keys", "brief", b"gone soon", ttl_ms=1)
    time.sleep(0.01)
    with pytest.raises(KeyNotFound):  # expired: absent, as if deleted
        kv.get("sdk-keys", "brief")


def test_names_and_keys_the_api_refuses_fail_before_any_request(kv):
    for name in ("", "bad name", "x" * 65, "a/b"):
        with pytest.raises(InvalidName):
            kv.create_namespace(name)
        with pytest.raises(InvalidName):
            kv.get(name, "k")
    for key in ("", "two\nlines", "caf\u00e9", "k" * 1025):
        with pytest.raises(InvalidArgument):
            kv.get("sdk-keys", key)
        with pytest.raises(InvalidArgument):
            kv.put("sdk-keys", key, b"x")
    with pytest.raises(InvalidArgument):
        kv.put("sdk-keys", "k", b"x", if_version=1, create_only=True)
    with pytest.raises(InvalidArgument):
        kv.put("sdk-keys", "k", bytes(MAX_VALUE_BYTES + 1))


def test_conditional_writes_are_refused_with_412_saying_the_current_version(kv):
    kv.create_namespace("sdk-cas")
    created = kv.put("sdk-cas", "counter", b"1", create_only=True)
    with pytest.raises(VersionMismatch) as taken:
        kv.put("sdk-cas", "counter", b"again", create_only=True)
    assert (taken.value.current, taken.value.current_version, taken.value.expected) == (created.version,) * 2 + (None,)
    assert (taken.value.namespace, taken.value.key) == ("sdk-cas", "counter")

    swapped = kv.put("sdk-cas", "counter", b"2", if_version=created.version)
    with pytest.raises(VersionMismatch) as stale:  # a second writer still holding the old version loses
        kv.put("sdk-cas", "counter", b"lost update", if_version=created.version)
    assert (stale.value.current, stale.value.expected) == (swapped.version, created.version)
    assert kv.get("sdk-cas", "counter").value == b"2"

    with pytest.raises(VersionMismatch) as stale_delete:
        kv.delete("sdk-cas", "counter", if_version=created.version)
    assert stale_delete.value.current == swapped.version
    deleted = kv.delete("sdk-cas", "counter", if_version=swapped.version)

    with pytest.raises(VersionMismatch) as absent:  # the key is gone: current is None
        kv.put("sdk-cas", "counter", b"3", if_version=swapped.version)
    assert absent.value.current is None and absent.value.current_version is None
    recreated = kv.put("sdk-cas", "counter", b"3", create_only=True)
    assert recreated.version == deleted.revision + 1


def test_get_many_returns_the_keys_that_exist_in_key_order_at_one_revision(kv):
    kv.create_namespace("sdk-many")
    for key in ("c", "a", "b"):
        kv.put("sdk-many", key, key.upper())
    page = kv.get_many("sdk-many", ["c", "zz", "a", "c"])
    assert [(entry.key, entry.value, entry.version) for entry in page.entries] == [("a", b"A", 2), ("c", b"C", 1)]
    assert page.revision == 3


def test_scan_pages_through_a_prefix_in_key_order_and_iter_scan_reads_every_page(kv):
    kv.create_namespace("sdk-scan")
    keys = [f"item/{i:03d}" for i in range(25)]
    seeded = [Entry(key, key.encode(), version) for version, key in enumerate(keys, 1)]
    kv.import_snapshot("sdk-scan", Snapshot(NamespaceConfig("elsewhere"), 0, seeded))
    kv.put("sdk-scan", "other", b"")
    first = kv.scan("sdk-scan", prefix="item/", limit=10)
    assert [entry.key for entry in first.entries] == keys[:10] and first.next_after == keys[9]
    second = kv.scan("sdk-scan", prefix="item/", after=first.next_after, limit=10)
    assert [entry.key for entry in second.entries] == keys[10:20]
    assert first.revision == second.revision == 26
    last = kv.scan("sdk-scan", prefix="item/", after=second.next_after, limit=10)
    assert [entry.key for entry in last.entries] == keys[20:] and last.next_after is None
    assert [entry.key for entry in kv.iter_scan("sdk-scan", "item/", page_size=7)] == keys
    assert [entry.key for entry in kv.iter_scan("sdk-scan")] == [*keys, "other"]
    assert all(entry.value == entry.key.encode() for entry in kv.iter_scan("sdk-scan", "item/"))


def test_watch_pages_changes_in_revision_order_filters_them_and_waits_for_one(kv):
    kv.create_namespace("sdk-watch")
    kv.put("sdk-watch", "a/1", b"x")  # 1
    kv.put("sdk-watch", "b/1", b"y", ttl_ms=60_000)  # 2
    kv.delete("sdk-watch", "a/1")  # 3
    page = kv.watch("sdk-watch", 1, limit=2)
    assert [(c.revision, c.previous, c.kind, c.key, c.value) for c in page.changes] == [
        (1, 0, ChangeKind.PUT, "a/1", b"x"),
        (2, 1, ChangeKind.PUT, "b/1", b"y"),
    ]
    assert page.changes[1].expires_at_ms is not None and page.next_revision == 3 and page.revision == 3
    rest = kv.watch("sdk-watch", page.next_revision)
    assert [(c.kind, c.key, c.version) for c in rest.changes] == [(ChangeKind.DELETE, "a/1", 3)]
    assert [c.revision for c in kv.watch("sdk-watch", 1, prefix="a/").changes] == [1, 3]
    assert [c.revision for c in kv.watch("sdk-watch", 1, key="b/1").changes] == [2]

    idle = kv.watch("sdk-watch", 4)
    assert (idle.changes, idle.next_revision) == ([], 4)
    writer = threading.Timer(0.3, lambda: kv.put("sdk-watch", "late", b"!"))
    started = time.monotonic()
    writer.start()
    waited = kv.watch("sdk-watch", 4, wait_ms=10_000)
    writer.join()
    assert [c.key for c in waited.changes] == ["late"] and waited.next_revision == 5
    assert 0.2 < time.monotonic() - started < 8


def test_follow_sees_every_write_of_another_thread_in_order(kv):
    kv.create_namespace("sdk-follow")
    start = kv.describe_namespace("sdk-follow").revision + 1
    written: list[tuple[int, str]] = []

    def write() -> None:
        for i in range(30):
            key = f"job/{i % 4}"
            if i % 7 == 6:
                written.append((kv.delete("sdk-follow", key).revision, key))
            else:
                written.append((kv.put("sdk-follow", key, b"%d" % i).revision, key))
            time.sleep(0.005 * (i % 3))  # some arrive while a long poll waits, some together
        kv.put("sdk-follow", "done", b"")

    writer = threading.Thread(target=write)
    writer.start()
    seen = []
    for change in kv.follow("sdk-follow", start, wait_ms=1000):
        if change.key == "done":
            break
        seen.append(change)
    writer.join()
    assert [(change.revision, change.key) for change in seen] == written
    assert [change.revision for change in seen] == list(range(start, start + 30))
    assert {change.kind for change in seen} == {ChangeKind.PUT, ChangeKind.DELETE}

    only = kv.follow("sdk-follow", start, key="job/1", wait_ms=100)
    assert [next(only).key for _ in range(3)] == ["job/1"] * 3


# The serverless backend only: the embedded one keeps every change in its namespace's topic (only the Spark key
# compaction thins it), so no request can make one go.
@pytest.mark.parametrize("gateway", ["serverless"], indirect=True)
def test_a_watch_from_changes_no_longer_kept_raises_revision_compacted(kv, gateway, request):
    kv.create_namespace("sdk-gone")
    for i in range(4):
        kv.put("sdk-gone", f"k{i}", b"v")
    aws = request.getfixturevalue("aws_env")  # boto3 here on the gateway's moto server
    boto3.client(
        "dynamodb", region_name=aws.env["AWS_REGION"]
    ).delete_item(  # as DynamoDB's TTL does past the namespace's history_ms
        TableName=f"{gateway.dynamodb_prefix}-kv_changes",
        Key={"namespace": {"S": "sdk-gone"}, "revision": {"N": "1"}},
    )
    with pytest.raises(RevisionCompacted) as compacted:
        kv.watch("sdk-gone", 1)
    assert (compacted.value.oldest, compacted.value.oldest_revision, compacted.value.revision) == (2, 2, 1)
    with pytest.raises(RevisionCompacted):
        next(kv.follow("sdk-gone", 1, wait_ms=0))
    read = kv.get("sdk-gone", "k3")  # what the message says to do: read again, watch from that revision
    kv.put("sdk-gone", "k4", b"v")
    assert [change.key for change in kv.watch("sdk-gone", read.revision + 1).changes] == ["k4"]


def test_export_while_a_writer_writes_is_the_state_at_its_revision_and_imports_identically(kv, tmp_path):
    keys = [f"user/{i:05d}" for i in range(1200)]  # the scan takes two pages, the import two parts
    seeded = [Entry(key, key.encode() * 3, version) for version, key in enumerate(keys, 1)]
    kv.import_snapshot("sdk-export", Snapshot(NamespaceConfig("sdk-export", history_ms=3_600_000), 0, seeded))
    kv.put("sdk-export", "user/short-lived", b"x", ttl_ms=1)  # expired by the time of the export
    stop, writes = threading.Event(), [0]

    def writer_loop() -> None:
        i = 0
        while not stop.is_set():
            key = keys[(i * 37) % len(keys)]
            if i % 5 == 4:
                with contextlib.suppress(KeyNotFound):
                    kv.delete("sdk-export", key)
            else:
                kv.put("sdk-export", key, b"rewritten %d" % i, ttl_ms=3_600_000 if i % 3 == 0 else None)
            kv.put("sdk-export", f"new/{i:05d}", b"n")
            writes[0] += 1
            i += 1

    writer = threading.Thread(target=writer_loop)
    writer.start()
    try:
        while writes[0] < 5:  # the writer is going before the export starts
            time.sleep(0.01)
        before = kv.describe_namespace("sdk-export").revision
        exported = kv.export_to("sdk-export", str(tmp_path / "users.snapshot"))
        during = writes[0]
    finally:
        stop.set()
        writer.join()
    assert exported.revision > before and during > 5  # the export ran while keys changed under it
    assert exported.config == NamespaceConfig("sdk-export", 3_600_000, exported.config.created_at)

    at_revision = replayed(kv, "sdk-export", exported.revision)
    now = now_ms()
    assert exported.entries == [at_revision[key] for key in sorted(at_revision) if at_revision[key].live(now)]
    assert "user/short-lived" in at_revision and "user/short-lived" not in {e.key for e in exported.entries}
    written = snapshot.read(str(tmp_path / "users.snapshot"))  # the file holds no created_at
    assert (written.revision, written.config.history_ms, written.entries) == (
        exported.revision,
        exported.config.history_ms,
        exported.entries,
    )

    parts = []
    imported = kv.import_from("sdk-export-copy", str(tmp_path / "users.snapshot"), progress=parts.append)
    assert imported.keys == len(exported.entries) and parts[-1] == imported.keys and len(parts) >= 2
    assert imported.revision == max(entry.version for entry in exported.entries)
    assert entries_of(kv, "sdk-export-copy") == exported.entries  # keys, values, versions and expiry
    assert kv.describe_namespace("sdk-export-copy").history_ms == 3_600_000
    with pytest.raises(NamespaceNotEmpty):
        kv.import_snapshot("sdk-export-copy", exported)


def test_a_snapshot_of_large_values_is_imported_in_parts_under_the_request_limit(kv):
    big = [Entry(f"blob/{i:02d}", bytes([i]) * 200_000, i + 1) for i in range(32)]  # 6.4 MB: over one request
    parts = []
    imported = kv.import_snapshot("sdk-big", Snapshot(NamespaceConfig("sdk-big"), 32, big), progress=parts.append)
    assert imported.keys == 32 and len(parts) >= 3
    assert entries_of(kv, "sdk-big") == big
    assert kv.export("sdk-big").entries == big


def test_export_to_and_import_from_s3(kv, aws_env):
    bucket = f"kv-snapshots-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    kv.create_namespace("sdk-s3")
    kv.put("sdk-s3", "a", b"1", ttl_ms=3_600_000)
    kv.put("sdk-s3", "b", b"2")
    exported = kv.export_to("sdk-s3", f"s3://{bucket}/sdk-s3.snapshot")
    assert kv.import_from("sdk-s3-copy", f"s3://{bucket}/sdk-s3.snapshot").keys == 2
    assert entries_of(kv, "sdk-s3-copy") == exported.entries
