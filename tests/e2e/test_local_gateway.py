"""`make run`'s server: a real HTTP server on loopback serving the Lambda handlers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest


def test_health_answers_200_and_the_store_lives_under_tidemq_home(gateway):
    base, home, backend = gateway
    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
        assert response.status == 200
        report = json.loads(response.read())
    assert report["status"] == "ok"
    expected = {"disk"} if backend == "embedded" else {"dynamodb", "disk"}
    assert {d["name"] for d in report["dependencies"] if d["status"] == "ok" and d["required"]} == expected
    if backend == "embedded":
        assert (home / "commitlog").is_dir() and (home / "metadata").is_dir()
    else:  # the shared directory; the rest is in DynamoDB
        assert (home / "efs" / "segments").is_dir()


def test_unknown_routes_are_404(gateway):
    base = gateway.url
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{base}/no/such/route", timeout=5)
    assert raised.value.code == 404
