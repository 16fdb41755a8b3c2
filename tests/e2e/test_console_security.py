"""A security probe of the web console through a live gateway, with a plain HTTP client: no session, a tampered or
replayed cookie, a missing or foreign CSRF token, a cross-site form, a user restricted to one topic, bad input. Each
case is refused with a 4xx and changes nothing (the store is checked through the API after each)."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterator

import httpx
import pytest

from functions.console.session import COOKIE
from tests.gateways import gateway_as_admin
from tidemq import Admin, Producer
from tidemq.auth import find_credentials
from tidemq_protocol.acl import AclEntry


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    with gateway_as_admin(tmp_path_factory.mktemp("console-probe") / "data") as url:
        yield url


@pytest.fixture(scope="module")
def admin(url) -> Iterator[Admin]:
    with Admin(url) as admin:
        yield admin


def logged_in(url: str, access_key: str, secret_key: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30)
    answer = client.post("/console/login", data={"access_key": access_key, "secret_key": secret_key})
    assert answer.status_code == 303 and COOKIE in client.cookies, answer.text
    return client


def as_admin(url: str) -> httpx.Client:
    credentials = find_credentials()
    return logged_in(url, credentials.access_key, credentials.secret_key)


def csrf_of(client: httpx.Client) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', client.get("/console/topics").text).group(1)


def topic_names(admin: Admin) -> set[str]:
    return {t.name for t in admin.list_topics(limit=1000).topics}


def test_without_a_session_a_page_goes_to_the_login_and_a_change_is_refused(url, admin):
    name = unique("nosession")
    with httpx.Client(base_url=url, timeout=30) as anonymous:
        for path in ("/console", "/console/topics", "/console/users", "/console/messages/export?topic=x"):
            answer = anonymous.get(path)
            assert answer.status_code == 303 and answer.headers["location"].startswith("/console/login"), path
        answer = anonymous.post("/console/topics", data={"name": name, "csrf": "x"})
        assert answer.status_code == 401 and "log in first" in answer.text
    assert name not in topic_names(admin)


def test_a_wrong_secret_is_refused_without_saying_which_part_was_wrong(url):
    with httpx.Client(base_url=url, timeout=30) as client:
        for access_key in ("admin", "nobody-here", "not a name!", "x" * 5000):
            answer = client.post("/console/login", data={"access_key": access_key, "secret_key": "wrong"})
            assert answer.status_code == 401 and "the access key or the secret key is wrong" in answer.text
            assert COOKIE not in client.cookies


def test_a_cookie_tampered_to_name_another_user_is_no_session(url, admin):
    user = unique("tamper")
    created = admin.create_user(user, policies=[AclEntry(resource="Topic:nothing", actions=["Get"])])
    client = logged_in(url, user, created.secret_key)
    payload, _, signature = client.cookies[COOKIE].partition(".")
    claimed = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**claimed, "user": "admin"}).encode()).decode().rstrip("=")
    client.cookies.set(COOKIE, f"{forged}.{signature}")
    answer = client.get("/console/users")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/console/login")


def test_a_cookie_copied_before_logout_is_refused_after_it(url, admin):
    client = as_admin(url)
    copied, csrf = client.cookies[COOKIE], csrf_of(client)
    assert client.post("/console/logout", data={"csrf": csrf}).status_code == 303
    with httpx.Client(base_url=url, timeout=30, cookies={COOKIE: copied}) as replaying:
        assert replaying.get("/console/topics").status_code == 303
        name = unique("replayed")
        answer = replaying.post("/console/topics", data={"name": name, "csrf": csrf})
        assert answer.status_code == 401
    assert name not in topic_names(admin)


def test_a_change_without_the_csrf_token_is_403_and_changes_nothing(url, admin):
    client, name = as_admin(url), unique("nocsrf")
    assert client.post("/console/topics", data={"name": name}).status_code == 403
    assert client.post("/console/topics", data={"name": name, "csrf": "forged"}).status_code == 403
    assert name not in topic_names(admin)


def test_a_change_with_another_session_s_csrf_token_is_403(url, admin):
    mine, theirs, name = as_admin(url), as_admin(url), unique("foreign")
    answer = mine.post("/console/topics", data={"name": name, "csrf": csrf_of(theirs)})
    assert answer.status_code == 403 and "CSRF" in answer.text
    assert name not in topic_names(admin)


def test_a_form_posted_from_another_site_is_refused(url, admin):
    client, name = as_admin(url), unique("crosssite")
    answer = client.post(
        "/console/topics", data={"name": name, "csrf": csrf_of(client)}, headers={"origin": "https://evil.example"}
    )
    assert answer.status_code == 403
    assert name not in topic_names(admin)


def test_a_user_restricted_to_one_topic_sees_and_does_nothing_else(url, admin):
    mine, other, group = unique("mine"), unique("other"), unique("group")
    for topic in (mine, other):
        admin.create_topic(topic, queues=1)
        with Producer(topic, url=url) as producer:
            producer.send("secret of " + topic, keys=["k"])
    admin.create_group(group)
    user = unique("restricted")
    policies = [AclEntry(resource=f"Topic:{mine}", actions=["Get", "List", "Pub"])]
    client = logged_in(url, user, admin.create_user(user, policies=policies).secret_key)
    listed = client.get("/console/topics").text
    assert mine in listed and other not in listed
    assert group not in client.get("/console/groups").text
    assert "secret of " + mine in client.get(f"/console/messages?topic={mine}").text  # its own topic: browsable
    (other_message,) = admin.messages_by_key(other, "k")
    refused = [
        f"/console/message?id={other_message.msg_id}",
        f"/console/messages?id={other_message.msg_id}",
        f"/console/trace?id={other_message.msg_id}",
        f"/console/topic?name={other}",
        f"/console/messages?topic={other}",
        f"/console/messages?topic={other}&key=k",
        f"/console/messages/export?topic={other}&format=csv",
        f"/console/messages/export?topic={mine}&format=csv",  # no Export on its own topic either
        f"/console/group?name={group}",
        f"/console/dead-letters?group={group}",
        "/console/users",
        "/console/health",
        "/console/overview/series.json",
    ]
    for path in refused:
        answer = client.get(path)
        assert answer.status_code == 403 and "secret of" not in answer.text, path
    csrf = csrf_of(client)
    changes = [
        ("/console/topics", {"name": unique("new")}),
        ("/console/topic/change", {"name": other, "retention_hours": "1"}),
        ("/console/topic/delete", {"name": other, "confirm": other}),
        ("/console/topic/delete", {"name": mine, "confirm": mine}),
        ("/console/groups", {"name": unique("new")}),
        ("/console/group/reset", {"name": group, "topic": other, "to": "latest"}),
        ("/console/group/push", {"name": group, "topic": other, "target": "lambda:f"}),
        ("/console/users", {"name": unique("new")}),
        ("/console/user/grant", {"name": user, "resource": "*", "actions": "All"}),
        ("/console/dead-letters/resend", {"group": group, "from_offset": "0"}),
    ]
    for path, form in changes:
        answer = client.post(path, data={**form, "csrf": csrf})
        assert answer.status_code == 403, f"{path}: {answer.status_code} {answer.text[-300:]}"
    assert {mine, other} <= topic_names(admin)
    assert admin.describe_topic(other).retention_ms != 3_600_000
    assert [p.resource for p in admin.describe_user(user).policies] == [f"Topic:{mine}"]


@pytest.mark.parametrize(
    ("path", "form", "status", "says"),
    [
        ("/console/topics", {"name": "bad name!"}, 422, "name"),
        ("/console/topics", {"name": "ok-name", "queues": "many"}, 400, "queues must be a whole number"),
        ("/console/topics", {"name": "ok-name", "message_type": "LOUD"}, 422, "message_type"),
        ("/console/topics", {"name": "ok-name", "attributes": "no equals sign"}, 400, "name=value"),
        ("/console/topic/change", {"name": "no-such-topic", "retention_hours": "1"}, 404, "no-such-topic"),
        ("/console/topic/delete", {"name": "no-such-topic", "confirm": "other"}, 400, "to confirm"),
        ("/console/group/reset", {"name": "no-group", "topic": "t", "to": "sometime"}, 422, "to"),
        ("/console/group/reset", {"name": "no-group", "topic": "t", "to": "timestamp", "time": "noon"}, 400, "ISO"),
        ("/console/dead-letters/resend", {"group": "g"}, 400, "choose dead letters"),
        ("/console/user/grant", {"name": "admin", "resource": "Queue:x", "actions": "Get"}, 422, "resource"),
        ("/console/users", {"name": "x"}, 422, "name"),
        ("/console/group/push", {"name": "g", "topic": "t", "target": "gopher://x"}, 422, "target"),
        ("/console/group/push", {"name": "pushing", "topic": "pushing", "target": "python:os:system"}, 400, "python"),
    ],
)
def test_bad_form_input_is_a_clear_4xx_that_changes_nothing(url, admin, path, form, status, says):
    if form.get("name") == "pushing" and "pushing" not in {g.name for g in admin.list_groups(limit=1000).groups}:
        admin.create_group("pushing")  # a group and a topic that exist, so that the target is what is refused
        admin.create_topic("pushing", queues=1)
    client = as_admin(url)
    before = topic_names(admin)
    answer = client.post(path, data={**form, "csrf": csrf_of(client)})
    assert answer.status_code == status, answer.text[-400:]
    assert says in answer.text
    assert topic_names(admin) == before


@pytest.mark.parametrize(
    "path",
    [
        "/console/messages?topic=no-such-topic",
        "/console/messages?topic=x&queue=-1",
        "/console/messages?topic=one-queue&queue=5",
        "/console/messages?topic=one-queue&queue=0&time=2026-13-45",
        "/console/messages?topic=x&offset=9999999999999999999999",
        "/console/messages?topic=x&sql=((",
        "/console/messages?id=not-an-id",
        "/console/messages?topic=x&view=pdf",
        "/console/topics?prefix=bad prefix!",
        "/console/topic?name=",
        "/console/group?name=no-such-group",
        "/console/messages/export?topic=x&format=xml",
        "/console/no-such-page",
        "/console/trace?id=not-an-id",
        "/console/trace?id=" + "0" * 24,
    ],
)
def test_bad_page_queries_are_a_clear_4xx_never_a_5xx(url, admin, path):
    if "one-queue" in path and "one-queue" not in topic_names(admin):
        admin.create_topic("one-queue", queues=1)
    answer = as_admin(url).get(path)
    assert 400 <= answer.status_code < 500, f"{path}: {answer.status_code} {answer.text[-400:]}"
    assert 'id="error-message"' in answer.text


def test_every_answer_forbids_inline_script_and_framing_and_the_session_cookie_is_httponly_and_strict(url):
    with httpx.Client(base_url=url, timeout=30) as client:
        for answer in (client.get("/console/login"), client.get("/console/static/htmx.min.js")):
            policy = answer.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "unsafe" not in policy and "frame-ancestors 'none'" in policy
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert client.get("/console/static/uPlot.min.css").headers["content-type"].startswith("text/css")
        assert "<script>" not in client.get("/console/login").text  # every script is a file of the console's
    credentials = find_credentials()
    with httpx.Client(base_url=url, timeout=30) as client:
        login = {"access_key": credentials.access_key, "secret_key": credentials.secret_key}
        cookie = client.post("/console/login", data=login).headers["set-cookie"]
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {part.strip() for part in cookie.split(";")}
        assert "Max-Age=28800" in cookie  # expires; Secure is added over https (API Gateway)
