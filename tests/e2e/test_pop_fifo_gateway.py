"""FIFO message groups over HTTP through a live local gateway, on each backend: topic types enforced on every
produce route (a 409 naming the type, nothing stored), FIFO groups made over HTTP, the SDK and the CLI, and the
issue's done-when run: many message groups popped by 8 consumers at once, a fifth of the first deliveries failed on
purpose (given back, or left to time out), each group's messages processed in the order sent, never two batches of
one group held at once, a poison message dead-lettered after its last attempt while its group goes on, and every
message of the other groups of a queue delivered and acked while one group's head is held."""

from __future__ import annotations

import contextlib
import itertools
import random
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from tests.e2e.test_cli import command, environment
from tests.gateways import gateway_as_admin
from tidemq import Admin, Producer, SimpleConsumer
from tidemq.httpx_auth import signed_client
from tidemq.producer import outgoing
from tidemq_protocol import codec
from tidemq_protocol.errors import InvalidReceiptHandle
from tidemq_protocol.message import Message, key_queue
from tidemq_protocol.record import ANY_QUEUE, MESSAGE_GROUP

HOLD_MS = 5_000  # consumers' invisible time: a delivery left to time out comes back after it
MAX_ATTEMPTS = 4
SETTINGS = {"TIDEMQ_POP_MIN_INVISIBLE_MS": "1000", "TIDEMQ_MAX_DELIVERY_ATTEMPTS": str(MAX_ATTEMPTS)}


@pytest.fixture(params=["embedded", "serverless"])
def gateway(request, tmp_path):
    with gateway_as_admin(tmp_path / "data", TIDEMQ_BACKEND=request.param, **SETTINGS) as url:
        yield url


@pytest.fixture
def http(gateway):
    with signed_client(gateway, timeout=60) as client:
        assert client.post("/v1/topics", json={"name": "fifo", "queues": 4, "message_type": "FIFO"}).status_code == 201
        assert client.post("/v1/topics", json={"name": "plain", "queues": 4}).status_code == 201
        yield client


def lengths(http, topic: str) -> list[int]:
    return [q["max_offset"] for q in http.get(f"/v1/topics/{topic}").json()["queue_offsets"]]


def test_a_message_that_does_not_fit_its_topics_type_is_a_409_naming_it_and_stores_nothing(http):
    def refused(topic: str, body: bytes | dict, content_type: str | None = None) -> str:
        if isinstance(body, dict):
            answer = http.post(f"/v1/topics/{topic}/messages", json=body)
        else:
            answer = http.post(f"/v1/topics/{topic}/batch", content=body, headers={"content-type": content_type})
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"] == "MessageTypeMismatch"
        return answer.json()["message"]

    grouped = {"body": "x", "message_group": "A"}
    assert "topic 'plain' is NORMAL" in refused("plain", {"messages": [{"body": "ok"}, grouped]})
    assert "topic 'fifo' is FIFO" in refused("fifo", {"messages": [grouped, {"body": "none"}]})
    wrong_queue = {**grouped, "queue": (key_queue("A", 4) + 1) % 4}
    assert "goes to queue" in refused("fifo", {"messages": [wrong_queue]})
    frames = codec.encode_produce([(Message(b"none", -1), None)])
    assert "is FIFO" in refused("fifo", frames, codec.CONTENT_TYPE)
    records = codec.encode_records("plain", [Message(b"x", ANY_QUEUE, properties={MESSAGE_GROUP: "A"})])
    assert "is NORMAL" in refused("plain", records, codec.RECORDS_CONTENT_TYPE)
    named = {"messages": [{"body": "x", "properties": {MESSAGE_GROUP: "A"}}]}
    reserved = http.post("/v1/topics/fifo/messages", json=named)
    assert reserved.status_code == 400 and "use message_group" in reserved.json()["message"]
    both = http.post("/v1/topics/fifo/messages", json={"messages": [{**grouped, "sharding_key": "k"}]})
    assert both.status_code == 422  # the schema says: one or the other
    assert lengths(http, "fifo") == [0] * 4 and lengths(http, "plain") == [0] * 4
    answer = http.post("/v1/topics/fifo/messages", json={"messages": [grouped, {**grouped, "body": "y"}]})
    assert answer.status_code == 200 and {m["queue"] for m in answer.json()["messages"]} == {key_queue("A", 4)}


def test_the_sdk_sends_message_groups_and_a_fifo_group_receives_them_in_order(http):
    url = str(http.base_url)
    assert Admin(url=url).create_group("ordered", fifo=True).fifo
    assert http.get("/v1/groups/ordered").json()["fifo"] is True
    with (
        Producer("fifo", url=url) as producer,
        SimpleConsumer("fifo", "ordered", url=url, invisible_ms=10_000) as consumer,
    ):
        producer.send_batch([outgoing(f"{g}{i}", message_group=g) for i in range(3) for g in "AB"])
        first = consumer.receive(max_messages=32)
        assert {m.message_group for m in first} == {"A", "B"} and MESSAGE_GROUP in first[0].message.properties
        for group in "AB":
            assert [m.message.body.decode() for m in first if m.message_group == group] == [
                f"{group}{i}" for i in range(3)
            ]
        producer.send("A3", message_group="A")
        assert consumer.receive(max_messages=32) == []  # both groups hold a batch
        consumer.ack_all([m for m in first if m.message_group == "A"])
        (last,) = consumer.receive(max_messages=32)
        assert last.message.body == b"A3"


def test_the_command_line_makes_fifo_groups_and_produces_message_groups(http):
    def tidemq(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command(str(http.base_url), *args),
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
            env=environment(),
        )

    made = tidemq("group", "create", "lines", "--fifo")
    assert made.returncode == 0 and "FIFO consumer group 'lines'" in made.stdout, made.stderr
    assert "fifo" in tidemq("group", "list").stdout
    produced = tidemq("produce", "fifo", "--message-group", "G", "-q", input="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    refused = tidemq("produce", "plain", "--message-group", "G", "-q", input="one\n")
    assert refused.returncode == 1 and "is NORMAL" in refused.stderr
    received = tidemq("receive", "fifo", "-g", "lines", "-o", "raw")
    assert received.stdout.splitlines() == ["one", "two", "three"]


# ---- the done-when run ---------------------------------------------------------------------------------------


@dataclass
class Delivery:
    """One message of one received batch, as a consumer saw it (wall-clock milliseconds)."""

    group: str
    index: int
    attempt: int
    batch: int  # which receive
    answered_ms: int  # the receive's answer came: the batch was claimed before
    held_until_ms: int  # invisible_until: held at most until then
    settle_sent_ms: int | None = None  # its ack or release was sent: held at least until then
    acked: bool = False


@dataclass
class Run:
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)
    batches: int = 0

    def acked(self) -> set[tuple[str, int]]:
        with self.lock:
            return {(d.group, d.index) for d in self.deliveries if d.acked}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse(body: str) -> tuple[str, int]:
    group, index = body.split(":")
    return group, int(index)


def consume(url: str, run: Run, seed: int, poison: tuple[str, int]) -> None:
    """One consumer: receive, then per message group of the batch ack what it processed in order up to its first
    failure (a fifth of first deliveries, and the poison message always) and give that one and the rest of the
    group's batch back, or leave them to time out."""
    rand = random.Random(seed)
    try:
        with SimpleConsumer("fifo", "ordered", url=url, invisible_ms=HOLD_MS) as consumer:
            while not run.done.is_set():
                received = consumer.receive(max_messages=rand.randint(1, 6), wait_ms=200)
                answered = now_ms()
                with run.lock:
                    run.batches += 1
                    batch = run.batches
                by_group = defaultdict(list)
                for message in received:
                    group, index = parse(message.message.body.decode())
                    assert message.message_group == group
                    delivery = Delivery(group, index, message.attempt, batch, answered, message.invisible_until_ms)
                    by_group[group].append((message, delivery))
                with run.lock:
                    run.deliveries += [delivery for pairs in by_group.values() for _, delivery in pairs]
                for pairs in by_group.values():
                    settle(consumer, pairs, rand, poison)
    except BaseException as error:  # the test fails with it
        run.errors.append(error)
        run.done.set()


def settle(consumer: SimpleConsumer, pairs: list, rand: random.Random, poison: tuple[str, int]) -> None:
    failed = next(
        (
            k
            for k, (_, d) in enumerate(pairs)
            if (d.group, d.index) == poison or (d.attempt == 1 and rand.random() < 0.2)
        ),
        len(pairs),
    )
    done, back = pairs[:failed], pairs[failed:]
    if done:
        for _, delivery in done:
            delivery.settle_sent_ms = now_ms()
        statuses = consumer.ack_all([message for message, _ in done])
        for (_, delivery), status in zip(done, statuses, strict=True):
            delivery.acked = status == "acked"  # invalid_receipt_handle: too slow, it comes back
    if back and rand.random() < 0.5:  # given back at once; else left to time out
        for message, delivery in back:
            delivery.settle_sent_ms = now_ms()
            with contextlib.suppress(InvalidReceiptHandle):  # too slow: it timed out and went to another already
                consumer.release(message)


def end(delivery: Delivery) -> int:
    """Until when the delivery was surely held: its ack or release was sent, or its invisible time ended."""
    if delivery.settle_sent_ms is None:
        return delivery.held_until_ms
    return min(delivery.held_until_ms, delivery.settle_sent_ms)


def check_order_and_exclusion(run: Run, groups: list[str], per_group: int, poison: tuple[str, int]) -> None:
    """Each group's messages acked once each, in the order sent; no message delivered before the one sent before it
    was acked or dead-lettered, unless in the same batch after it; no two batches of one group held at once."""
    acked = defaultdict(list)
    for delivery in run.deliveries:
        if delivery.acked:
            acked[delivery.group].append(delivery.index)
    for group in groups:
        expected = [i for i in range(per_group) if (group, i) != poison]
        assert sorted(acked[group]) == expected, group  # each once
    first_ack = {(d.group, d.index): d.settle_sent_ms for d in run.deliveries if d.acked}
    poison_end = max(end(d) for d in run.deliveries if (d.group, d.index) == poison)
    batches = defaultdict(list)
    for delivery in run.deliveries:
        batches[(delivery.group, delivery.batch)].append(delivery)
    for (group, _), batch in batches.items():
        indexes = [d.index for d in batch]
        assert indexes == list(range(indexes[0], indexes[0] + len(indexes))), (group, indexes)  # in order, no gap
        head = batch[0]
        if head.index:
            before = (group, head.index - 1)
            released = first_ack[before] if before != poison else poison_end
            assert released <= head.answered_ms, (group, head.index)  # the one before was done first
    held = defaultdict(list)  # per group: the times each batch was surely held (from its answer on)
    for (group, _), batch in batches.items():
        held[group].append((batch[0].answered_ms, max(end(d) for d in batch)))
    for group, spans in held.items():
        spans.sort()
        for (_, finished), (began, _) in itertools.pairwise(spans):
            assert finished <= began, group  # never two batches of one group held at once


def fifo_run(http, groups_count: int, per_group: int) -> None:
    url = str(http.base_url)
    assert http.post("/v1/groups", json={"name": "ordered", "fifo": True}).status_code == 201
    groups = [f"group-{i}" for i in range(groups_count)]
    stuck, poison = groups[0], (groups[1], 1)
    with Producer("fifo", url=url) as producer, SimpleConsumer("fifo", "ordered", url=url) as holder:
        producer.send(f"{stuck}:0", message_group=stuck)  # the held head: received before the rest is sent
        (head,) = holder.receive(max_messages=1, invisible_ms=600_000)
        for start in range(0, per_group, 5):  # interleaved, a batch at a time
            batch = [
                outgoing(f"{group}:{index}", message_group=group)
                for index in range(start, min(start + 5, per_group))
                for group in groups
                if (group, index) != (stuck, 0)
            ]
            producer.send_batch(batch)
        run = Run()
        consumers = [threading.Thread(target=consume, args=(url, run, seed, poison)) for seed in range(8)]
        for thread in consumers:
            thread.start()
        try:
            others = {(g, i) for g in groups[1:] for i in range(per_group)} - {poison}
            wait_for(lambda: others <= run.acked() or run.errors, "the other groups acked while one head is held")
            assert not run.errors, run.errors
            assert not [d for d in run.deliveries if d.group == stuck]  # its messages waited behind its head
            same_queue = [g for g in groups[1:] if key_queue(g, 4) == key_queue(stuck, 4)]
            assert same_queue  # its queue's other groups went on
            sent = now_ms()  # stamped before the ack goes, as the consumers stamp theirs (`settle_sent_ms`): once
            holder.ack(head)  # the server has it, a consumer may receive the group's next message before this returns
            with run.lock:
                run.deliveries.append(Delivery(stuck, 0, 1, 0, 0, head.invisible_until_ms, sent, True))
            everything = {(g, i) for g in groups for i in range(per_group)} - {poison}
            wait_for(lambda: everything <= run.acked() or run.errors, "every message acked")
            wait_for(lambda: dead_letters(http) or run.errors, "the poison message dead-lettered")
        finally:
            run.done.set()
            for thread in consumers:
                thread.join(timeout=120)
    assert not run.errors, run.errors
    (letter,) = dead_letters(http)  # lettered once, though many receives saw it spent
    assert letter["body"] == f"{poison[0]}:{poison[1]}" and letter["properties"]["RECONSUME_TIME"] == str(MAX_ATTEMPTS)
    assert sorted(d.attempt for d in run.deliveries if (d.group, d.index) == poison) == list(range(1, MAX_ATTEMPTS + 1))
    assert any(d.attempt > 1 for d in run.deliveries if (d.group, d.index) != poison)  # failures were delivered again
    check_order_and_exclusion(run, groups, per_group, poison)


def dead_letters(http) -> list[dict]:
    answer = http.get("/v1/topics/%25DLQ%25ordered/queues/0/messages", params={"offset": 0})
    return answer.json()["messages"] if answer.status_code == 200 else []


def wait_for(condition, what: str, deadline_s: float = 240) -> None:
    give_up = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < give_up, f"not done in {deadline_s} s: {what}"
        time.sleep(0.05)


@pytest.mark.serverless_long
def test_fifo_groups_popped_by_8_consumers_with_failures_keep_order_exclusion_and_go_on(http):
    fifo_run(http, groups_count=50, per_group=4)


@pytest.mark.long
def test_fifo_groups_popped_by_8_consumers_at_full_size(http):
    fifo_run(http, groups_count=50, per_group=20)
