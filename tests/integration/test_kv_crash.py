"""Nothing a KV write acknowledged is lost: the embedded backend's writer process is killed with SIGKILL at random
moments under write load, again and again, and every acknowledged write is there after each restart, with its
version, in the namespace's history and (when it is the key's last) in its state."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from tests.killed import killed_at_random
from tidemq_protocol.kv import ChangeKind
from tidemq_store import StoreConfig, open_store

WRITER = Path(__file__).with_name("kv_crash_writer.py")
KILLS = [10, pytest.param(40, marks=pytest.mark.long)]  # make test's, and make test-long's


def history(kv) -> list:
    changes, revision = [], 1
    while revision <= kv.revision("crash"):
        page = kv.watch("crash", revision, limit=1000)
        changes += page.changes
        revision = page.next_revision
    return changes


@pytest.mark.parametrize("kills", KILLS)
def test_every_acknowledged_kv_write_survives_repeated_sigkill(tmp_path, kills):
    home = tmp_path / "store"
    rng = random.Random(20261125)
    acknowledged: dict[int, tuple[str, str, str | None]] = {}  # version -> (kind, key, value)
    kills_while_writing = 0
    for run in range(kills):
        # sometimes in recovery, mostly mid-write
        out, _ = killed_at_random([sys.executable, str(WRITER), str(home), str(run)], run, rng)
        lines = out.decode().split("\n")[:-1]  # a line cut by the kill has no newline: not acknowledged
        kills_while_writing += bool(lines)
        for line in lines:
            kind, key, version, *value = line.split(" ")
            assert int(version) not in acknowledged, f"version {version} acknowledged twice"
            acknowledged[int(version)] = (kind, key, value[0] if value else None)

        with open_store(StoreConfig(home=home, commitlog_segment_bytes=256 * 1024)) as store:
            kv = store.kv
            changes = history(kv)
            revision = kv.revision("crash") if acknowledged or run else 0
            state = {entry.key: entry for entry in kv.export("crash").entries} if changes else {}
        by_revision = {change.revision: change for change in changes}
        assert [change.revision for change in changes] == list(range(1, revision + 1)), "dense, in order"
        for version, (kind, key, value) in acknowledged.items():
            change = by_revision.get(version)
            assert change is not None, f"acknowledged write {version} ({kind} {key}) is gone"
            assert change.key == key and change.kind is ChangeKind(kind.replace("del", "delete"))
            if kind == "put":
                assert change.value.decode() == value and change.version == version
        last: dict[str, object] = {}
        for change in changes:  # the state is the history replayed: each key's last change
            last[change.key] = change
        for key, change in last.items():
            if change.kind is ChangeKind.PUT:
                assert (state[key].value, state[key].version) == (change.value, change.version), key
            else:
                assert key not in state, key
    assert kills_while_writing >= kills // 2, "most kills should land while writes go on"
    assert len(acknowledged) > 10 * kills
