"""Authentication and ACL 2.0 authorization through a real gateway, on both backends: who may do what."""

from __future__ import annotations

import re
import subprocess
import uuid

import httpx
import pytest

from functions.routes import routes
from servers.stream import stream_routes
from tests.gateways import each_dispatch  # noqa: F401 (a fixture: this suite runs under both dispatches)
from tidemq import KV, Admin, Consumer, CustomizedBackoff, HttpClient, Producer, RetryPolicy, SimpleConsumer
from tidemq.credentials import Credentials, write_profile
from tidemq_protocol import signing
from tidemq_protocol.acl import AclEntry, Decision
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import AccessDenied, Unauthenticated

from .test_cli import command, environment

PUBLIC = {"GET /health", "GET /openapi.json"}
SAMPLE_PATH = {
    "topic": "t",
    "queue": "0",
    "group": "g",
    "msg_id": "0" * 24,
    "user": "someone",
    "namespace": "n",
    "proxy": "topics",
}
CONSOLE = {"GET /console", "GET /console/{proxy+}", "POST /console/{proxy+}"}
"""The web console's routes: a console session (its login), not a signature, is what they take
(tests/e2e/test_console_security.py probes them)."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def as_user(url: str, credentials: Credentials) -> HttpClient:
    return HttpClient(url, credentials=credentials, retries=0)


@pytest.fixture(scope="module")
def admin(gateway):
    with Admin(gateway.url) as admin:
        yield admin


def new_user(admin: Admin, url: str, *entries: AclEntry) -> HttpClient:
    created = admin.create_user(unique("user"), policies=list(entries))
    return as_user(url, Credentials(created.name, created.secret_key))


def request_for(route) -> tuple[str, str]:
    return route.method, re.sub(r"\{(\w+)\+?\}", lambda m: SAMPLE_PATH[m.group(1)], route.path)


def assert_console_refuses(route, response: httpx.Response) -> None:
    """Without a console session a page sends the browser to log in and a change is refused (a signature is no
    session)."""
    if route.method == "GET":
        assert response.status_code == 303 and "/console/login" in response.headers["location"], route.route_key
    else:
        assert response.status_code == 401 and "log in first" in response.text, route.route_key


def test_every_route_but_health_and_the_document_needs_credentials(gateway):
    with httpx.Client(base_url=gateway.url, timeout=30) as anonymous:
        for route in (*routes(), *stream_routes()):  # the stream: the servers' own
            method, path = request_for(route)
            response = anonymous.request(method, path, json={} if method in ("POST", "PUT", "PATCH") else None)
            if route.route_key in CONSOLE:
                assert_console_refuses(route, response)
            elif route.route_key in PUBLIC:
                assert response.status_code == 200, route.route_key
            else:
                assert response.status_code == 401, f"{route.route_key}: {response.status_code} {response.text}"
                assert response.json()["error"] == "Unauthenticated" and "not signed" in response.json()["message"]


def test_a_user_with_no_policy_is_refused_every_route_but_who_it_is(gateway, admin):
    topic, group = unique("guarded"), unique("guarded")
    admin.create_topic(topic, queues=1)
    admin.create_group(group)
    with Producer(topic, url=gateway.url) as producer:
        msg_id = producer.send("guarded").msg_id
    namespace = unique("guarded")
    admin_kv = KV(gateway.url)
    admin_kv.create_namespace(namespace)
    admin_kv.put(namespace, "k", b"v")
    names = {
        "topic": topic,
        "group": group,
        "queue": "0",
        "msg_id": msg_id,
        "user": "admin",
        "namespace": namespace,
        "proxy": "topics",
    }
    bodies = {  # a valid request for each route that takes a body: only the policy can refuse it
        "POST /v1/topics": {"name": unique("new")},
        "PATCH /v1/topics/{topic}": {"retention_ms": 60_000},
        "POST /v1/topics/{topic}/messages": {"messages": [{"body": "x"}]},
        "POST /v1/topics/{topic}/recall": {"recall_handle": "djE"},
        "POST /v1/groups": {"name": unique("new")},
        "POST /v1/groups/{group}/offsets": {"topic": topic, "offsets": {"0": 0}},
        "POST /v1/groups/{group}/reset": {"topic": topic, "to": "earliest"},
        "PUT /v1/groups/{group}/push": {"topic": topic, "target": "lambda:consumer"},
        "POST /v1/users": {"name": unique("new")},
        "POST /v1/users/{user}/acl": {"resource": "*", "actions": ["All"]},
        "POST /v1/users/{user}/acl/revoke": {"resource": "*"},
        "POST /v1/kv": {"name": unique("new")},
        "PUT /v1/kv/{namespace}/entry": {"value": ""},
        "POST /v1/kv/{namespace}/batch-get": {"keys": ["k"]},
        "POST /v1/kv/{namespace}/import": {"entries": [], "append": True},
        "POST /v1/groups/{group}/topics/{topic}/receive": {},
        "POST /v1/groups/{group}/topics/{topic}/receive/batch": {"ack": ["A" * 28]},
        "POST /v1/groups/{group}/topics/{topic}/ack": {"receipt_handles": ["A" * 28]},
        "POST /v1/groups/{group}/topics/{topic}/change-invisible": {"receipt_handle": "A" * 28, "invisible_ms": 10_000},
        "POST /v1/groups/{group}/topics/{topic}/release": {"receipt_handle": "A" * 28},
        "PATCH /v1/groups/{group}": {"retry": {"max_delivery_attempts": 3}},
        "POST /v1/groups/{group}/dead-letters/resend": {"from_offset": 0},
        "POST /v1/topics/{topic}/transactions": {"producer_group": "g", "body": "x"},
        "POST /v1/topics/{topic}/transactions/{msg_id}": {"resolution": "commit"},
        "POST /console/{proxy+}": {"name": unique("new")},  # a topic's creation, without a console session
    }
    params = {
        "GET /v1/topics/{topic}/messages": {"key": "k"},
        "GET /v1/topics/{topic}/queues/{queue}/offset": {"timestamp": 0},
        "GET /v1/kv/{namespace}/entry": {"key": "k"},
        "PUT /v1/kv/{namespace}/entry": {"key": "k"},
        "DELETE /v1/kv/{namespace}/entry": {"key": "k"},
        "GET /v1/kv/{namespace}/changes": {"from_revision": 1},
    }
    nobody = new_user(admin, gateway.url)
    for route in (*routes(), *stream_routes()):  # the stream: the servers' own
        if route.route_key in PUBLIC:
            continue
        path = re.sub(r"\{(\w+)\+?\}", lambda m: names[m.group(1)], route.path)
        body = bodies.get(route.route_key)
        if route.route_key == "POST /v1/topics/{topic}/batch":
            response = nobody.send("POST", path, content=b"", headers={"content-type": "application/vnd.tidemq.batch"})
        else:
            response = nobody.send(route.method, path, json=body, params=params.get(route.route_key))
        if route.route_key in CONSOLE:
            assert_console_refuses(route, response)
        elif route.route_key == "GET /v1/whoami":
            assert response.status_code == 200
        elif route.route_key in ("GET /v1/topics", "GET /v1/groups", "GET /v1/kv"):
            assert response.status_code == 200 and not any(response.json().values()), response.text  # sees nothing
        else:
            assert response.status_code == 403, f"{route.route_key}: {response.status_code} {response.text}"
            assert response.json()["error"] == "AccessDenied"
    assert admin.describe_topic(topic).queue_offsets[0].max_offset == 1  # nothing stored, nothing changed
    assert admin.push(group) is None
    assert admin_kv.get(namespace, "k").version == 1 and admin_kv.describe_namespace(namespace).revision == 1


def signed_get(url: str, path: str, credentials: Credentials, date_ms: int | None = None) -> dict[str, str]:
    date_ms, nonce = date_ms or now_ms(), signing.new_nonce()
    request = signing.SignedRequest("GET", path, "", signing.EMPTY_BODY_SHA256, date_ms, nonce)
    return signing.headers(credentials.access_key, credentials.secret_key, request)


def test_dead_letters_are_listed_with_sub_on_the_group_and_its_dead_letters_and_resent_with_pub_on_their_origin(
    gateway, admin
):
    topic, group = unique("origin"), unique("lettered")
    admin.create_topic(topic, queues=1)
    admin.create_group(group, retry=RetryPolicy(max_delivery_attempts=1, backoff=CustomizedBackoff(delays_ms=(0,))))
    with Producer(topic, url=gateway.url) as producer:
        producer.send("poison")
    with SimpleConsumer(topic, group, url=gateway.url) as consumer:
        consumer.nack(*consumer.receive())  # its one delivery failed: the next receive dead-letters it
        assert consumer.receive() == []
    (letter,) = admin.dead_letters(group).messages
    created = admin.create_user(unique("operator"), policies=[AclEntry(resource=f"Group:{group}", actions=["Sub"])])
    credentials = Credentials(created.name, created.secret_key)
    with Admin(client=as_user(gateway.url, credentials)) as operator:
        with pytest.raises(AccessDenied, match=f"Sub on Topic:%DLQ%{group}"):
            operator.dead_letters(group)
        with pytest.raises(AccessDenied, match=f"Pub on Topic:{topic}"):
            operator.resend_dead_letters(group, message_ids=[letter.msg_id])
    admin.grant(created.name, AclEntry(resource=f"Topic:%DLQ%{group}", actions=["Sub"]))
    admin.grant(created.name, AclEntry(resource=f"Topic:{topic}", actions=["Pub"]))
    with Admin(client=as_user(gateway.url, credentials)) as operator:
        assert [m.msg_id for m in operator.dead_letters(group).messages] == [letter.msg_id]
        (result,) = operator.resend_dead_letters(group, message_ids=[letter.msg_id]).results
    assert result.status == "resent"  # the refused one sent nothing


def test_a_bad_signature_an_old_date_and_a_replay_are_refused(gateway, admin):
    secret = admin.create_user(unique("signer")).model_dump()
    me = Credentials(secret["name"], secret["secret_key"])
    with httpx.Client(base_url=gateway.url, timeout=30) as raw:
        good = signed_get(gateway.url, "/v1/whoami", me)
        assert raw.get("/v1/whoami", headers=good).status_code == 200
        replayed = raw.get("/v1/whoami", headers=good)
        assert (replayed.status_code, "replay" in replayed.json()["message"]) == (401, True)
        wrong = signed_get(gateway.url, "/v1/whoami", me._replace(secret_key="not the secret"))
        refused = raw.get("/v1/whoami", headers=wrong)
        assert refused.status_code == 401 and "does not match" in refused.json()["message"]
        assert "not the secret" not in refused.text and me.secret_key not in refused.text
        old = signed_get(gateway.url, "/v1/whoami", me, date_ms=now_ms() - 600_000)
        stale = raw.get("/v1/whoami", headers=old)
        assert stale.status_code == 401 and "from the server's clock" in stale.json()["message"]
        other_path = raw.get("/v1/topics", headers=signed_get(gateway.url, "/v1/whoami", me))  # signed for another
        assert other_path.status_code == 401
        unknown = signed_get(gateway.url, "/v1/whoami", Credentials("no-such-user", "x"))
        assert raw.get("/v1/whoami", headers=unknown).status_code == 401


def test_a_user_without_pub_cannot_produce_and_nothing_is_stored(gateway, admin):
    name = unique("orders")
    admin.create_topic(name, queues=1)
    reader = new_user(admin, gateway.url, AclEntry(resource=f"Topic:{name}", actions=["Sub"]))
    with pytest.raises(AccessDenied, match=f"may not Pub on Topic:{name}"), Producer(name, client=reader) as producer:
        producer.send("not allowed")
    assert admin.describe_topic(name).queue_offsets[0].max_offset == 0
    with Consumer(name, client=reader) as consumer:  # Sub alone is enough to read (the queues too)
        assert consumer.poll() == []


def test_deny_wins_over_allow_and_prefix_and_any_resources_apply(gateway, admin):
    open_topic, secret_topic = unique("open"), unique("secret")
    for name in (open_topic, secret_topic):
        admin.create_topic(name, queues=1)
    writer = new_user(
        admin,
        gateway.url,
        AclEntry(resource="Topic:*", actions=["Pub", "Get"]),
        AclEntry(resource="Topic:secret-*", actions=["Pub"], decision=Decision.DENY),
    )
    with Producer(open_topic, client=writer) as producer:
        producer.send("fine")
    with pytest.raises(AccessDenied), Producer(secret_topic, client=writer) as producer:
        producer.send("refused")
    assert [q.max_offset for q in admin.describe_topic(secret_topic).queue_offsets] == [0]


def test_a_source_condition_admits_only_its_networks(gateway, admin):
    name = unique("sourced")
    admin.create_topic(name, queues=1)
    elsewhere = new_user(
        admin, gateway.url, AclEntry(resource=f"Topic:{name}", actions=["Pub"], source_ips=["10.0.0.0/8"])
    )
    local = new_user(
        admin, gateway.url, AclEntry(resource=f"Topic:{name}", actions=["Pub"], source_ips=["127.0.0.0/8"])
    )
    with pytest.raises(AccessDenied), Producer(name, client=elsewhere) as producer:
        producer.send("from the wrong network")
    with Producer(name, client=local) as producer:
        producer.send("from loopback")


def test_a_message_by_id_and_its_trace_are_checked_against_its_topic(gateway, admin):
    mine, theirs = unique("mine"), unique("theirs")
    for name in (mine, theirs):
        admin.create_topic(name, queues=1)
    with Producer(mine, url=gateway.url) as producer:
        my_id = producer.send("mine").msg_id
    with Producer(theirs, url=gateway.url) as producer:
        their_id = producer.send("theirs").msg_id
    reader = Admin(client=new_user(admin, gateway.url, AclEntry(resource=f"Topic:{mine}", actions=["Get"])))
    assert reader.message(my_id).body == "mine"
    assert reader.message_trace(my_id).events[0].event == "stored"
    with pytest.raises(AccessDenied, match=f"Topic:{theirs}"):
        reader.message(their_id)
    with pytest.raises(AccessDenied, match=f"Topic:{theirs}"):
        reader.message_trace(their_id)


def test_listings_show_only_what_the_caller_may_see(gateway, admin):
    team = unique("team")
    for name in (f"{team}-a", f"{team}-b", unique("other")):
        admin.create_topic(name, queues=1)
        admin.create_group(name)
    policies = [
        AclEntry(resource=f"Topic:{team}-*", actions=["List"]),
        AclEntry(resource=f"Group:{team}-a", actions=["Get"]),
    ]
    member = Admin(client=new_user(admin, gateway.url, *policies))
    assert [t.name for t in member.iter_topics()] == [f"{team}-a", f"{team}-b"]
    assert [g.name for g in member.iter_groups()] == [f"{team}-a"]


def test_a_super_user_manages_users_and_policies_and_a_normal_user_cannot_grant_itself_more(gateway, admin):
    name = unique("topic")
    admin.create_topic(name, queues=1)
    created = admin.create_user(unique("bob"))
    bob = Credentials(created.name, created.secret_key)
    bobs_admin = Admin(client=as_user(gateway.url, bob))
    assert bobs_admin.whoami().name == bob.access_key
    assert bobs_admin.describe_user(bob.access_key).policies == []  # its own record, never a secret
    with pytest.raises(AccessDenied, match="not a super user"):
        bobs_admin.grant(bob.access_key, AclEntry(resource="*", actions=["All"]))
    with pytest.raises(AccessDenied):
        bobs_admin.create_user(unique("mallory"), super_user=True)
    with pytest.raises(AccessDenied):
        bobs_admin.list_users()

    admin.grant(bob.access_key, AclEntry(resource=f"Topic:{name}", actions=["Pub"]))
    with Producer(name, client=as_user(gateway.url, bob)) as producer:
        producer.send("now allowed")
    admin.revoke(bob.access_key, f"Topic:{name}")
    with pytest.raises(AccessDenied), Producer(name, client=as_user(gateway.url, bob)) as producer:
        producer.send("revoked")

    rotated = admin.rotate_secret(bob.access_key)
    with pytest.raises(Unauthenticated):
        bobs_admin.whoami()
    assert (
        Admin(client=as_user(gateway.url, bob._replace(secret_key=rotated.secret_key))).whoami().name == bob.access_key
    )
    assert bob.access_key in [u.name for u in admin.list_users(limit=1000).users]
    assert "secret" not in admin.describe_user(bob.access_key).model_dump_json()
    admin.delete_user(bob.access_key)
    with pytest.raises(Unauthenticated):
        Admin(client=as_user(gateway.url, bob)).whoami()


def test_the_cli_manages_users_and_signs_as_a_profile(gateway, tmp_path):
    def tidemq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        run_env = {**environment(), **(env or {})}
        return subprocess.run(command(gateway.url, *args), capture_output=True, text=True, timeout=60, env=run_env)

    name, topic = unique("carol"), unique("cli-acl")
    created = tidemq("user", "create", name)
    assert created.returncode == 0, created.stderr
    secret = re.search(r"secret_key = (\S+)", created.stdout).group(1)
    assert tidemq("topic", "create", topic, "--queues", "1").returncode == 0
    granted = tidemq("acl", "grant", name, "--resource", f"Topic:{topic}", "--actions", "Pub,Get")
    assert granted.returncode == 0 and f"Topic:{topic}" in granted.stdout, granted.stderr
    assert f"Topic:{topic}" in tidemq("acl", "list", name).stdout
    profiles = tmp_path / "credentials"
    write_profile(profiles, Credentials(name, secret), profile="carol")
    as_carol = {"TIDEMQ_CREDENTIALS_FILE": str(profiles)}
    assert tidemq("--profile", "carol", "user", "whoami", env=as_carol).stdout.startswith(f"{name} (Normal)")
    produced = tidemq("--profile", "carol", "produce", topic, env=as_carol | {"TIDEMQ_PROFILE": ""})
    assert produced.returncode == 0, produced.stderr
    refused = tidemq("--profile", "carol", "user", "list", env=as_carol)
    assert (
        refused.returncode == 1 and refused.stderr.startswith("tidemq: user") and "not a super user" in refused.stderr
    )
    missing = tidemq("--profile", "nobody", "topic", "list", env=as_carol)
    assert missing.returncode == 2 and "no profile [nobody]" in missing.stderr
    assert tidemq("user", "delete", name, "--yes").returncode == 0
