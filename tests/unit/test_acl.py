"""ACL 2.0 decisions (tidemq_store/acl.py) and the request signature (shared/signing.py), as pure functions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tidemq_protocol import signing
from tidemq_protocol.acl import CLUSTER, AclEntry, Action, Decision, UserType, group, topic
from tidemq_store.acl import UserRecord, decide


def user(*entries: AclEntry, user_type: UserType = UserType.NORMAL) -> UserRecord:
    return UserRecord(name="alice", user_type=user_type, sealed_secret="x", policies=list(entries))


def allow(resource: str, *actions: str, **options) -> AclEntry:
    return AclEntry(resource=resource, actions=list(actions), **options)


def deny(resource: str, *actions: str, **options) -> AclEntry:
    return AclEntry(resource=resource, actions=list(actions), decision=Decision.DENY, **options)


def test_nothing_matching_is_a_deny_and_a_super_user_may_do_anything():
    assert decide(user(), topic("orders"), Action.PUB, None) is Decision.DENY
    assert decide(user(user_type=UserType.SUPER), topic("orders"), Action.DELETE, None) is Decision.ALLOW


def test_literal_prefix_and_any_resources_match_what_they_name():
    alice = user(allow("Topic:orders", "Pub"), allow("Topic:audit-*", "Sub"), allow("Group:*", "Get"))
    assert decide(alice, topic("orders"), Action.PUB, None) is Decision.ALLOW
    assert decide(alice, topic("orders2"), Action.PUB, None) is Decision.DENY  # literal is literal
    assert decide(alice, topic("audit-eu"), Action.SUB, None) is Decision.ALLOW
    assert decide(alice, topic("audits"), Action.SUB, None) is Decision.DENY
    assert decide(alice, group("any-group"), Action.GET, None) is Decision.ALLOW
    assert decide(alice, topic("any-group"), Action.GET, None) is Decision.DENY  # a type is a type
    assert decide(user(allow("*", "Get")), CLUSTER, Action.GET, None) is Decision.ALLOW


def test_a_matching_deny_wins_over_any_allow():
    alice = user(allow("Topic:*", "All"), deny("Topic:payroll", "Sub"))
    assert decide(alice, topic("orders"), Action.SUB, None) is Decision.ALLOW
    assert decide(alice, topic("payroll"), Action.PUB, None) is Decision.ALLOW
    assert decide(alice, topic("payroll"), Action.SUB, None) is Decision.DENY


def test_a_source_condition_allows_only_from_its_networks():
    alice = user(allow("Topic:orders", "Pub", source_ips=["10.1.0.0/16", "::1/128"]))
    assert decide(alice, topic("orders"), Action.PUB, "10.1.2.3") is Decision.ALLOW
    assert decide(alice, topic("orders"), Action.PUB, "::1") is Decision.ALLOW
    assert decide(alice, topic("orders"), Action.PUB, "10.2.0.1") is Decision.DENY
    assert decide(alice, topic("orders"), Action.PUB, None) is Decision.DENY
    assert decide(alice, topic("orders"), Action.PUB, "not an address") is Decision.DENY


@pytest.mark.parametrize("resource", ["Queue:orders", "Topic:", "Topic:or ders", "orders", "Topic:a*b"])
def test_a_resource_that_is_not_one_is_refused(resource):
    with pytest.raises(ValidationError):
        AclEntry(resource=resource, actions=["Pub"])


def test_the_signature_covers_method_path_query_body_date_and_nonce_and_canonicalizes_encodings():
    nonce = "n" * 24
    request = signing.SignedRequest("GET", "/v1/topics/%DLQ%g|x", "b=2&a=1%7C", signing.body_sha256(b""), 1000, nonce)
    same = signing.SignedRequest("get", "/v1/topics/%DLQ%g|x", "a=1|&b=2", signing.EMPTY_BODY_SHA256, 1000, nonce)
    claimed = signing.signature("secret", request)
    assert signing.matches("secret", same, claimed)
    for changed in (
        request._replace(method="POST"),
        request._replace(path="/v1/topics/other"),
        request._replace(query="a=1%7C&b=3"),
        request._replace(body_sha256=signing.body_sha256(b"{}")),
        request._replace(date_ms=1001),
        request._replace(nonce="m" * 24),
    ):
        assert not signing.matches("secret", changed, claimed)
    assert not signing.matches("other secret", request, claimed)
    header = signing.headers("alice", "secret", request)
    assert signing.parse_authorization(header["authorization"]) == ("alice", claimed)
    assert signing.parse_authorization("Bearer abc") is None
