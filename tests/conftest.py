"""Fixtures shared by every test layer: real stores on real files under pytest's tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.local_aws import LocalAws
from tidemq_store import MessageStore, StoreConfig, open_store


@pytest.fixture
def store_config(tmp_path: Path) -> Callable[..., StoreConfig]:
    """Build a StoreConfig rooted in this test's tmp_path, with overrides."""

    def build(**overrides) -> StoreConfig:
        overrides.setdefault("home", tmp_path / "store")
        return StoreConfig(**overrides)

    return build


@pytest.fixture
def open_test_store(store_config) -> Iterator[Callable[..., MessageStore]]:
    """Open stores (closed at the end of the test if still open)."""
    opened: list[MessageStore] = []

    def opener(**overrides) -> MessageStore:
        store = open_store(store_config(**overrides))
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(open_test_store) -> MessageStore:
    return open_test_store()


@pytest.fixture(scope="session", autouse=True)
def local_aws_asked_for() -> Iterator[None]:
    """The tests ask for the embedded moto server (TIDEMQ_LOCAL_AWS=moto), as `make run` does: a gateway (or store
    of `functions.store`) that needs S3 or DynamoDB, with no AWS_ENDPOINT_URL set, starts one. Nothing else ever
    starts it; tests of that undo this with monkeypatch."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIDEMQ_LOCAL_AWS", "moto")
        yield


@pytest.fixture(scope="session")
def local_aws() -> Iterator[LocalAws]:
    """A moto server over HTTP on a free loopback port, for the whole session."""
    with LocalAws() as aws:
        yield aws


@pytest.fixture
def aws_env(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> LocalAws:
    """boto3 in this test points at the session's moto server (AWS_ENDPOINT_URL and test credentials)."""
    for name, value in local_aws.env.items():
        monkeypatch.setenv(name, value)
    return local_aws
