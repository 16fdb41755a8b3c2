"""KV namespaces (tidemq_store/kv), the same tests on both backends: the embedded engine (commit log first, then
RocksDB) and the serverless one (DynamoDB on the session's moto server). Writers and scanners really run at once, in
threads of their own; the embedded backend's namespace is also rebuilt from its topic, from the cold tier."""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest

from tidemq_protocol import kv_snapshot as snapshot_file
from tidemq_protocol.errors import (
    InvalidArgument,
    KeyNotFound,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    VersionMismatch,
)
from tidemq_protocol.kv import MAX_VALUE_BYTES, ChangeKind, Entry, NamespaceConfig, Snapshot
from tidemq_store import MessageStore
from tidemq_store.embedded.kv import EmbeddedKeyValueStore

from ..tier_reads import wait_uploaded

BACKENDS = ["embedded", "serverless"]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def open_kv_store(backend, open_test_store, tmp_path, request):
    """Open a store of the backend (`fresh`: another one, empty); each opening of the same store sees one state."""
    shared: dict = {}
    if backend == "serverless":
        request.getfixturevalue("aws_env")
        shared = {"backend": "serverless", "efs_path": tmp_path / "efs", "dynamodb_prefix": f"kv{uuid.uuid4().hex[:8]}"}

    def opener(fresh: bool = False, **overrides) -> MessageStore:
        options = dict(shared)
        if fresh:
            options = {key: value for key, value in shared.items()}
            options["home"] = tmp_path / f"fresh-{uuid.uuid4().hex[:6]}"
            if backend == "serverless":
                options["dynamodb_prefix"] = f"kv{uuid.uuid4().hex[:8]}"
        return open_test_store(**(options | overrides))

    return opener


@pytest.fixture
def kv(open_kv_store):
    store = open_kv_store()
    store.kv.create_namespace(NamespaceConfig("app"))
    return store.kv


def all_changes(kv, namespace: str, start: int = 1) -> list:
    changes, revision = [], start
    while revision <= kv.revision(namespace):
        page = kv.watch(namespace, revision, limit=1000)
        changes += page.changes
        revision = page.next_revision
    return changes


def test_put_get_delete_carry_versions_and_the_namespace_revision(kv):
    first = kv.put("app", "a", b"1")
    assert (first.version, first.revision) == (1, 1)
    read = kv.get("app", "a")
    assert (read.entry.value, read.entry.version, read.revision) == (b"1", 1, 1)
    assert kv.put("app", "b", b"").version == 2  # an empty value is a value
    assert kv.get("app", "b").entry.value == b""
    second = kv.put("app", "a", b"2")
    assert (second.version, second.revision) == (3, 3)
    deleted = kv.delete("app", "a")
    assert (deleted.version, deleted.revision) == (4, 4)
    assert kv.get("app", "a").entry is None and kv.get("app", "a").revision == 4
    assert kv.put("app", "a", b"again").version == 5  # versions go on increasing across a delete
    with pytest.raises(KeyNotFound):
        kv.delete("app", "missing")
    assert kv.revision("app") == 5


def test_create_only_and_compare_and_set_refuse_with_the_current_version_and_change_nothing(kv):
    kv.put("app", "k", b"v1", create_only=True)
    with pytest.raises(VersionMismatch) as exists:
        kv.put("app", "k", b"v2", create_only=True)
    assert (exists.value.expected, exists.value.current) == (None, 1)
    with pytest.raises(VersionMismatch) as stale:
        kv.put("app", "k", b"v2", expected_version=7)
    assert stale.value.current == 1
    with pytest.raises(VersionMismatch) as absent:
        kv.put("app", "nothing", b"v", expected_version=1)
    assert absent.value.current is None
    assert kv.put("app", "k", b"v2", expected_version=1).version == 2
    with pytest.raises(VersionMismatch):
        kv.delete("app", "k", expected_version=1)
    assert kv.get("app", "k").entry.value == b"v2" and kv.revision("app") == 2


def test_bad_input_is_refused_with_a_clear_error_and_changes_nothing(kv):
    for bad_key in ("", "x" * 1025, "tab\there", "é", "new\nline"):
        with pytest.raises(InvalidArgument):
            kv.put("app", bad_key, b"v")
    with pytest.raises(InvalidArgument, match="limit"):
        kv.put("app", "big", b"x" * (MAX_VALUE_BYTES + 1))
    with pytest.raises(InvalidArgument, match="TTL"):
        kv.put("app", "k", b"v", ttl_ms=0)
    with pytest.raises(InvalidArgument):
        kv.create_namespace(NamespaceConfig("bad name"))
    with pytest.raises(NamespaceNotFound):
        kv.put("nope", "k", b"v")
    with pytest.raises(NamespaceExists):
        kv.create_namespace(NamespaceConfig("app"))
    assert kv.revision("app") == 0 and kv.scan("app").entries == []


def test_a_key_with_a_ttl_reads_as_absent_once_it_expires(kv):
    kv.put("app", "short", b"v", ttl_ms=300)
    kv.put("app", "long", b"v", ttl_ms=600_000)
    assert kv.get("app", "short").entry is not None
    time.sleep(0.5)
    assert kv.get("app", "short").entry is None
    assert [entry.key for entry in kv.scan("app").entries] == ["long"]
    assert kv.put("app", "short", b"new", create_only=True).version == 3  # expired is absent for conditions too
    if isinstance(kv, EmbeddedKeyValueStore):  # expired keys leave RocksDB too (DynamoDB's TTL does it there)
        kv.put("app", "gone", b"v", ttl_ms=1)
        time.sleep(0.01)
        assert kv.purge_expired() == 1 and kv.get("app", "gone").entry is None
        assert [entry.key for entry in kv.scan("app").entries] == ["long", "short"]


def test_batch_get_returns_the_keys_that_exist_in_key_order(kv):
    for key in ("c", "a", "b"):
        kv.put("app", key, key.encode())
    page = kv.get_many("app", ["c", "zz", "a"])
    assert [(entry.key, entry.value) for entry in page.entries] == [("a", b"a"), ("c", b"c")]


def test_prefix_scans_return_every_matching_key_once_in_order_across_pages_while_writes_go_on(kv):
    kept = [f"s/{i:04d}" for i in range(400)]
    for key in kept:
        kv.put("app", key, b"v0")
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                kv.put("app", rng.choice(kept), b"v%d" % rng.randrange(1000))  # rewrites a kept key
                churn = f"s/{rng.randrange(400):04d}-x"  # keys that come and go between the kept ones
                kv.put("app", churn, b"c")
                kv.delete("app", churn)
                kv.put("app", f"t/{rng.randrange(100)}", b"other prefix")
        except BaseException as error:
            errors.append(error)

    writers = [threading.Thread(target=writer, args=(seed,)) for seed in range(3)]
    for thread in writers:
        thread.start()
    try:
        for _ in range(3):
            seen, after = [], None
            while True:
                page = kv.scan("app", prefix="s/", after=after, limit=37)
                seen += [entry.key for entry in page.entries]
                if page.next_after is None:
                    break
                after = page.next_after
            assert seen == sorted(set(seen)), "keys once each, in key order"
            assert set(kept) <= set(seen)
            assert all(key.startswith("s/") for key in seen)
    finally:
        stop.set()
        for thread in writers:
            thread.join()
    assert not errors, errors


def test_a_prefix_watch_sees_every_change_once_in_revision_order_while_writers_run(kv):
    made: list[tuple[int, str]] = []
    lock = threading.Lock()
    start = kv.revision("app") + 1

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        for i in range(60):
            key = f"{rng.choice('pq')}/{rng.randrange(20)}"
            written = (
                kv.delete("app", key) if i % 7 == 6 and kv.get("app", key).entry else kv.put("app", key, b"%d" % i)
            )
            with lock:
                made.append((written.revision, key))

    writers = [threading.Thread(target=writer, args=(seed,)) for seed in range(3)]
    for thread in writers:
        thread.start()
    watched, revision = [], start
    deadline = time.monotonic() + 60
    while (any(t.is_alive() for t in writers) or revision <= kv.revision("app")) and time.monotonic() < deadline:
        page = kv.watch("app", revision, prefix="p/", limit=7, wait_s=0.2)  # small pages: many calls
        watched += page.changes
        revision = page.next_revision
    for thread in writers:
        thread.join()
    expected = sorted(revision for revision, key in made if key.startswith("p/"))
    assert [change.revision for change in watched] == expected
    previous = [change.previous for change in all_changes(kv, "app", start)]
    assert previous == list(range(start - 1, kv.revision("app")))  # dense: nothing in between was lost


def test_a_long_poll_returns_when_a_change_lands(kv):
    revision = kv.revision("app") + 1
    timer = threading.Timer(0.3, lambda: kv.put("app", "late", b"v"))
    timer.start()
    began = time.monotonic()
    page = kv.watch("app", revision, key="late", wait_s=10)
    timer.join()
    assert [change.key for change in page.changes] == ["late"] and time.monotonic() - began < 9


def test_export_then_import_into_a_fresh_store_gives_identical_contents(open_kv_store, tmp_path):
    store = open_kv_store()
    kv = store.kv
    kv.create_namespace(NamespaceConfig("app", history_ms=3_600_000))
    for i in range(150):
        kv.put("app", f"k{i % 60}", bytes([i]) * (i % 7))
    kv.delete("app", "k3")
    kv.put("app", "ttl", b"t", ttl_ms=3_600_000)
    exported = kv.export("app")
    assert exported.revision == kv.revision("app")
    assert len(exported.entries) == 60 and "k3" not in {entry.key for entry in exported.entries}

    path = tmp_path / "app.snapshot"
    snapshot_file.write(exported, str(path))
    fresh = open_kv_store(fresh=True)
    assert fresh.kv.restore(snapshot_file.read(str(path))) == 60
    assert fresh.kv.export("app").entries == exported.entries
    assert fresh.kv.get_namespace("app").history_ms == 3_600_000
    assert fresh.kv.put("app", "k0", b"after").version > max(entry.version for entry in exported.entries)
    with pytest.raises(NamespaceNotEmpty):
        fresh.kv.restore(exported)


def test_an_import_in_parts_goes_above_the_namespace_and_keeps_versions_increasing(kv):
    config = NamespaceConfig("copy")
    assert kv.restore(Snapshot(config, 0, [])) == 0
    assert kv.restore(Snapshot(config, 0, [Entry("a", b"1", 3), Entry("b", b"2", 5)]), "copy", append=True) == 2
    assert kv.restore(Snapshot(config, 0, [Entry("c", b"3", 4)]), "copy", append=True) == 1  # below: goes above
    twice = [Entry("d", b"first", 9), Entry("d", b"last", 9), Entry("e", b"e", 9)]  # no snapshot has these
    assert kv.restore(Snapshot(config, 0, twice), "copy", append=True) == 2
    found = [(e.key, e.value, e.version) for e in kv.scan("copy").entries]
    assert found == [("a", b"1", 3), ("b", b"2", 5), ("c", b"3", 6), ("d", b"last", 9), ("e", b"e", 10)]
    assert kv.revision("copy") == 10
    assert [change.revision for change in all_changes(kv, "copy")] == [3, 5, 6, 9, 10]


def test_deleting_a_namespace_removes_its_keys_and_history(kv):
    kv.put("app", "k", b"v")
    kv.delete_namespace("app")
    with pytest.raises(NamespaceNotFound):
        kv.get("app", "k")
    kv.create_namespace(NamespaceConfig("app"))
    assert kv.get("app", "k").entry is None and kv.revision("app") == 0
    assert kv.watch("app", 1).changes == []
    assert [config.name for config in kv.list_namespaces()] == ["app"]


# ---- the embedded backend: the namespace's topic --------------------------------------------------------------


def test_the_embedded_namespace_is_rebuilt_from_its_topic_after_its_hot_segments_are_gone(open_test_store, tmp_path):
    store = open_test_store(
        tier="posix",
        tier_path=tmp_path / "cold",
        tier_upload_age_ms=100,
        commitlog_segment_bytes=64 * 1024,
        hot_retention_ms=0,
        tier_in_memory_bytes=0,
    )
    kv = store.kv
    assert isinstance(kv, EmbeddedKeyValueStore)
    kv.create_namespace(NamespaceConfig("app"))
    rng = random.Random(7)
    for i in range(600):
        key = f"k{rng.randrange(80)}"
        if i % 9 == 8 and kv.get("app", key).entry:
            kv.delete("app", key)
        else:
            kv.put("app", key, rng.randbytes(rng.randrange(300)))
    original = kv.export("app")
    topic = "%KV%app"
    wait_uploaded(store, topic)
    assert store.clean_expired().segments_deleted > 0
    assert store.tier_status(topic)[0].hot_min_offset > 0  # the hot tier no longer has the start

    assert kv.rebuild("app") == 600
    assert kv.export("app") == original
    assert [c.kind for c in all_changes(kv, "app")].count(ChangeKind.DELETE) == 600 - len(
        [c for c in all_changes(kv, "app") if c.kind is ChangeKind.PUT]
    )
