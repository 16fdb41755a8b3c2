"""The web console in a real browser (Debian's chromium, driven by Playwright) against a live local gateway: log in,
create a topic, produce through the API and watch the rate chart move, browse and export messages, resend a dead
letter and follow its message's trace, and a user restricted to one topic who sees and does nothing else.
Screenshots of the main pages are saved under build/screenshots (two of them are docs/img/)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests import push_targets
from tests.console_browser import WAIT_MS, chromium, log_in, new_page, screenshot
from tests.gateways import gateway_as_admin
from tidemq import Admin, Producer
from tidemq.auth import find_credentials
from tidemq_protocol.acl import AclEntry

from .test_retry_gateway import lettered


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("console") / "data"
    with gateway_as_admin(home, TIDEMQ_CONSOLE_SAMPLE_INTERVAL_S="1", **push_targets.ALLOWED) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.fixture
def admin_page(browser, url) -> Iterator[Page]:
    page = new_page(browser)
    credentials = find_credentials()
    log_in(page, url, credentials.access_key, credentials.secret_key)
    yield page
    page.context.close()


def produce(url: str, topic: str, count: int, **options) -> list[str]:
    with Producer(topic, url=url) as producer:
        return [producer.send(json.dumps({"n": n}), **options).msg_id for n in range(count)]


def test_an_operator_creates_a_topic_and_watches_the_rate_chart_move_as_messages_arrive(admin_page, url):
    page, topic = admin_page, unique("orders")
    page.goto(f"{url}/console/topics")
    page.click("summary:has-text('Create a topic')")
    page.fill("#create-topic input[name=name]", topic)
    page.fill("#create-topic input[name=queues]", "2")
    page.click("#create-topic button[type=submit]")
    expect(page.locator("#topic-name")).to_have_text(topic)
    page.goto(f"{url}/console")
    expect(page.locator("#rate-chart .uplot")).to_be_visible()  # drawn by uPlot from the kept series
    produce(url, topic, 40)
    page.wait_for_function(  # the chart's series, fetched again every few seconds, shows the messages arriving
        "() => parseFloat(document.getElementById('produced-peak').textContent) > 0", timeout=WAIT_MS
    )
    screenshot(page, "overview")
    page.emulate_media(color_scheme="dark")  # Pico follows the system's setting: the page drawn dark
    page.reload()
    page.wait_for_function("() => parseFloat(document.getElementById('produced-peak').textContent) > 0")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != "rgb(255, 255, 255)"
    screenshot(page, "overview-dark")
    page.goto(f"{url}/console/topic?name={topic}")
    expect(page.locator("#queues tbody tr")).to_have_count(2)
    assert sum(int(page.locator(f"#queues tbody tr:nth-child({n}) td:nth-child(3)").inner_text()) for n in (1, 2)) == 40
    screenshot(page, "topic")
    produce(url, topic, 10)  # the queues' table refreshes itself (htmx, under the strict CSP): no reload
    page.wait_for_function(
        "() => [...document.querySelectorAll('#queues tbody tr td:nth-child(3)')]"
        ".reduce((sum, cell) => sum + parseInt(cell.textContent), 0) === 50"
    )


def test_a_group_s_lag_shows_when_its_committed_offsets_moved_and_resets_from_the_page(admin_page, url):
    page, topic, group = admin_page, unique("lagged"), unique("readers")
    with Admin(url) as admin:
        admin.create_topic(topic, queues=1)
        produce(url, topic, 5)
        page.goto(f"{url}/console/groups")
        page.click("summary:has-text('Create a group')")
        page.fill("#create-group input[name=name]", group)
        page.click("#create-group button[type=submit]")
        expect(page.locator("#group-name")).to_have_text(group)
        admin.commit_offsets(group, topic, {0: 2})
    page.goto(f"{url}/console/group?name={group}")
    expect(page.locator("#group-lag")).to_have_text("3")
    deadline = time.monotonic() + WAIT_MS / 1000  # the sampler (every second here) notes when the offset moved
    while "Z" not in page.locator("td.moved").first.inner_text():
        assert time.monotonic() < deadline, page.locator("td.moved").first.inner_text()
        page.reload()
    page.locator(".reset select[name=to]").select_option("latest")
    page.click(".reset button[type=submit]")
    expect(page.locator("#group-lag")).to_have_text("0")
    screenshot(page, "group")
    page.click("summary:has-text('Pop and push settings')")  # then push to a target instead of pulling
    page.fill("#set-push input[name=topic]", topic)
    page.fill("#set-push input[name=target]", "python:tests.push_targets:accept")
    page.click("#set-push button[type=submit]")
    expect(page.locator("#push-target")).to_have_text("python:tests.push_targets:accept")
    page.goto(f"{url}/console/group?name={group}")
    expect(page.locator("main")).to_contain_text(f"pushes {topic}")


def test_the_browser_finds_messages_by_offset_key_and_id_and_exports_them(admin_page, url, tmp_path):
    page, topic = admin_page, unique("browse")
    with Admin(url) as admin:
        admin.create_topic(topic, queues=1)
    ids = produce(url, topic, 5, keys=["order-7"], tag="created")
    produce(url, topic, 3, tag="paid")
    page.goto(f"{url}/console/messages?topic={topic}&queue=0&tag=paid&view=json")
    expect(page.locator("#messages tbody tr")).to_have_count(3)
    expect(page.locator("#scan-status")).to_contain_text("Scanned 8 of 8")
    screenshot(page, "messages")
    with page.expect_download() as download:
        page.click("#export-jsonl")
    lines = download.value.path().read_text().splitlines()
    assert [json.loads(line)["tag"] for line in lines] == ["paid"] * 3
    page.goto(f"{url}/console/messages?topic={topic}&key=order-7")
    expect(page.locator("#messages tbody tr")).to_have_count(5)
    with page.expect_download() as download:
        page.click("#export-csv")
    assert download.value.path().read_text().count("order-7") == 5
    page.goto(f"{url}/console/messages?id={ids[2]}&view=hex")
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    page.click(f"text={ids[2]}")
    expect(page.locator("#message-id")).to_have_text(ids[2])
    expect(page.locator("#body")).to_contain_text("7b 22 6e 22")  # {"n" in hex


def test_a_dead_letter_is_resent_to_its_topic_from_the_group_s_dead_letters(admin_page, url):
    page, topic, group = admin_page, unique("billing"), unique("payers")
    lettered(url, group, 2, topic=topic)
    page.goto(f"{url}/console/dead-letters?group={group}")
    expect(page.locator("#dead-letters tbody tr")).to_have_count(2)
    screenshot(page, "dead-letters")
    page.locator("#dead-letters tbody tr:first-child input[type=checkbox]").check()
    page.click("#resend-chosen")
    expect(page.locator("#resent .status")).to_have_text(["resent"])
    page.goto(f"{url}/console/dead-letters?group={group}")
    expect(page.locator("#dead-letters tbody tr:first-child td:nth-child(5)")).not_to_have_text("no")
    with Admin(url) as admin:
        assert sum(q.max_offset for q in admin.describe_topic(topic).queue_offsets) == 3  # two sent, one resent
    page.click("summary:has-text('Resend a range')")  # the whole range: the one resent before is not sent again
    page.fill("#resend-range input[name=from_offset]", "0")
    page.click("#resend-range button[type=submit]")
    expect(page.locator("#resent .status")).to_have_text(["already_resent", "resent"])
    with Admin(url) as admin:
        assert sum(q.max_offset for q in admin.describe_topic(topic).queue_offsets) == 4
    page.goto(f"{url}/console/dead-letters?group={group}")
    page.locator("#dead-letters tbody tr:first-child a.origin-trace").click()  # the message's life, as a timeline
    life = ["stored", "delivered", "nacked", "dead_lettered", "resent"]
    expect(page.locator("#timeline li.event .kind")).to_have_text(life)
    expect(page.locator("#timeline")).to_contain_text(group)
    screenshot(page, "trace")


def test_a_user_restricted_to_one_topic_sees_and_does_nothing_else(browser, admin_page, url):
    page, mine, other = admin_page, unique("mine"), unique("other")
    with Admin(url) as admin:
        admin.create_topic(mine, queues=1)
        admin.create_topic(other, queues=1)
    produce(url, mine, 2)
    user = unique("reader")
    page.goto(f"{url}/console/users")
    page.click("summary:has-text('Create a user')")
    page.fill("#create-user input[name=name]", user)
    page.click("#create-user button[type=submit]")
    secret = page.locator("#secret-key").inner_text()
    page.click(f"text={user}")
    page.fill("#grant input[name=resource]", f"Topic:{mine}")
    for action in ("Get", "List"):
        page.check(f"#grant input[value={action}]")
    page.click("#grant button[type=submit]")
    expect(page.locator("#policies tbody tr")).to_have_count(1)
    screenshot(page, "user")

    reader = new_page(browser)
    log_in(reader, url, user, secret)
    reader.goto(f"{url}/console/topics")
    expect(reader.locator("#topics tbody tr")).to_have_count(1)
    expect(reader.locator("#topics tbody")).to_contain_text(mine)
    for path in (f"/topic?name={other}", f"/messages?topic={other}", "/users", "/overview/series.json"):
        answer = reader.goto(f"{url}/console{path}")
        assert answer.status == 403, path
    answer = reader.goto(f"{url}/console/messages/export?topic={mine}&format=jsonl")
    assert answer.status == 403  # Get, but no Export
    reader.goto(f"{url}/console/messages?topic={mine}")
    expect(reader.locator("#messages tbody tr")).to_have_count(2)
    reader.goto(f"{url}/console/topic?name={mine}")
    reader.click("summary:has-text('Delete this topic')")
    reader.fill("#delete-topic input[name=confirm]", mine)
    reader.click("#delete-topic button[type=submit]")
    expect(reader.locator("#error-message")).to_contain_text("may not Delete")
    with Admin(url) as admin:
        assert admin.describe_topic(mine).queue_offsets[0].max_offset == 2  # still there
    reader.click("#logout")
    reader.goto(f"{url}/console/topics")
    expect(reader.locator("input[name=access_key]")).to_be_visible()  # logged out: back to the login
    reader.context.close()


def test_granting_export_lets_the_restricted_user_export(browser, url):
    topic, user = unique("exported"), unique("exporter")
    with Admin(url) as admin:
        admin.create_topic(topic, queues=1)
        created = admin.create_user(user, policies=[AclEntry(resource=f"Topic:{topic}", actions=["Get", "Export"])])
    produce(url, topic, 2)
    page = new_page(browser)
    log_in(page, url, user, created.secret_key)
    page.goto(f"{url}/console/messages?topic={topic}")
    with page.expect_download() as download:
        page.click("#export-jsonl")
    assert len(download.value.path().read_text().splitlines()) == 2
    page.context.close()
