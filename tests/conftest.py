"""Fixtures shared by every test layer: real stores on real files under pytest's tmp_path."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devtools.aws_faults import FaultProxy
from devtools.localstack import LocalStack
from devtools.moto_server import LocalAws
from shared.settings import LocalAwsMode
from tidemq_store import MessageStore, StoreConfig, open_store

LOCAL_AWS = LocalAwsMode(os.environ.get("TIDEMQ_LOCAL_AWS") or LocalAwsMode.MOTO)
"""This run's local AWS: moto (`make test`), or LocalStack (`make test-localstack`: TIDEMQ_LOCAL_AWS=localstack)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On LocalStack, the run holds the tests that use the session's local AWS (the fixture `local_aws`) and the
    ones marked `localstack` or `local_aws`, less those marked `moto` (they need what only moto serves: EMR
    Serverless); on moto, every test but those marked `localstack`.

    `make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`). Each test file is one unit
    of work, so its module fixtures (a gateway, a moto server's tables) start once; the Spark tests are one unit,
    so one Spark session serves them all. Units holding slow tests are handed out first, so the two workers end
    together instead of one finishing a long crash test alone."""
    for item in items:
        if events_on_serverless(item) or long_on_serverless(item):
            item.add_marker(pytest.mark.long)
    left_out = [item for item in items if not in_this_run(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if in_this_run(item)]
    for item in items:
        group = "spark" if item.path.parent.name == "spark" else str(item.path.relative_to(item.config.rootpath))
        item.add_marker(pytest.mark.xdist_group(group))
    slow = {group_of(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (group_of(item) != "spark", group_of(item) not in slow))


def events_on_serverless(item: pytest.Item) -> bool:
    """Whether a test runs under the events dispatch (`tests.gateways.each_dispatch`) on the serverless backend:
    make test runs the events dispatch on the embedded backend (the dispatch does not depend on the store), and
    make test-long on both, to keep make test's time."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    return params.get("dispatch") == "events" and "serverless" in params.values()


def long_on_serverless(item: pytest.Item) -> bool:
    """Whether a test marked `serverless_long` runs on the serverless backend: make test runs it on the embedded
    one (a large acceptance run, whose backend the serverless tests cover), make test-long on both."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    return item.get_closest_marker("serverless_long") is not None and "serverless" in params.values()


def in_this_run(item: pytest.Item) -> bool:
    if LOCAL_AWS is LocalAwsMode.LOCALSTACK:
        marked = item.get_closest_marker("localstack") or item.get_closest_marker("local_aws")
        return ("local_aws" in item.fixturenames or marked is not None) and not item.get_closest_marker("moto")
    return not item.get_closest_marker("localstack")


def group_of(item: pytest.Item) -> str:
    return item.get_closest_marker("xdist_group").args[0]


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
    """The tests ask for a local AWS (TIDEMQ_LOCAL_AWS: moto unless the run is on LocalStack), as `make run` does: a
    gateway (or store of `functions.store`) that needs S3 or DynamoDB, with no AWS_ENDPOINT_URL set, starts one.
    Nothing else ever starts it; tests of that undo this with monkeypatch."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIDEMQ_LOCAL_AWS", LOCAL_AWS)
        yield


@pytest.fixture(scope="session")
def local_aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAws | LocalStack]:
    """The session's local AWS over HTTP on a free loopback port: a moto server, or LocalStack on a LocalStack run."""
    if LOCAL_AWS is LocalAwsMode.LOCALSTACK:
        with LocalStack(tmp_path_factory.mktemp("localstack")) as aws:
            yield aws
    else:
        with LocalAws() as aws:
            yield aws


@pytest.fixture
def aws_env(local_aws: LocalAws | LocalStack, monkeypatch: pytest.MonkeyPatch) -> LocalAws | LocalStack:
    """boto3 in this test points at the session's moto server (AWS_ENDPOINT_URL and test credentials)."""
    for name, value in local_aws.env.items():
        monkeypatch.setenv(name, value)
    return local_aws


@pytest.fixture(params=["embedded", pytest.param("serverless", marks=pytest.mark.local_aws)])
def reopen(request, open_test_store, tmp_path):
    """Opens the backend's store (embedded; serverless on the moto server), the same data each time: call it again
    after closing the one it gave."""
    if request.param == "embedded":
        return open_test_store
    request.getfixturevalue("aws_env")
    prefix = f"r{uuid.uuid4().hex[:8]}"
    return lambda: open_test_store(backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=prefix)


@pytest.fixture(scope="session")
def fault_proxy(local_aws: LocalAws | LocalStack) -> Iterator[FaultProxy]:
    """A fault injector (devtools/aws_faults.py) in front of the session's local AWS; each test that uses it through
    `faulty_aws` starts with no fault set."""
    with FaultProxy(local_aws.endpoint) as proxy:
        yield proxy


@pytest.fixture
def faulty_aws(fault_proxy: FaultProxy, aws_env, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """boto3 in this test reaches the session's local AWS through the fault injector (no fault set until the test
    sets some; cleared at its end), its counts from zero."""
    fault_proxy.reset()
    for name, value in fault_proxy.env.items():
        monkeypatch.setenv(name, value)
    yield fault_proxy
    fault_proxy.clear()
