"""The serverless backend's KV namespaces (serverless/kv/) against a moto server over HTTP: namespaces, conditional
writes, expiry, prefix scans, watches and their long polls, snapshots, and writers in separate stores racing on one
key."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import boto3
import pytest

from tidemq_protocol import clock
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
from tidemq_protocol.kv import MAX_PAGE, MAX_PAGE_BYTES, MAX_VALUE_BYTES, ChangeKind, Entry, NamespaceConfig, Snapshot
from tidemq_store.aws import aws_region
from tidemq_store.serverless.kv.namespaces import BUSY_ABANDONED_MS, DELETING, NAMESPACE

WRITERS, INCREMENTS = 4, 25  # each writer a store of its own, all racing on one key


@pytest.fixture
def open_kv(tmp_path, open_test_store, aws_env):
    """Open serverless stores sharing one DynamoDB prefix (as concurrent Lambda invocations do); each call opens a
    store of its own, with its own connections, and returns its KV namespaces."""
    shared = {"backend": "serverless", "efs_path": tmp_path / "efs", "dynamodb_prefix": f"kv{uuid.uuid4().hex[:8]}"}
    return lambda: open_test_store(**shared).kv


@pytest.fixture
def kv(open_kv):
    return open_kv()


def values(page) -> dict[str, bytes]:
    return {entry.key: entry.value for entry in page.entries}


def test_a_namespace_is_created_listed_and_deleted_with_every_key_and_change(kv):
    created = kv.create_namespace(NamespaceConfig("orders", history_ms=3_600_000))
    assert created.created_at > 0 and created.history_ms == 3_600_000
    assert kv.get_namespace("orders") == created
    with pytest.raises(NamespaceExists):
        kv.create_namespace(NamespaceConfig("orders"))
    for name in ("carts", "users", "audit"):
        kv.create_namespace(NamespaceConfig(name))

    first = kv.list_namespaces(limit=2)
    assert [config.name for config in first] == ["audit", "carts"] and first.next_after == "carts"
    rest = kv.list_namespaces(after=first.next_after, limit=2)
    assert [config.name for config in rest] == ["orders", "users"] and rest.next_after is None

    kv.put("orders", "o-1", b"one")
    kv.put("orders", "o-2", b"two")
    kv.delete_namespace("orders")
    for call in (
        lambda: kv.get_namespace("orders"),
        lambda: kv.get("orders", "o-1"),
        lambda: kv.put("orders", "o-3", b"three"),
        lambda: kv.watch("orders", 1),
        lambda: kv.delete_namespace("orders"),
    ):
        with pytest.raises(NamespaceNotFound):
            call()
    assert [config.name for config in kv.list_namespaces()] == ["audit", "carts", "users"]
    for table in (kv.tables.kv_entries, kv.tables.kv_changes):  # its items are gone, not just hidden
        assert list(table.query("orders", consistent_read=True)) == []

    kv.create_namespace(NamespaceConfig("orders"))  # the same name again starts from nothing
    assert kv.revision("orders") == 0
    assert kv.get("orders", "o-1").entry is None and kv.scan("orders").entries == []
    assert kv.put("orders", "o-1", b"again").version == 1
    assert [change.value for change in kv.watch("orders", 1).changes] == [b"again"]


def test_every_write_raises_the_revision_by_one_and_the_key_takes_it_as_its_version(kv):
    kv.create_namespace(NamespaceConfig("config"))
    assert kv.revision("config") == 0
    assert kv.get("config", "colour").entry is None

    first = kv.put("config", "colour", b"blue")
    other = kv.put("config", "size", b"")
    second = kv.put("config", "colour", b"green")
    assert (first.version, first.revision, other.version, second.version) == (1, 1, 2, 3)
    read = kv.get("config", "colour")
    assert read.entry == Entry("colour", b"green", 3) and read.revision == 3
    assert kv.get("config", "size").entry == Entry("size", b"", 2)  # an empty value is a value

    removed = kv.delete("config", "colour")
    assert (removed.key, removed.version, removed.revision) == ("colour", 4, 4)
    assert kv.get("config", "colour").entry is None and kv.revision("config") == 4
    with pytest.raises(KeyNotFound):
        kv.delete("config", "colour")
    assert kv.put("config", "colour", b"red").version == 5  # a re-created key's version is past its old ones
    assert kv.revision("config") == 5


def test_create_only_and_compare_and_set_refuse_with_the_current_version_and_change_nothing(kv):
    kv.create_namespace(NamespaceConfig("locks"))
    assert kv.put("locks", "leader", b"node-1", create_only=True).version == 1
    with pytest.raises(VersionMismatch) as refused:
        kv.put("locks", "leader", b"node-2", create_only=True)
    assert (refused.value.expected, refused.value.current) == (None, 1)

    with pytest.raises(VersionMismatch) as refused:
        kv.put("locks", "leader", b"node-2", expected_version=7)
    assert (refused.value.expected, refused.value.current) == (7, 1)
    with pytest.raises(VersionMismatch) as refused:
        kv.put("locks", "follower", b"node-2", expected_version=1)
    assert (refused.value.expected, refused.value.current) == (1, None)
    with pytest.raises(VersionMismatch) as refused:
        kv.delete("locks", "leader", expected_version=2)
    assert (refused.value.expected, refused.value.current) == (2, 1)
    with pytest.raises(VersionMismatch):
        kv.delete("locks", "follower", expected_version=1)
    with pytest.raises(InvalidArgument):
        kv.put("locks", "leader", b"x", create_only=True, expected_version=1)
    assert kv.revision("locks") == 1 and kv.get("locks", "leader").entry.value == b"node-1"
    assert kv.watch("locks", 1).next_revision == 2  # no change was recorded for a refused write

    assert kv.put("locks", "leader", b"node-2", expected_version=1).version == 2
    assert kv.delete("locks", "leader", expected_version=2).version == 3
    assert kv.put("locks", "leader", b"node-3", create_only=True).version == 4


def test_an_expired_key_reads_as_absent_everywhere_and_dynamodb_ttl_removes_it_later(kv, aws_env):
    kv.create_namespace(NamespaceConfig("sessions"))
    short = kv.put("sessions", "s-1", b"token", ttl_ms=2_000)
    kv.put("sessions", "s-2", b"kept")
    read = kv.get("sessions", "s-1").entry
    assert read.value == b"token" and read.expires_at_ms is not None
    assert kv.watch("sessions", 1).changes[0].expires_at_ms == read.expires_at_ms
    time.sleep(max(0, read.expires_at_ms - clock.now_ms()) / 1000 + 0.05)

    assert kv.get("sessions", "s-1").entry is None
    assert list(values(kv.get_many("sessions", ["s-1", "s-2"]))) == ["s-2"]
    assert list(values(kv.scan("sessions", prefix="s-"))) == ["s-2"]
    with pytest.raises(VersionMismatch) as refused:
        kv.put("sessions", "s-1", b"late", expected_version=short.version)
    assert refused.value.current is None
    with pytest.raises(KeyNotFound):
        kv.delete("sessions", "s-1")
    assert kv.put("sessions", "s-1", b"new", create_only=True).version == 3

    client = boto3.client("dynamodb", region_name=aws_region())
    prefix = kv.tables.prefix
    for table in ("kv_entries", "kv_changes"):
        ttl = client.describe_time_to_live(TableName=f"{prefix}-{table}")["TimeToLiveDescription"]
        assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "purge_at")
    item = client.get_item(TableName=f"{prefix}-kv_entries", Key={"namespace": {"S": "sessions"}, "key": {"S": "s-2"}})
    assert "purge_at" not in item["Item"]  # a key without a TTL stays


def test_a_prefix_scan_pages_through_keys_in_order_by_count_and_by_bytes(kv):
    kv.create_namespace(NamespaceConfig("catalog"))
    keys = [f"item/{i:02d}" for i in range(25)]
    for key in [*reversed(keys), "item", "itemz", "a", "z"]:
        kv.put("catalog", key, key.encode())

    seen, after = [], None
    while True:
        page = kv.scan("catalog", prefix="item/", after=after, limit=10)
        seen += page.entries
        if page.next_after is None:
            break
        assert page.next_after == page.entries[-1].key
        after = page.next_after
    assert [entry.key for entry in seen] == keys
    assert all(entry.value == entry.key.encode() for entry in seen)
    assert [entry.key for entry in kv.scan("catalog", prefix="item/", limit=25).entries] == keys
    assert kv.scan("catalog", prefix="item/", limit=25).next_after is None

    assert list(values(kv.scan("catalog", prefix="item/", after="item/22"))) == ["item/23", "item/24"]
    assert list(values(kv.scan("catalog", prefix="item/", after="j"))) == []  # past the prefix: nothing
    assert list(values(kv.scan("catalog", prefix="item/", after="a")))[:1] == ["item/00"]
    everything = kv.scan("catalog", limit=MAX_PAGE)
    assert [entry.key for entry in everything.entries] == sorted([*keys, "item", "itemz", "a", "z"])
    assert everything.revision == 29

    kv.create_namespace(NamespaceConfig("blobs"))
    for i in range(14):
        kv.put("blobs", f"b{i:02d}", bytes([i]) * MAX_VALUE_BYTES)
    first = kv.scan("blobs", limit=MAX_PAGE)
    per_page = MAX_PAGE_BYTES // MAX_VALUE_BYTES
    assert len(first.entries) == per_page and first.next_after == f"b{per_page - 1:02d}"
    second = kv.scan("blobs", after=first.next_after, limit=MAX_PAGE)
    assert len(second.entries) == 14 - per_page and second.next_after is None
    assert second.entries[-1].value == bytes([13]) * MAX_VALUE_BYTES
    changes = kv.watch("blobs", 1, limit=MAX_PAGE)  # a watch's page is cut by bytes the same way
    assert len(changes.changes) == per_page and changes.next_revision == per_page + 1


def test_get_many_returns_the_keys_that_exist_in_key_order(kv):
    kv.create_namespace(NamespaceConfig("users"))
    for key in ("carol", "alice", "bob"):
        kv.put("users", key, key.upper().encode())
    page = kv.get_many("users", ["dave", "carol", "alice", "carol"])
    assert values(page) == {"alice": b"ALICE", "carol": b"CAROL"}
    assert [entry.key for entry in page.entries] == ["alice", "carol"] and page.revision == 3
    assert kv.get_many("users", []).entries == []
    with pytest.raises(InvalidArgument):
        kv.get_many("users", [f"k{i}" for i in range(MAX_PAGE + 1)])


def test_a_watch_follows_a_key_a_prefix_or_everything_from_where_the_last_call_stopped(kv):
    kv.create_namespace(NamespaceConfig("feed"))
    kv.put("feed", "a/1", b"x")  # 1
    kv.put("feed", "b/1", b"y")  # 2
    kv.put("feed", "a/2", b"z")  # 3
    kv.delete("feed", "a/1")  # 4
    kv.put("feed", "a/1", b"w", ttl_ms=60_000)  # 5

    first = kv.watch("feed", 1, limit=2)
    assert [change.revision for change in first.changes] == [1, 2] and first.next_revision == 3
    assert first.revision == 5
    rest = kv.watch("feed", first.next_revision, limit=10)
    assert [change.revision for change in rest.changes] == [3, 4, 5] and rest.next_revision == 6
    deleted = rest.changes[1]
    assert (deleted.kind, deleted.key, deleted.value, deleted.version, deleted.previous) == (
        ChangeKind.DELETE,
        "a/1",
        b"",
        4,
        3,
    )
    assert rest.changes[2].expires_at_ms is not None
    caught_up = kv.watch("feed", 6)
    assert (caught_up.changes, caught_up.next_revision) == ([], 6)

    one_key = kv.watch("feed", 1, key="a/1")
    assert [(c.revision, c.kind) for c in one_key.changes] == [
        (1, ChangeKind.PUT),
        (4, ChangeKind.DELETE),
        (5, ChangeKind.PUT),
    ]
    assert one_key.next_revision == 6
    under = kv.watch("feed", 1, prefix="a/", limit=2)
    assert [change.revision for change in under.changes] == [1, 3]
    assert under.next_revision == 4  # it read 1-3 (2 did not match) and stopped before the next match
    assert [change.revision for change in kv.watch("feed", 4, prefix="a/").changes] == [4, 5]
    nothing = kv.watch("feed", 1, key="c")
    assert (nothing.changes, nothing.next_revision) == ([], 6)

    with pytest.raises(InvalidArgument):
        kv.watch("feed", 0)
    with pytest.raises(InvalidArgument):
        kv.watch("feed", 1, limit=0)


def test_a_long_poll_returns_as_soon_as_a_write_lands_from_another_thread(kv):
    kv.create_namespace(NamespaceConfig("events"))
    kv.put("events", "boot", b"")
    writer = threading.Timer(0.5, lambda: kv.put("events", "ping", b"pong"))
    started = time.monotonic()
    writer.start()
    page = kv.watch("events", 2, wait_s=10)
    waited = time.monotonic() - started
    writer.join()
    assert [(change.key, change.value, change.revision) for change in page.changes] == [("ping", b"pong", 2)]
    assert 0.4 < waited < 5 and page.next_revision == 3

    filtered = threading.Timer(0.3, lambda: (kv.put("events", "other", b""), kv.put("events", "mine", b"!")))
    filtered.start()
    page = kv.watch("events", 3, key="mine", wait_s=10)  # a change to another key does not end the wait
    filtered.join()
    assert [change.key for change in page.changes] == ["mine"] and page.next_revision == 5

    started = time.monotonic()
    idle = kv.watch("events", 5, wait_s=0.4)
    assert (idle.changes, idle.next_revision, idle.revision) == ([], 5, 4)
    assert 0.35 < time.monotonic() - started < 3


def test_a_watch_from_changes_that_are_gone_raises_revision_compacted(kv):
    kv.create_namespace(NamespaceConfig("history"))
    for i in range(6):
        kv.put("history", f"k{i}", b"%d" % i)
    changes = kv.tables.kv_changes

    changes("history", 1).delete()  # as DynamoDB's TTL would, past the namespace's history_ms
    with pytest.raises(RevisionCompacted) as compacted:
        kv.watch("history", 1)
    assert (compacted.value.revision, compacted.value.oldest) == (1, 2)
    assert [change.revision for change in kv.watch("history", 2).changes] == [2, 3, 4, 5, 6]

    changes("history", 4).delete()  # a gap further on ends the page before it; the next call reports it
    page = kv.watch("history", 2)
    assert [change.revision for change in page.changes] == [2, 3] and page.next_revision == 4
    with pytest.raises(RevisionCompacted) as compacted:
        kv.watch("history", page.next_revision)
    assert compacted.value.oldest == 5

    for revision in (2, 3, 5, 6):
        changes("history", revision).delete()
    with pytest.raises(RevisionCompacted) as compacted:
        kv.watch("history", 3)
    assert compacted.value.oldest == 7  # nothing retained: watch from the revision a fresh read returns
    read = kv.get("history", "k5")
    assert read.entry.version == 6 and read.revision == 6
    kv.put("history", "k6", b"6")
    assert [change.key for change in kv.watch("history", read.revision + 1).changes] == ["k6"]


def test_restore_fills_a_missing_or_empty_namespace_keeping_versions_and_refuses_a_used_one(kv):
    kv.create_namespace(NamespaceConfig("source", history_ms=120_000))
    kv.put("source", "a", b"1")  # 1
    kv.put("source", "b", b"2", ttl_ms=3_600_000)  # 2
    kv.put("source", "gone", b"x")  # 3
    kv.put("source", "a", b"11")  # 4
    kv.delete("source", "gone")  # 5
    snapshot = kv.export("source")
    assert snapshot.revision == 5 and [(e.key, e.version) for e in snapshot.entries] == [("a", 4), ("b", 2)]

    assert kv.restore(snapshot, namespace="copy") == 2
    assert kv.get_namespace("copy").history_ms == 120_000
    assert kv.scan("copy").entries == snapshot.entries and kv.revision("copy") == 4
    restored = kv.watch("copy", 1).changes
    assert [(c.revision, c.previous, c.kind, c.key, c.version) for c in restored] == [
        (2, 0, ChangeKind.PUT, "b", 2),
        (4, 2, ChangeKind.PUT, "a", 4),
    ]
    assert [change.revision for change in kv.watch("copy", 3).changes] == [4]  # 3 never existed here: not gone
    assert kv.put("copy", "a", b"111", expected_version=4).version == 5

    with pytest.raises(NamespaceNotEmpty):
        kv.restore(snapshot, namespace="copy")
    kv.create_namespace(NamespaceConfig("blank"))
    assert kv.restore(snapshot, namespace="blank") == 2
    assert kv.get_namespace("blank").history_ms == NamespaceConfig("x").history_ms  # its own settings stay
    assert values(kv.scan("blank")) == {"a": b"11", "b": b"2"}

    kv.delete_namespace("source")
    assert kv.restore(snapshot) == 2  # the snapshot's own name
    assert kv.export("source").entries == snapshot.entries

    kv.create_namespace(NamespaceConfig("strict"))
    for bad in (
        Snapshot(snapshot.config, 3, [Entry("", b"", 3)]),
        Snapshot(snapshot.config, 0, [Entry("a", b"", 0)]),
    ):
        with pytest.raises(InvalidArgument):
            kv.restore(bad, namespace="strict")
    assert kv.revision("strict") == 0 and kv.scan("strict").entries == []

    part = Snapshot(snapshot.config, 0, [Entry("late", b"", 5)])
    with pytest.raises(NamespaceNotFound):  # a later part goes into a namespace the first part made
        kv.restore(part, namespace="nowhere", append=True)
    assert kv.restore(Snapshot(snapshot.config, 0, [Entry("late", b"!", 9)]), namespace="copy", append=True) == 1
    assert kv.revision("copy") == 9 and kv.watch("copy", 6).changes[0].previous == 5
    assert kv.restore(part, namespace="copy", append=True) == 1  # below the revision: it goes above (model.restorable)
    assert kv.get("copy", "late").entry.version == 10 and kv.revision("copy") == 10


def test_an_export_taken_while_others_write_is_the_namespace_at_one_revision(open_kv):
    kv = open_kv()
    kv.create_namespace(NamespaceConfig("busy"))
    for i in range(40):
        kv.put("busy", f"k{i:02d}", b"start")
    stop = threading.Event()

    def write(store, who: int) -> None:
        i = 0
        while not stop.is_set():
            key = f"k{(i * 7 + who) % 40:02d}"
            if i % 5 == 4:
                with contextlib.suppress(KeyNotFound):  # deleted already by the other writer
                    store.delete("busy", key)
            else:
                store.put("busy", key, b"%d-%d" % (who, i))
            i += 1

    writers = [threading.Thread(target=write, args=(open_kv(), who)) for who in range(2)]
    for thread in writers:
        thread.start()
    try:
        time.sleep(0.2)
        snapshots = [kv.export("busy") for _ in range(3)]
    finally:
        stop.set()
        for thread in writers:
            thread.join()

    for snapshot in snapshots:  # replaying the history to the snapshot's revision gives exactly its contents
        state: dict[str, Entry] = {}
        revision = 1
        while revision <= snapshot.revision:
            page = kv.watch("busy", revision, limit=MAX_PAGE)
            for change in page.changes:
                if change.revision > snapshot.revision:
                    break
                if change.kind is ChangeKind.PUT:
                    state[change.key] = Entry(change.key, change.value, change.version, change.expires_at_ms)
                else:
                    del state[change.key]
            revision = page.next_revision
        assert snapshot.entries == [state[key] for key in sorted(state)]
    assert snapshots[-1].revision > 40  # the writers did write while it ran
    assert kv.export("busy").entries == kv.scan("busy", limit=MAX_PAGE).entries


@pytest.mark.slow
def test_compare_and_set_increments_from_separate_stores_lose_none(open_kv):
    first = open_kv()
    first.create_namespace(NamespaceConfig("counters"))
    first.put("counters", "hits", b"0")
    stores = [open_kv() for _ in range(WRITERS)]  # each its own tables and connections, as Lambda invocations
    succeeded, refused, failures = [], [], []

    def increment(kv) -> None:
        try:
            done = 0
            while done < INCREMENTS:
                read = kv.get("counters", "hits").entry
                try:
                    kv.put("counters", "hits", b"%d" % (int(read.value) + 1), expected_version=read.version)
                except VersionMismatch:
                    refused.append(1)
                    continue
                done += 1
                succeeded.append(1)
        except Exception as error:  # reported below: a thread's exception would otherwise vanish
            failures.append(error)

    threads = [threading.Thread(target=increment, args=(kv,)) for kv in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    total = WRITERS * INCREMENTS
    final = first.get("counters", "hits")
    assert int(final.entry.value) == len(succeeded) == total
    assert final.entry.version == final.revision == total + 1  # dense: one revision per successful write
    values_seen, revision = [], 1
    while revision <= final.revision:
        page = first.watch("counters", revision, limit=MAX_PAGE)
        values_seen += [int(change.value) for change in page.changes]
        revision = page.next_revision
    assert values_seen == list(range(total + 1))  # every increment recorded once, in order
    assert refused  # they did race


def test_bad_arguments_are_refused_before_anything_changes(kv):
    kv.create_namespace(NamespaceConfig("checked"))
    kv.put("checked", "k", b"v")
    for call, error in (
        (lambda: kv.create_namespace(NamespaceConfig("no spaces")), InvalidName),
        (lambda: kv.create_namespace(NamespaceConfig("short", history_ms=1)), InvalidArgument),
        (lambda: kv.get("no/such", "k"), InvalidName),
        (lambda: kv.put("checked", "", b"v"), InvalidArgument),
        (lambda: kv.put("checked", "tab\there", b"v"), InvalidArgument),
        (lambda: kv.put("checked", "k" * 1025, b"v"), InvalidArgument),
        (lambda: kv.put("checked", "big", b"v" * (MAX_VALUE_BYTES + 1)), InvalidArgument),
        (lambda: kv.put("checked", "k", b"v", ttl_ms=0), InvalidArgument),
        (lambda: kv.delete("checked", "\x00"), InvalidArgument),
        (lambda: kv.scan("checked", limit=MAX_PAGE + 1), InvalidArgument),
        (lambda: kv.list_namespaces(limit=0), InvalidArgument),
        (lambda: kv.watch("checked", 1, key=""), InvalidArgument),
    ):
        with pytest.raises(error):
            call()
    assert kv.revision("checked") == 1 and [c.name for c in kv.list_namespaces()] == ["checked"]
    with pytest.raises(NamespaceNotFound):
        kv.put("missing", "k", b"v")


def test_a_deletion_that_died_part_way_is_finished_by_the_next_create_of_the_name(kv):
    kv.create_namespace(NamespaceConfig("crashy"))
    kv.put("crashy", "left", b"behind")
    namespaces = kv.tables.kv_namespaces
    stale = clock.now_ms() - BUSY_ABANDONED_MS - 1
    namespaces(NAMESPACE, "crashy").update(  # what a deletion that died after holding the namespace leaves
        actions=[namespaces.busy.set(DELETING), namespaces.busy_token.set("dead"), namespaces.busy_since.set(stale)]
    )
    with pytest.raises(NamespaceNotFound):
        kv.get("crashy", "left")
    assert kv.list_namespaces() == []

    kv.create_namespace(NamespaceConfig("crashy"))
    assert kv.revision("crashy") == 0 and kv.scan("crashy").entries == []
    assert kv.watch("crashy", 1).changes == []  # nor any of its history
    assert kv.put("crashy", "left", b"anew").version == 1
