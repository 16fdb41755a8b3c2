"""SQL92 property filters through the real gateway, both backends, on every surface: the SDK's Consumer (pull),
SimpleConsumer (pop) and push subscription, the CLI (`tidemq consume --sql`, `tidemq receive --sql`), and the HTTP
routes, which refuse an expression that does not parse with a 400 naming its position, and a tag and an
expression together."""

from __future__ import annotations

import json

import pytest

from tests.push_targets import Webhook, wait_for
from tidemq import Admin, Consumer, Producer, SimpleConsumer
from tidemq_protocol.errors import InvalidArgument, InvalidFilterExpression

from .test_cli import ok, tidemq  # noqa: F401 (the fixture)
from .test_push_gateway import call, lag

AMOUNTS = range(60)


@pytest.fixture(scope="module")
def orders(gateway) -> str:
    """Topic `sql-orders` (2 queues) holding 60 orders: amount n, region eu for every n divisible by 3."""
    with Admin(gateway.url) as admin:
        admin.create_topic("sql-orders", queues=2)
    with Producer("sql-orders", url=gateway.url) as producer:
        for n in AMOUNTS:
            region = "eu" if n % 3 == 0 else "us"
            producer.add(f"order {n}", tag="order", properties={"amount": str(n), "region": region})
    return "sql-orders"


EU_OVER_40 = "region = 'eu' AND amount > 40"
EXPECTED = sorted(f"order {n}" for n in AMOUNTS if n % 3 == 0 and n > 40)


def test_a_consumer_with_a_sql_filter_pulls_only_what_it_selects_and_reaches_the_end(gateway, orders):
    with Consumer(orders, "sql-pull", sql=EU_OVER_40, url=gateway.url) as consumer:
        bodies = []
        while batch := consumer.poll():
            bodies += [m.body.decode() for m in batch]
        assert sorted(bodies) == EXPECTED and consumer.drained
        consumer.commit()
    with Admin(gateway.url) as admin:
        assert all(q.lag == 0 for q in admin.describe_group("sql-pull", orders).topics[0].queues)


def test_a_simple_consumer_with_a_sql_filter_receives_only_what_it_selects(gateway, orders):
    with Admin(gateway.url) as admin:
        admin.create_group("sql-pop")
    with SimpleConsumer(orders, "sql-pop", sql=EU_OVER_40, url=gateway.url) as consumer:
        received = []
        while batch := consumer.receive(32):
            received += batch
            consumer.ack_all(batch)
    assert sorted(r.message.body.decode() for r in received) == EXPECTED


def test_a_push_subscription_with_a_sql_filter_delivers_only_what_it_selects(gateway, orders):
    with Webhook() as webhook, Admin(gateway.url) as admin:
        admin.create_group("sql-push")
        subscribed = admin.set_push("sql-push", orders, webhook.url, sql=EU_OVER_40, batch_size=4)
        assert subscribed.push.sql == EU_OVER_40
        wait_for(lambda: lag(gateway.url, "sql-push", orders) == 0, "lag 0")
        assert sorted(m["body"] for m in webhook.messages()) == EXPECTED


def test_the_cli_consumes_and_receives_with_sql(gateway, orders, tidemq):  # noqa: F811
    lines = ok(tidemq("consume", orders, "--sql", EU_OVER_40)).splitlines()
    assert sorted(json.loads(line)["body"] for line in lines) == EXPECTED
    with Admin(gateway.url) as admin:
        admin.create_group("sql-cli-pop")
    received = ok(tidemq("receive", orders, "-g", "sql-cli-pop", "-n", "32", "--sql", EU_OVER_40, "--ack"))
    assert sorted(json.loads(line)["body"] for line in received.splitlines()) == EXPECTED
    refused = tidemq("consume", orders, "--sql", "amount >")
    assert refused.returncode != 0 and "at position 8" in refused.stderr


def test_an_expression_that_does_not_parse_is_a_400_naming_its_position_on_every_route(gateway, orders):
    bad = "region = 'eu' AND AND amount > 1"
    for path in (f"/v1/topics/{orders}/queues/0/messages", f"/v1/topics/{orders}/queues/0/batch"):
        answer = call(gateway.url, "GET", path, params={"sql": bad})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "InvalidFilterExpression" and answer.json()["position"] == 18
    with Admin(gateway.url) as admin:
        admin.create_group("sql-bad")
    receive = call(gateway.url, "POST", f"/v1/groups/sql-bad/topics/{orders}/receive", json={"sql": bad})
    assert (receive.status_code, receive.json()["position"]) == (400, 18)
    push = call(gateway.url, "PUT", "/v1/groups/sql-bad/push", json={"topic": orders, "target": "lambda:f", "sql": bad})
    assert (push.status_code, push.json()["position"]) == (400, 18)
    assert call(gateway.url, "GET", "/v1/groups/sql-bad/push").status_code == 409  # nothing was stored


def test_a_tag_and_an_expression_together_are_refused(gateway, orders):
    both = call(gateway.url, "GET", f"/v1/topics/{orders}/queues/0/messages", params={"sql": "a = 1", "tag": "A"})
    assert both.status_code == 400 and "not both" in both.json()["message"]
    with Admin(gateway.url) as admin:
        admin.create_group("sql-both")
    receive = call(
        gateway.url, "POST", f"/v1/groups/sql-both/topics/{orders}/receive", json={"sql": "a = 1", "tag": "A"}
    )
    assert receive.status_code == 422 and "not both" in receive.text
    with pytest.raises(InvalidArgument, match="not both"):
        Consumer(orders, sql="a = 1", tag="A", url=gateway.url)
    with pytest.raises(InvalidFilterExpression) as refused:
        SimpleConsumer(orders, "sql-both", sql="a = = 1", url=gateway.url)
    assert refused.value.position == 4
