"""The Python SDK (`tidemq`: Admin, Producer, Consumer) against a live local gateway."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servers.process import free_port
from tests.gateways import (
    each_dispatch,  # noqa: F401 (a fixture: this suite runs under both dispatches)
    gateway_as_admin,
)
from tidemq import Admin, ApiError, Consumer, HttpClient, OutgoingMessage, Producer, ServerUnreachable
from tidemq_protocol.errors import (
    GroupNotFound,
    InvalidArgument,
    InvalidBatch,
    MessageNotFound,
    MessageTooLarge,
    OffsetOutOfRange,
    QueueOutOfRange,
    TopicExists,
    TopicNotFound,
)
from tidemq_protocol.message import StoredMessage


@pytest.fixture(scope="module")
def client(gateway) -> Iterator[HttpClient]:
    with HttpClient(gateway.url) as http:
        yield http


@pytest.fixture(scope="module")
def admin(client) -> Admin:
    return Admin(client=client)


def drain(consumer: Consumer) -> list[StoredMessage]:
    """Everything the consumer can read now, in the order it read it."""
    messages = []
    while batch := consumer.poll():
        messages += batch
    assert consumer.drained
    return messages


def test_a_binary_batch_comes_back_with_bodies_keys_tags_and_properties_intact(admin, client):
    admin.create_topic("sdk-roundtrip", queues=4)
    sent = {}
    with Producer("sdk-roundtrip", client=client) as producer:  # batches of 100
        results = []
        for i in range(250):
            body = bytes([i, 0xFF, 0xFE]) if i % 10 == 0 else f"message {i}".encode()  # some are not UTF-8
            keys, tag, properties = (f"k{i}", f"even-{i % 2 == 0}"), "A" if i % 3 else None, {"i": str(i)}
            results += producer.add(body, keys=keys, tag=tag, properties=properties)
            sent[i] = (body, keys, tag, properties)
        assert len(results) == 200 and producer.buffered == 50
        results += producer.flush()
    assert len(results) == 250
    for start in (0, 100, 200):  # an unkeyed batch stays together in one queue, at consecutive offsets
        batch = results[start : start + 100]
        assert {r.queue for r in batch} == {batch[0].queue}
        assert [r.offset for r in batch] == list(range(batch[0].offset, batch[0].offset + len(batch)))

    with Consumer("sdk-roundtrip", client=client) as consumer:
        received = drain(consumer)
    assert len(received) == 250
    by_id = {m.msg_id: m for m in received}
    for i, result in enumerate(results):
        message = by_id[result.msg_id]
        assert (message.queue, message.queue_offset) == (result.queue, result.offset)
        assert (message.body, message.keys, message.tag, message.properties) == sent[i]


def test_send_stores_one_message_where_asked_and_admin_finds_it_by_id_and_by_key(admin, client):
    admin.create_topic("sdk-single", queues=3)
    producer = Producer("sdk-single", client=client)
    result = producer.send("hello", keys=["order-7"], tag="new", properties={"origin": "test"}, queue=2)
    assert (result.queue, result.offset) == (2, 0)
    binary = producer.send(b"\x00\xff", keys=["order-7"])

    found = admin.message(result.msg_id)
    assert (found.body, found.keys, found.tag, found.properties) == ("hello", ["order-7"], "new", {"origin": "test"})
    assert result.store_timestamp == found.store_timestamp  # from the produce's binary reply
    assert admin.message(binary.msg_id).body_bytes() == b"\x00\xff"
    assert [m.msg_id for m in admin.messages_by_key("sdk-single", "order-7")] == [result.msg_id, binary.msg_id]
    assert admin.messages_by_key("sdk-single", "no-such-key") == []


def test_one_sharding_key_always_lands_in_one_queue(admin, client):
    admin.create_topic("sdk-sharded", queues=8)
    producer = Producer("sdk-sharded", client=client, batch_size=7)
    results = []
    for i in range(60):
        results += producer.add(f"{i}", sharding_key=f"customer-{i % 3}")
    results += producer.flush()
    queues_by_key = {}
    for i, result in enumerate(results):
        queues_by_key.setdefault(i % 3, set()).add(result.queue)
    assert all(len(queues) == 1 for queues in queues_by_key.values())
    for key in range(3):  # and in the order sent
        offsets = [r.offset for i, r in enumerate(results) if i % 3 == key]
        assert offsets == sorted(offsets)


def test_send_batch_is_one_atomic_request_and_limits_are_the_servers(admin, client):
    admin.create_topic("sdk-batch", queues=2)
    producer = Producer("sdk-batch", client=client)
    results = producer.send_batch([OutgoingMessage(f"m{i}".encode(), tag="T") for i in range(1000)])
    assert len(results) == 1000 and len({r.queue for r in results}) == 1
    with pytest.raises(InvalidBatch):
        producer.send_batch([OutgoingMessage(b"x")] * 1001)
    with pytest.raises(MessageTooLarge):
        producer.send(b"x" * (5 * 1024 * 1024))
    big = [OutgoingMessage(b"y" * (1024 * 1024)) for _ in range(10)]  # 10 MiB: over the server's batch limit
    with pytest.raises(MessageTooLarge):
        producer.send_batch(big)
    for message in big:  # add/flush split it into batches that fit
        producer.add(message.body)
    assert len(producer.flush()) == 10


def test_a_pipelined_producer_keeps_batches_in_flight_at_once_and_order_per_queue(admin, client, monkeypatch):
    admin.create_topic("sdk-pipeline", queues=3)
    producer = Producer("sdk-pipeline", client=client)
    sending, most = 0, 0
    lock = threading.Lock()
    send_batch = producer.send_batch

    def counted(batch):  # how many batches are in flight at once, seen from the client
        nonlocal sending, most
        with lock:
            sending += 1
            most = max(most, sending)
        try:
            time.sleep(0.01)  # hold each request open long enough for others to start
            return send_batch(batch)
        finally:
            with lock:
                sending -= 1

    monkeypatch.setattr(producer, "send_batch", counted)
    batches = [
        [OutgoingMessage(f"{b}:{i}".encode(), queue=None if b % 10 == 9 else b % 3) for i in range(20)]
        for b in range(60)
    ]
    results = list(producer.send_pipelined(batches, in_flight=4))
    assert most > 1  # really concurrent
    assert len(results) == 60 and all(len(r) == 20 for r in results)  # one result list per batch, in order
    by_queue: dict[int, list[tuple[int, str]]] = {}
    for batch, stored in zip(batches, results, strict=True):
        assert {r.queue for r in stored} == ({batch[0].queue} if batch[0].queue is not None else {stored[0].queue})
        for message, result in zip(batch, stored, strict=True):
            by_queue.setdefault(result.queue, []).append((result.offset, message.body.decode()))
    for queue, sent in by_queue.items():  # each queue holds its batches in the order they were given
        stored = [m.body.decode() for m in drain_queue(client, "sdk-pipeline", queue)]
        assert stored == [body for _, body in sorted(sent)] == [body for _, body in sent]


def drain_queue(client: HttpClient, topic: str, queue: int) -> list[StoredMessage]:
    with Consumer(topic, client=client, queues=[queue]) as consumer:
        return drain(consumer)


def test_a_group_commits_reaches_lag_zero_under_a_tag_filter_and_resumes_where_it_left(admin, client):
    admin.create_topic("sdk-group", queues=4)
    with Producer("sdk-group", client=client, batch_size=50) as producer:
        for i in range(400):
            producer.add(f"{i}", tag="A" if i % 2 == 0 else "B")

    with Consumer("sdk-group", "sdk-workers", tag="A", client=client) as consumer:
        received = drain(consumer)
        assert admin.describe_group("sdk-workers", "sdk-group").lag == 400  # nothing committed yet
        consumer.commit()
    assert sorted(int(m.body) for m in received) == list(range(0, 400, 2))
    description = admin.describe_group("sdk-workers", "sdk-group")
    assert description.lag == 0  # the B messages the filter skipped count as consumed
    assert [q.committed_offset for q in description.topics[0].queues] == [100, 100, 100, 100]

    with Producer("sdk-group", client=client) as producer:
        for i in range(400, 410):
            producer.add(f"{i}", tag="A" if i % 2 == 0 else "B")
    with Consumer("sdk-group", "sdk-workers", tag="A", start="earliest", client=client) as consumer:
        assert sorted(int(m.body) for m in drain(consumer)) == [400, 402, 404, 406, 408]


def test_iterating_a_consumer_commits_what_the_loop_received_before_each_poll(admin, client):
    admin.create_topic("sdk-iter", queues=1)
    producer = Producer("sdk-iter", client=client)
    producer.send_batch([OutgoingMessage(f"{i}".encode()) for i in range(5)])
    with Consumer("sdk-iter", "sdk-iterating", client=client) as consumer:
        seen = []
        for message in consumer:
            seen.append(int(message.body))
            if len(seen) == 2:
                break  # in the middle of a batch
        assert consumer.positions == {0: 2}
        for message in consumer:  # goes on after the last message received
            seen.append(int(message.body))
            if len(seen) == 5:
                break
        assert seen == [0, 1, 2, 3, 4]
        assert admin.describe_group("sdk-iterating", "sdk-iter").lag == 3  # committed before the second poll
        producer.send("5")
        assert int(next(iter(consumer)).body) == 5
        assert admin.describe_group("sdk-iterating", "sdk-iter").lag == 1


def test_start_positions_earliest_latest_and_a_timestamp(admin, client):
    admin.create_topic("sdk-start", queues=2)
    producer = Producer("sdk-start", client=client)
    old = producer.send_batch([OutgoingMessage(f"old {i}".encode()) for i in range(10)])
    time.sleep(0.05)
    between = int(time.time() * 1000)
    time.sleep(0.05)
    latest = Consumer("sdk-start", start="latest", client=client)
    at_time = Consumer("sdk-start", start=between, client=client)
    earliest = Consumer("sdk-start", start="earliest", client=client)
    assert latest.drained and latest.poll() == []
    new = producer.send_batch([OutgoingMessage(f"new {i}".encode()) for i in range(10)])

    assert [m.msg_id for m in drain(latest)] == [r.msg_id for r in new]
    assert [m.msg_id for m in drain(at_time)] == [r.msg_id for r in new]
    assert sorted(m.msg_id for m in drain(earliest)) == sorted(r.msg_id for r in old + new)
    only = Consumer("sdk-start", queues=[new[0].queue], client=client)
    assert {m.queue for m in drain(only)} == {new[0].queue}
    for consumer in (latest, at_time, earliest, only):
        consumer.close()


def test_a_position_past_the_end_of_a_queue_moves_to_its_end(admin, client):
    admin.create_topic("sdk-past-end", queues=1)
    producer = Producer("sdk-past-end", client=client)
    producer.send_batch([OutgoingMessage(b"a"), OutgoingMessage(b"b")])
    with Consumer("sdk-past-end", client=client) as consumer:
        consumer.seek(0, 50)
        assert consumer.poll() == [] and consumer.positions == {0: 2}
        producer.send("c")
        assert [m.body for m in consumer.poll()] == [b"c"]


def test_a_consumer_behind_retention_moves_on_to_the_oldest_message_left(tmp_path):
    with gateway_as_admin(tmp_path / "data", TIDEMQ_CLEAN_INTERVAL_S="0.2") as url, HttpClient(url) as client:
        admin = Admin(client=client)
        admin.create_topic("short-lived", queues=1, retention_ms=1000)
        producer = Producer("short-lived", client=client)
        producer.send_batch([OutgoingMessage(f"old {i}".encode()) for i in range(20)])
        admin.create_group("late")
        admin.commit_offsets("late", "short-lived", {0: 0})
        deadline = time.monotonic() + 20
        while admin.describe_topic("short-lived").queue_offsets[0].min_offset < 20:
            assert time.monotonic() < deadline, "the cleaner did not expire the messages"
            time.sleep(0.2)
        fresh = producer.send_batch([OutgoingMessage(f"fresh {i}".encode()) for i in range(3)])

        with pytest.raises(OffsetOutOfRange) as raised:  # what the consumer meets, with the valid range
            client.request("GET", "/v1/topics/short-lived/queues/0/batch", params={"offset": 0})
        assert (raised.value.min_offset, raised.value.max_offset) == (20, 23)
        with Consumer("short-lived", "late", client=client) as consumer:
            assert consumer.positions == {0: 0}  # the committed offset, now expired
            assert [m.msg_id for m in drain(consumer)] == [r.msg_id for r in fresh]


def test_topics_and_groups_are_listed_page_by_page_changed_and_deleted(admin):
    names = [f"sdk-page-{i}" for i in range(5)]
    for name in names:
        admin.create_topic(name, queues=1, retention_ms=None)
    first = admin.list_topics(after="sdk-page", limit=2)
    assert [t.name for t in first.topics] == names[:2] and first.next_after == names[1]
    assert [t.name for t in admin.iter_topics(page_size=2) if t.name.startswith("sdk-page-")] == names
    assert admin.describe_topic(names[0]).retention_ms is None
    assert admin.set_retention(names[0], 60_000).retention_ms == 60_000
    admin.delete_topic(names[0])
    with pytest.raises(TopicNotFound):
        admin.describe_topic(names[0])

    for name in ("sdk-g1", "sdk-g2"):
        admin.create_group(name)
    assert {"sdk-g1", "sdk-g2"} <= {g.name for g in admin.iter_groups(page_size=1)}
    admin.delete_group("sdk-g1")
    assert "sdk-g1" not in {g.name for g in admin.iter_groups()}


def test_resetting_a_group_moves_its_offsets_to_earliest_latest_or_a_time(admin, client):
    admin.create_topic("sdk-reset", queues=2)
    admin.create_group("sdk-resetting")
    producer = Producer("sdk-reset", client=client)
    producer.send_batch([OutgoingMessage(b"x")] * 4)
    middle = int(time.time() * 1000) + 1
    time.sleep(0.02)
    producer.send_batch([OutgoingMessage(b"y")] * 6)
    assert sum(admin.reset_offsets("sdk-resetting", "sdk-reset", "latest").offsets.values()) == 10
    assert admin.describe_group("sdk-resetting", "sdk-reset").lag == 0
    assert sum(admin.reset_offsets("sdk-resetting", "sdk-reset", "earliest").offsets.values()) == 0
    admin.reset_offsets("sdk-resetting", "sdk-reset", middle)
    assert admin.describe_group("sdk-resetting", "sdk-reset").lag == 6
    assert admin.offset_for_time("sdk-reset", 0, 0).offset == 0


def test_error_responses_raise_the_engines_exceptions_with_the_servers_message(admin, client):
    admin.create_topic("sdk-errors", queues=2)
    with pytest.raises(TopicExists, match="topic 'sdk-errors' already exists"):
        admin.create_topic("sdk-errors")
    with pytest.raises(TopicNotFound, match="topic 'nope' does not exist"):
        Producer("nope", client=client).send("x")
    with pytest.raises(TopicNotFound):
        Consumer("nope", client=client)
    with pytest.raises(GroupNotFound):
        admin.describe_group("no-such-group")
    with pytest.raises(QueueOutOfRange):
        Consumer("sdk-errors", queues=[5], client=client)
    with pytest.raises(MessageNotFound):
        admin.message("0" * 24)
    admin.create_group("sdk-errors-group")
    with pytest.raises(OffsetOutOfRange) as raised:
        admin.commit_offsets("sdk-errors-group", "sdk-errors", {0: 9})
    assert (raised.value.min_offset, raised.value.max_offset) == (0, 0)
    with pytest.raises(InvalidArgument) as invalid:  # a 422 names each offending field
        admin.create_topic("bad name", queues=0)
    assert set(invalid.value.fields) == {"name", "queues"}
    assert "characters outside" in invalid.value.fields["name"]
    with pytest.raises(InvalidArgument, match="tag filter"):
        Consumer("sdk-errors", tag="A ||", client=client)
    with pytest.raises(InvalidArgument, match="consumer group"):
        Consumer("sdk-errors", client=client).commit()
    with pytest.raises(ApiError) as other:  # not an engine error: status and message
        client.request("GET", "/v1/no-such-route")
    assert other.value.status == 404


def test_a_server_that_is_down_is_retried_then_reported(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnreachable) as raised, HttpClient(url, retries=2, backoff_s=0.01) as client:
        Admin(client=client).list_topics()
    assert str(raised.value) == f"cannot reach {url}: connection refused"


def test_a_retry_waits_at_least_what_the_servers_retry_after_asks():
    server = FlakyServer([503, 503, 200], retry_after="1")
    try:
        started = time.monotonic()
        with HttpClient(server.url, retries=2, backoff_s=0.01) as client:
            assert Admin(client=client).list_topics().topics == []
        assert time.monotonic() - started >= 2  # two waits of the second the server asked for (a bound, not a speed)
        assert server.requests == 3
    finally:
        server.shutdown()
        server.server_close()


class FlakyHandler(BaseHTTPRequestHandler):
    """Answers each GET with the next status of its server's `statuses` (the last one repeats)."""

    server: FlakyServer

    def do_GET(self) -> None:
        statuses = self.server.statuses
        status = statuses[min(self.server.requests, len(statuses) - 1)]
        self.server.requests += 1
        body = b'{"topics": [], "next_after": null}' if status == 200 else b'{"message": "try again"}'
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        if status == 503 and self.server.retry_after is not None:
            self.send_header("retry-after", self.server.retry_after)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class FlakyServer(ThreadingHTTPServer):
    """A real HTTP server on a free port that fails as told, to see what the client retries."""

    def __init__(self, statuses: list[int], retry_after: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), FlakyHandler)
        self.statuses, self.requests, self.retry_after = statuses, 0, retry_after
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.mark.parametrize(
    ("statuses", "requests", "outcome"),
    [
        ([503, 500, 200], 3, None),  # 5xx: retried until it works
        ([503], 3, ApiError),  # ... or the retries run out
        ([404], 1, ApiError),  # 4xx: never retried
        ([409], 1, ApiError),
    ],
)
def test_only_5xx_answers_are_retried(statuses, requests, outcome):
    server = FlakyServer(statuses)
    try:
        with HttpClient(server.url, retries=2, backoff_s=0.01) as client:
            if outcome is None:
                assert Admin(client=client).list_topics().topics == []
            else:
                with pytest.raises(outcome) as raised:
                    Admin(client=client).list_topics()
                assert raised.value.status == statuses[-1]
        assert server.requests == requests
    finally:
        server.shutdown()
        server.server_close()


class ClosingHandler(BaseHTTPRequestHandler):
    """Answers each GET on a kept-alive connection (HTTP/1.1, no `connection: close`), then closes it, as a server
    does with a connection left idle past its keep-alive timeout."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = b'{"topics": [], "next_after": null}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


def test_a_kept_alive_connection_the_server_closed_is_no_failed_attempt():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ClosingHandler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with HttpClient(f"http://127.0.0.1:{server.server_address[1]}", retries=0) as client:
            admin = Admin(client=client)
            assert [admin.list_topics().topics for _ in range(3)] == [[], [], []]  # no retry was needed, nor left
    finally:
        server.shutdown()
        server.server_close()
