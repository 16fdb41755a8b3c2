"""Transactional messages through a real gateway process, on both backends (serverless: DynamoDB on a moto server
over HTTP): the SDK's TransactionProducer (its checker answering check-backs it long-polls for), raw HTTP and the
CLI. Whatever ends a transaction, no reader (pull, pop, push to a webhook) ever sees a half message before its
commit, sees a committed one once, with the half message's id, and never sees a rolled-back one; a check-back is
never asked before the transaction timeout has passed since the server stamped the half message (`prepared_ms`);
answered unknown (or not at all) it is asked again, up to the limit, then the transaction is rolled back, as the
operator's listing shows. The check-back timer is the gateway's own (every min(timeout, interval)); the times here
are short so that the tests wait little."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from tests import push_targets
from tests.gateways import gateway_as_admin, signed_http
from tests.push_targets import Webhook, wait_for
from tidemq import Admin, Consumer, Resolution, SimpleConsumer, TransactionProducer
from tidemq.client import HttpClient
from tidemq.credentials import Credentials
from tidemq_protocol.acl import AclEntry
from tidemq_protocol.api.transactions import TransactionCheck, TransactionView
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import AccessDenied, MessageTypeMismatch, TransactionConflict

from .test_cli import command, environment

TIMEOUT_MS, INTERVAL_MS, CHECK_MAX = 1_000, 1_000, 3
PRODUCERS, SENDS_EACH = 8, 8
SETTINGS = {
    "TIDEMQ_TRANSACTION_TIMEOUT_MS": str(TIMEOUT_MS),
    "TIDEMQ_TRANSACTION_CHECK_INTERVAL_MS": str(INTERVAL_MS),
    "TIDEMQ_TRANSACTION_CHECK_MAX": str(CHECK_MAX),
}


@dataclass
class Gateway:
    url: str
    backend: str


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def gateway(request, tmp_path_factory) -> Iterator[Gateway]:
    home = tmp_path_factory.mktemp(f"tx-{request.param}") / "data"
    with gateway_as_admin(home, TIDEMQ_BACKEND=request.param, **push_targets.ALLOWED, **SETTINGS) as url:
        yield Gateway(url, request.param)


@dataclass
class Readers:
    """A TRANSACTION topic's three readers: pull (every queue from its start), pop (a group that acks what it
    receives) and push (a group pushing to a webhook); what each has seen, by message id."""

    url: str
    topic: str
    webhook: Webhook
    pulled: list[str] = field(default_factory=list)
    popped: list[str] = field(default_factory=list)

    def read(self) -> None:
        with Consumer(self.topic, url=self.url) as consumer:
            self.pulled = []
            while batch := consumer.poll(max_messages=1000):
                self.pulled += [m.msg_id for m in batch]
        with SimpleConsumer(self.topic, f"{self.topic}-pop", url=self.url) as consumer:
            received = consumer.receive(32)
            self.popped += [r.message.msg_id for r in received]
            if received:
                consumer.ack_all(received)

    @property
    def pushed(self) -> list[str]:
        return [m["msg_id"] for m in self.webhook.messages()]

    def everywhere(self, msg_id: str) -> bool:
        """Read again; whether every reader has seen `msg_id`."""
        self.read()
        return msg_id in self.pulled and msg_id in self.popped and msg_id in self.pushed

    def seen(self) -> list[list[str]]:
        return [self.pulled, self.popped, self.pushed]


@contextmanager
def transaction_topic(gateway: Gateway, topic: str) -> Iterator[Readers]:
    with Webhook() as webhook, Admin(gateway.url) as admin:
        admin.create_topic(topic, queues=2, message_type="TRANSACTION")
        admin.create_group(f"{topic}-pop")
        admin.create_group(f"{topic}-push")
        admin.set_push(f"{topic}-push", topic, webhook.url)
        yield Readers(gateway.url, topic, webhook)


def visible_once(readers: Readers, committed: list[str], marker: str) -> None:
    """Once every reader has seen `marker` (committed last), each has seen exactly `committed` + [marker], each
    message once (pull: in its queue's order)."""
    wait_for(lambda: readers.everywhere(marker), f"{marker} seen by pull, pop and push")
    for seen in readers.seen():
        assert sorted(seen) == sorted([*committed, marker]), seen


def committed_marker(producer: TransactionProducer) -> str:
    half = producer.send(b"marker")
    half.commit()
    return half.msg_id


def test_a_committed_half_message_is_seen_once_with_its_id_and_not_before(gateway):
    with (
        transaction_topic(gateway, "tx-commit") as readers,
        TransactionProducer("tx-commit", "shop", url=gateway.url) as producer,
    ):
        half = producer.send(b"order 1 paid", keys=["order-1"], tag="paid", properties={"region": "eu"})
        first = committed_marker(producer)
        wait_for(lambda: readers.everywhere(first), "the first marker everywhere")
        assert all(half.msg_id not in seen for seen in readers.seen())  # prepared: no reader sees it

        committed = half.commit()
        assert committed.state == "committed" and committed.ended_by == "producer"
        visible_once(readers, [first, half.msg_id], committed_marker(producer))
        with Admin(gateway.url) as admin:
            found = admin.message(half.msg_id)
        assert (found.body, found.keys, found.tag, found.properties) == (
            "order 1 paid",
            ["order-1"],
            "paid",
            {"region": "eu"},
        )
        assert (found.queue, found.offset) == (committed.queue, committed.offset)


def test_a_rolled_back_half_message_is_never_seen(gateway):
    with (
        transaction_topic(gateway, "tx-rollback") as readers,
        TransactionProducer("tx-rollback", "shop", url=gateway.url) as producer,
    ):
        half = producer.send(b"order 2 cancelled")
        assert half.rollback().state == "rolled_back"
        visible_once(readers, [], committed_marker(producer))
        assert all(half.msg_id not in seen for seen in readers.seen())


def test_ends_sent_again_change_nothing_and_the_opposite_end_is_a_409(gateway):
    with (
        transaction_topic(gateway, "tx-again") as readers,
        TransactionProducer("tx-again", "shop", url=gateway.url) as producer,
    ):
        committed, rolled_back = producer.send(b"kept"), producer.send(b"dropped")
        first = committed.commit()
        assert committed.commit() == first  # a retried commit: the same answer, nothing stored twice
        assert rolled_back.rollback() == rolled_back.rollback()
        with pytest.raises(TransactionConflict, match="cannot roll back: it was committed"):
            committed.rollback()
        path = f"{gateway.url}/v1/topics/tx-again/transactions/{rolled_back.msg_id}"
        refused = signed_http().post(path, json={"resolution": "commit"})
        assert refused.status_code == 409 and refused.json()["error"] == "TransactionConflict"
        visible_once(readers, [committed.msg_id], committed_marker(producer))


@dataclass
class Checker:
    """A producer's checker answering `resolution`, recording each check-back it was asked and when."""

    resolution: Resolution
    asked: list[tuple[TransactionCheck, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, check: TransactionCheck) -> Resolution:
        with self.lock:
            self.asked.append((check, now_ms()))
        return self.resolution

    def checks_of(self, msg_id: str) -> list[tuple[TransactionCheck, int]]:
        with self.lock:
            return [(check, at) for check, at in self.asked if check.transaction.msg_id == msg_id]


def never_early(asked: list[tuple[TransactionCheck, int]]) -> None:
    """No check-back asked before the timeout has passed since the server stamped its half message (`prepared_ms`;
    `at`: when the checker was asked, the host's clock as the gateway's)."""
    for check, at in asked:
        assert at >= check.transaction.prepared_ms + TIMEOUT_MS, "a check-back asked before the timeout"


def first_check_due_after_the_timeout(sent: TransactionView) -> None:
    """A half message's first check-back is due the timeout after the server's own stamp, to the ms: the store
    stamps it and sets the check from one clock reading (not from the gateway's clock before the store's stamp)."""
    assert (sent.state, sent.checks) == ("prepared", 0)
    assert sent.check_at_ms == sent.prepared_ms + TIMEOUT_MS, "a first check-back due before the timeout"


def ended(gateway: Gateway, topic: str, msg_id: str) -> dict | None:
    shown = signed_http().get(f"{gateway.url}/v1/topics/{topic}/transactions/{msg_id}").json()
    return shown if shown["state"] != "prepared" else None


@pytest.mark.parametrize("resolution", [Resolution.COMMIT, Resolution.ROLLBACK])
def test_a_check_back_answered_by_the_producers_checker_ends_the_transaction(gateway, resolution):
    topic, checker = f"tx-check-{resolution}", Checker(resolution)
    with (
        transaction_topic(gateway, topic) as readers,
        TransactionProducer(topic, "shop", checker, url=gateway.url, check_wait_ms=2_000) as producer,
    ):
        half = producer.send(b"order 3: the producer forgot to end it")
        first_check_due_after_the_timeout(half.sent)
        outcome = wait_for(lambda: ended(gateway, topic, half.msg_id), "the check-back's answer", 120)
        assert outcome["state"] == ("committed" if resolution is Resolution.COMMIT else "rolled_back")
        ((check, _),) = checker.checks_of(half.msg_id)
        assert (
            outcome["ended_by"] == f"check {check.check}"
            and check.message.body == "order 3: the producer forgot to end it"
        )
        never_early(checker.checks_of(half.msg_id))
        visible_once(readers, [half.msg_id] if resolution is Resolution.COMMIT else [], committed_marker(producer))


def test_a_check_back_answered_unknown_is_asked_again_until_the_limit_then_rolled_back(gateway):
    topic, checker = "tx-unknown", Checker(Resolution.UNKNOWN)
    with (
        transaction_topic(gateway, topic) as readers,
        TransactionProducer(topic, "shop", checker, url=gateway.url, check_wait_ms=2_000) as producer,
    ):
        half = producer.send(b"order 4: nobody knows")
        first_check_due_after_the_timeout(half.sent)
        outcome = wait_for(lambda: ended(gateway, topic, half.msg_id), "the rollback at the check limit", 120)
        assert (outcome["state"], outcome["ended_by"], outcome["checks"]) == ("rolled_back", "check limit", CHECK_MAX)
        asked = [check.check for check, _ in checker.checks_of(half.msg_id)]
        assert asked and asked == sorted(set(asked)) and asked[-1] <= CHECK_MAX  # each check-back asked once at most
        never_early(checker.checks_of(half.msg_id))
        visible_once(readers, [], committed_marker(producer))
        listed = signed_http().get(f"{gateway.url}/v1/topics/{topic}/transactions", params={"state": "rolled_back"})
        assert [t["msg_id"] for t in listed.json()["transactions"]] == [half.msg_id]


def test_half_messages_sent_at_once_each_have_their_first_check_back_due_the_timeout_after_their_stamp(gateway):
    """Producers sending at once make each send wait in the gateway (for the store's lock, its fsync, the GIL), so
    a first check-back timed from before the store's stamp would be due too early by that wait."""
    topic = "tx-at-once"
    with Admin(gateway.url) as admin:
        admin.create_topic(topic, queues=2, message_type="TRANSACTION")

    def send(producer: int) -> list[TransactionView]:
        with TransactionProducer(topic, "shop", url=gateway.url) as sending:
            return [sending.send(f"order {producer}-{n}").sent for n in range(SENDS_EACH)]

    with ThreadPoolExecutor(PRODUCERS) as producers:
        sent = [view for views in producers.map(send, range(PRODUCERS)) for view in views]
    assert len({view.msg_id for view in sent}) == PRODUCERS * SENDS_EACH
    for view in sent:
        first_check_due_after_the_timeout(view)


def test_unanswered_check_backs_roll_the_transaction_back_at_the_limit(gateway):
    """No producer polls: the gateway's timer counts the check-backs, and rolls back at the limit."""
    with (
        transaction_topic(gateway, "tx-silent") as readers,
        TransactionProducer("tx-silent", "shop", url=gateway.url) as producer,
    ):
        half = producer.send(b"order 5: its producer died")
        outcome = wait_for(lambda: ended(gateway, "tx-silent", half.msg_id), "the rollback at the check limit", 120)
        assert (outcome["state"], outcome["ended_by"], outcome["checks"]) == ("rolled_back", "check limit", CHECK_MAX)
        visible_once(readers, [], committed_marker(producer))


def test_a_half_message_goes_to_a_transaction_topic_only_and_only_half_messages_do(gateway):
    with Admin(gateway.url) as admin:
        admin.create_topic("tx-type", queues=1, message_type="TRANSACTION")
        admin.create_topic("tx-normal", queues=1)
    with (
        TransactionProducer("tx-normal", "shop", url=gateway.url) as producer,
        pytest.raises(MessageTypeMismatch, match="NORMAL"),
    ):
        producer.send(b"x")
    response = signed_http().post(f"{gateway.url}/v1/topics/tx-type/messages", json={"messages": [{"body": "x"}]})
    assert response.status_code == 409 and "is TRANSACTION" in response.json()["message"]


def test_the_cli_sends_commits_rolls_back_and_lists(gateway):
    with Admin(gateway.url) as admin:
        admin.create_topic("tx-cli", queues=1, message_type="TRANSACTION")

    def tidemq(*args: str) -> subprocess.CompletedProcess[str]:
        run = command(gateway.url, "tx", *args)
        return subprocess.run(run, capture_output=True, text=True, timeout=60, env=environment())

    kept = json.loads(tidemq("send", "tx-cli", "kept", "--group", "cli", "--key", "k1").stdout)["msg_id"]
    dropped = json.loads(tidemq("send", "tx-cli", "dropped", "--group", "cli").stdout)["msg_id"]
    assert json.loads(tidemq("commit", "tx-cli", kept).stdout)["state"] == "committed"
    assert json.loads(tidemq("rollback", "tx-cli", dropped).stdout)["state"] == "rolled_back"
    refused = tidemq("commit", "tx-cli", dropped)
    assert refused.returncode == 1 and "cannot commit: it was rolled back" in refused.stderr
    listed = [
        json.loads(line)["msg_id"]
        for line in tidemq("list", "tx-cli", "--state", "committed", "-o", "json").stdout.splitlines()
    ]
    assert listed == [kept]
    assert (
        kept in tidemq("list", "tx-cli").stdout
        and json.loads(tidemq("show", "tx-cli", dropped).stdout)["ended_by"] == "producer"
    )
    assert tidemq("checks", "tx-cli", "--group", "cli").stdout == ""  # nothing left to check
    with HttpClient(gateway.url) as client, Consumer("tx-cli", client=client) as consumer:
        assert [m.msg_id for m in consumer.poll()] == [kept]


def test_a_transaction_topics_description_shows_the_check_back_settings(gateway):
    with Admin(gateway.url) as admin:
        admin.create_topic("tx-described", queues=1, message_type="TRANSACTION")
        described = admin.describe_topic("tx-described")
    assert described.type_settings == {
        "transaction_timeout_ms": TIMEOUT_MS,
        "transaction_check_interval_ms": INTERVAL_MS,
        "transaction_check_max": CHECK_MAX,
    }
    shown = subprocess.run(
        command(gateway.url, "topic", "describe", "tx-described"), capture_output=True, text=True, env=environment()
    ).stdout
    assert f"TRANSACTION transaction_check_max: {CHECK_MAX}" in shown


def test_pub_on_the_topic_sends_ends_and_answers_check_backs_and_get_lists_them(gateway):
    """Sending a half message, ending it and taking its group's check-backs are Pub on the topic; listing the
    topic's transactions is Get; Sub alone does none of them."""
    with Admin(gateway.url) as admin:
        admin.create_topic("tx-acl", queues=1, message_type="TRANSACTION")
        users = {
            action: admin.create_user(
                f"tx-{action.lower()}-{gateway.backend}", policies=[AclEntry(resource="Topic:tx-acl", actions=[action])]
            )
            for action in ("Pub", "Get", "Sub")
        }
    clients = {
        action: HttpClient(gateway.url, credentials=Credentials(u.name, u.secret_key), retries=0)
        for action, u in users.items()
    }
    publisher = TransactionProducer("tx-acl", "shop", client=clients["Pub"])
    half = publisher.send(b"allowed")
    assert publisher.take_checks() == [] and half.commit().state == "committed"
    listed = clients["Get"].request("GET", "/v1/topics/tx-acl/transactions").json()["transactions"]
    assert [t["msg_id"] for t in listed] == [half.msg_id]
    for action in ("Get", "Sub"):
        with pytest.raises(AccessDenied):
            TransactionProducer("tx-acl", "shop", client=clients[action]).send(b"refused")
        with pytest.raises(AccessDenied):
            TransactionProducer("tx-acl", "shop", client=clients[action]).rollback(half.msg_id)
        with pytest.raises(AccessDenied):
            TransactionProducer("tx-acl", "shop", client=clients[action]).take_checks()
    with pytest.raises(AccessDenied):
        clients["Pub"].request("GET", "/v1/topics/tx-acl/transactions")
    for client in clients.values():
        client.close()
