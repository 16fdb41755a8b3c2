"""KV namespaces over HTTP through a live local gateway, on each backend: compare-and-set increments from several
client processes at once, and a prefix watch that reconnects for every page while writers run."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.gateways import gateway_as_admin
from tidemq.httpx_auth import signed_client

CLIENT = Path(__file__).with_name("kv_cas_client.py")
CLIENTS, ATTEMPTS = 4, 40
ROOT = Path(__file__).parents[2]


@pytest.fixture(params=["embedded", "serverless"])
def served(request, tmp_path):
    with gateway_as_admin(tmp_path / "data", TIDEMQ_BACKEND=request.param) as url:
        yield url


def encoded(value: bytes) -> str:
    return base64.b64encode(value).decode()


def test_concurrent_compare_and_set_increments_count_every_success_exactly_once(served, tmp_path):
    with signed_client(served, timeout=60) as http:
        assert http.post("/v1/kv", json={"name": "counters"}).status_code == 201
        assert http.put("/v1/kv/counters/entry", params={"key": "n"}, json={"value": encoded(b"0")}).status_code == 200
        environment = {
            **os.environ,
            "PYTHONPATH": f"{ROOT}:{ROOT / 'shared'}:{ROOT / 'layers/store_engine'}",
        }
        clients = [
            subprocess.Popen(
                [sys.executable, str(CLIENT), served, "counters", "n", str(ATTEMPTS)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=environment,
                text=True,
            )
            for _ in range(CLIENTS)
        ]
        successes = []
        for client in clients:
            out, err = client.communicate(timeout=600)
            assert client.returncode == 0, err[-3000:]
            successes += [tuple(map(int, line.split())) for line in out.splitlines()]
        final = http.get("/v1/kv/counters/entry", params={"key": "n"}).json()
    assert int(base64.b64decode(final["value"])) == len(successes)
    assert sorted(value for _, value in successes) == list(range(1, len(successes) + 1))  # each increment once
    assert len({version for version, _ in successes}) == len(successes)
    assert CLIENTS <= len(successes) < CLIENTS * ATTEMPTS  # every client won some, and they really raced


def test_a_prefix_watch_reconnecting_for_every_page_sees_every_change_once_in_order(served):
    with signed_client(served, timeout=60) as http:
        assert http.post("/v1/kv", json={"name": "feed"}).status_code == 201
    made: list[tuple[int, str]] = []
    lock = threading.Lock()

    def writer(who: int) -> None:
        with signed_client(served, timeout=60) as http:
            for i in range(40):
                key = f"{'pq'[(i + who) % 2]}/{who}-{i % 5}"
                if i % 6 == 5:
                    answer = http.delete("/v1/kv/feed/entry", params={"key": key})
                    if answer.status_code == 404:
                        continue
                else:
                    answer = http.put("/v1/kv/feed/entry", params={"key": key}, json={"value": encoded(b"%d" % i)})
                answer.raise_for_status()
                with lock:
                    made.append((answer.json()["revision"], key))

    writers = [threading.Thread(target=writer, args=(who,)) for who in range(3)]
    for thread in writers:
        thread.start()
    watched, revision = [], 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        written = not any(t.is_alive() for t in writers)  # before the page: a write after it is on the next page
        with signed_client(served, timeout=60) as http:  # a new connection every call
            page = http.get(
                "/v1/kv/feed/changes", params={"from_revision": revision, "prefix": "p/", "limit": 5, "wait_ms": 200}
            )
        page.raise_for_status()
        body = page.json()
        watched += [(change["revision"], change["key"], change["kind"]) for change in body["changes"]]
        revision = body["next_revision"]
        if written and revision > body["revision"]:
            break
    for thread in writers:
        thread.join()
    expected = sorted((revision, key) for revision, key in made if key.startswith("p/"))
    assert [(revision, key) for revision, key, _ in watched] == expected


@pytest.mark.parametrize("served", ["embedded"], indirect=True)
def test_bad_input_is_a_clear_4xx_and_changes_nothing(served):
    with signed_client(served, timeout=60) as http:
        assert http.post("/v1/kv", json={"name": "strict"}).status_code == 201
        entry = "/v1/kv/strict/entry"
        refused = {
            "a bad namespace name": http.post("/v1/kv", json={"name": "no spaces"}),
            "a key with a newline": http.put(entry, params={"key": "a\nb"}, json={"value": ""}),
            "a key too long": http.put(entry, params={"key": "k" * 1025}, json={"value": ""}),
            "a value too large": http.put(entry, params={"key": "big"}, json={"value": encoded(b"x" * (256 * 1024))}),
            "a value not base64": http.put(entry, params={"key": "k"}, json={"value": "not base64!"}),
            "a TTL out of range": http.put(entry, params={"key": "k"}, json={"value": "", "ttl_ms": 0}),
            "a malformed version": http.put(
                entry, params={"key": "k"}, json={"value": ""}, headers={"If-Match": "seven"}
            ),
            "a watch from revision 0": http.get("/v1/kv/strict/changes", params={"from_revision": 0}),
        }
        for what, answer in refused.items():
            assert answer.status_code in (400, 413, 422), (what, answer.status_code, answer.text)
            assert answer.json().get("message"), what  # says what was wrong
        stale = http.put(entry, params={"key": "k"}, json={"value": ""}, headers={"If-Match": '"3"'})
        assert (stale.status_code, stale.json()["error"]) == (412, "VersionMismatch")
        described = http.get("/v1/kv/strict").json()
    assert described["revision"] == 0  # nothing was written
