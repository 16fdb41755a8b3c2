"""A listing never fails because entries vanish under it: on each backend, for topics, groups, users and KV
namespaces, threads page through the engine's listing while others delete and remake entries (tests/listing_race.py
says how the race is run and what each pass must hold). The same race over HTTP is in
tests/e2e/test_gateway_concurrency.py."""

from __future__ import annotations

import uuid

import pytest

from tidemq_protocol.kv import NamespaceConfig
from tidemq_store import GroupConfig, MessageStore, TopicConfig
from tidemq_store.acl import UserRecord

from ..listing_race import Entries, race_listings


@pytest.fixture(params=["embedded", "serverless"])
def store(request, open_test_store, tmp_path) -> MessageStore:
    if request.param == "embedded":
        return open_test_store()
    request.getfixturevalue("aws_env")
    return open_test_store(backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=f"l{uuid.uuid4().hex[:8]}")


def names_of(page) -> tuple[list[str], str | None]:
    return [entry.name for entry in page], page.next_after


def topics(store: MessageStore) -> Entries:
    return Entries(
        create=lambda name: store.create_topic(TopicConfig(name=name, queues=1)),
        delete=store.delete_topic,
        page=lambda after, limit: names_of(store.list_topics(after, limit)),
    )


def groups(store: MessageStore) -> Entries:
    return Entries(
        create=lambda name: store.create_group(GroupConfig(name=name)),
        delete=store.delete_group,
        page=lambda after, limit: names_of(store.list_groups(after, limit)),
    )


def users(store: MessageStore) -> Entries:
    return Entries(
        create=lambda name: store.create_user(UserRecord(name=name, sealed_secret="sealed")),
        delete=store.delete_user,
        page=lambda after, limit: names_of(store.list_users(after, limit)),
    )


def namespaces(store: MessageStore) -> Entries:
    return Entries(
        create=lambda name: store.kv.create_namespace(NamespaceConfig(name)),
        delete=store.kv.delete_namespace,
        page=lambda after, limit: names_of(store.kv.list_namespaces(after, limit)),
    )


@pytest.mark.parametrize("kind", [topics, groups, users, namespaces], ids=lambda kind: kind.__name__)
def test_a_listing_skips_entries_deleted_under_it_and_pages_through_the_rest_once(store, kind):
    report = race_listings(kind(store), "listed-")
    assert report.deletes > 0 and report.passes > 0
    assert report.pages_racing_deletes > 0, f"no delete completed while a page was read: no race ({report})"
