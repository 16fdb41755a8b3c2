"""The web console served by a BrokerContainer: logged in at the container's `/console` (its users), the container
page lists its brokers with their roles and quotas, and each broker's own pages are under
`/brokers/<name>/console`, about that broker's store (push, which a container does not run, refused there too)."""

from __future__ import annotations

import re

import httpx

from tests.containers import container_running


def test_the_container_s_console_lists_its_brokers_and_serves_each_broker_s_pages(tmp_path):
    root = tmp_path / "container"
    with container_running(root, {"broker-a.conf": "brokerName=a\n"}) as running:
        running.broker("a").create_topic("orders", queues=2)
        credentials = running.credentials
        with httpx.Client(base_url=running.url, timeout=30) as browser:
            login = {"access_key": credentials.access_key, "secret_key": credentials.secret_key}
            assert browser.post("/console/login", data=login).status_code == 303
            page = browser.get("/console/container")
            assert page.status_code == 200 and "ASYNC_MASTER" in page.text
            assert 'href="/brokers/a/console/topics"' in page.text
            topics = browser.get("/brokers/a/console/topics")
            assert topics.status_code == 200 and "orders" in topics.text
            assert 'href="/brokers/a/console/topic?name=orders"' in topics.text  # links stay under the broker
            assert "orders" not in browser.get("/console/topics").text  # the container's own store has no topics
            csrf = re.search(r'name="csrf" value="([^"]+)"', topics.text).group(1)
            push = {"csrf": csrf, "name": "g", "topic": "orders", "target": "lambda:f"}
            refused = browser.post("/brokers/a/console/group/push", data=push)
            assert refused.status_code == 404 and "push delivery is not run in a BrokerContainer" in refused.text
