"""Idempotent sends over HTTP through a live local gateway, on both backends: a produce (JSON or binary, of messages
due later on a DELAY topic too) or a half message sent again with its `Idempotency-Key` answers as the first and
stores nothing; the key with other messages is a 409 and a key that cannot name a send a 422, both changing nothing;
and the SDK, whose first attempt's answer is lost on the way back (a proxy that drops it), retries its batch (its
half message) under the same key and stores it once."""

from __future__ import annotations

import http.client
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.gateways import (
    each_dispatch,  # noqa: F401 (a fixture: this suite runs under both dispatches)
    gateway_as_admin,
    signed_http,
)
from tidemq import Admin, Consumer, Producer, TransactionProducer
from tidemq.client import HttpClient
from tidemq.errors import ServerUnreachable
from tidemq.producer import outgoing
from tidemq_protocol import codec
from tidemq_protocol.record import encode_record

KEY = codec.IDEMPOTENCY_KEY_HEADER


@pytest.fixture(scope="module", params=["embedded", "serverless"])
def url(request, tmp_path_factory, dispatch) -> Iterator[str]:
    env = {"TIDEMQ_BACKEND": request.param, "TIDEMQ_GATEWAY_DISPATCH": dispatch}
    if request.param == "serverless":
        env.update(request.getfixturevalue("local_aws").env)
    with gateway_as_admin(tmp_path_factory.mktemp("gateway"), **env) as base:
        yield base


@pytest.fixture
def topic(url) -> str:
    name = f"idem-{uuid.uuid4().hex[:8]}"
    with Admin(url) as admin:
        admin.create_topic(name, queues=4)
    return name


def topic_of(url: str, kind: str) -> str:
    name = f"idem-{uuid.uuid4().hex[:8]}"
    with Admin(url) as admin:
        admin.create_topic(name, queues=4, message_type=kind)
    return name


def offsets(url: str, topic: str) -> list[tuple[int, int]]:
    with Admin(url) as admin:
        return [(q.min_offset, q.max_offset) for q in admin.describe_topic(topic).queue_offsets]


def bodies(url: str, topic: str) -> list[bytes]:
    """Every message of the topic, read from its queues' starts."""
    found: list[bytes] = []
    with Consumer(topic, url=url) as consumer:
        while not consumer.drained:
            found += [m.body for m in consumer.poll()]
    return found


def test_a_json_produce_sent_again_with_its_key_answers_as_the_first(url, topic):
    http = signed_http()
    body = {"messages": [{"body": "a"}, {"body": "b", "keys": ["k"]}]}
    first = http.post(f"{url}/v1/topics/{topic}/messages", json=body, headers={KEY: "order-1"})
    again = http.post(f"{url}/v1/topics/{topic}/messages", json=body, headers={KEY: "order-1"})
    assert (first.status_code, again.status_code) == (200, 200), first.text
    assert again.json() == first.json()
    assert sorted(bodies(url, topic)) == [b"a", b"b"]


def test_a_binary_produce_sent_again_with_its_key_answers_as_the_first(url, topic):
    http = signed_http()
    records = b"".join(encode_record(topic.encode(), 0xFFFFFFFF, 1, b"", body) for body in (b"x", b"y"))
    sent = [
        http.post(
            f"{url}/v1/topics/{topic}/batch",
            content=records,
            headers={"content-type": codec.RECORDS_CONTENT_TYPE, KEY: "batch-1"},
        )
        for _ in range(2)
    ]
    assert [r.status_code for r in sent] == [200, 200]
    assert sent[1].text == sent[0].text
    assert sorted(bodies(url, topic)) == [b"x", b"y"]


def test_the_key_with_other_messages_is_a_409_that_stores_nothing(url, topic):
    http = signed_http()
    http.post(f"{url}/v1/topics/{topic}/messages", json={"messages": [{"body": "a"}]}, headers={KEY: "k"})
    before = offsets(url, topic)
    other = http.post(f"{url}/v1/topics/{topic}/messages", json={"messages": [{"body": "b"}]}, headers={KEY: "k"})
    assert other.status_code == 409
    assert other.json()["error"] == "SendConflict"
    assert offsets(url, topic) == before


@pytest.mark.parametrize("key", ["x" * 129, "caf\u00e9"])
def test_a_key_that_cannot_name_a_send_is_a_422_that_stores_nothing(url, topic, key):
    http = signed_http()
    answer = http.post(
        f"{url}/v1/topics/{topic}/messages", json={"messages": [{"body": "a"}]}, headers={KEY: key.encode()}
    )
    assert answer.status_code == 422, answer.text
    assert offsets(url, topic) == [(0, 0)] * 4


class AnswerLosingProxy(ThreadingHTTPServer):
    """Forwards each request to the gateway; the first produce's answer it drops (it closes the connection instead),
    as a network that lost it would."""

    def __init__(self, target: str) -> None:
        super().__init__(("127.0.0.1", 0), ForwardOnce)
        self.target, self.lost, self.produces = urlsplit(target).netloc, threading.Event(), []


class ForwardOnce(BaseHTTPRequestHandler):
    server: AnswerLosingProxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {name: value for name, value in self.headers.items() if name.lower() not in ("host", "connection")}
        upstream = http.client.HTTPConnection(self.server.target, timeout=60)
        upstream.request("POST", self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        upstream.close()
        if self.path.endswith(("/batch", "/transactions")):
            self.server.produces.append(self.headers.get(KEY))
            if not self.server.lost.is_set():
                self.server.lost.set()
                self.close_connection = True  # the answer never reaches the producer
                return
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy(url) -> Iterator[AnswerLosingProxy]:
    proxy = AnswerLosingProxy(url)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    yield proxy
    proxy.shutdown()


def test_the_sdk_retries_a_batch_whose_answer_was_lost_under_its_key_and_it_is_stored_once(url, topic, proxy):
    client = HttpClient(f"http://127.0.0.1:{proxy.server_address[1]}", retries=3, backoff_s=0.01)
    with Producer(topic, client=client) as producer:
        results = producer.send_batch([outgoing(b"once-1", queue=0), outgoing(b"once-2", queue=0)])
    assert proxy.lost.is_set() and len(proxy.produces) == 2
    assert proxy.produces[0] == proxy.produces[1] is not None  # the retry carried the first attempt's key
    assert sorted(bodies(url, topic)) == [b"once-1", b"once-2"]
    assert [r.offset for r in results] == [0, 1]


def test_a_buffered_batch_whose_send_failed_is_flushed_again_under_its_key(url, topic, proxy):
    """No retries: the lost answer fails the flush, the batch stays buffered, and the next flush sends it again as it
    was, under its key (more messages added meanwhile go in a batch of their own)."""
    client = HttpClient(f"http://127.0.0.1:{proxy.server_address[1]}", retries=0)
    producer = Producer(topic, client=client, batch_size=10)
    for n in range(3):
        producer.add(f"buffered-{n}", queue=0)
    with pytest.raises(ServerUnreachable):
        producer.flush()
    producer.add("later", queue=0)
    results = producer.flush()
    producer.close()
    assert proxy.produces[0] == proxy.produces[1] != proxy.produces[2]
    assert sorted(bodies(url, topic)) == [b"buffered-0", b"buffered-1", b"buffered-2", b"later"]
    assert [r.offset for r in results] == [0, 1, 2, 3]


def transactions_of(url: str, topic: str) -> list[dict]:
    answer = signed_http().get(f"{url}/v1/topics/{topic}/transactions")
    assert answer.status_code == 200, answer.text
    return answer.json()["transactions"]


def test_a_delay_produce_held_for_later_sent_again_is_kept_once_and_delivered_once(url):
    topic, http = topic_of(url, "DELAY"), signed_http()
    body = {"messages": [{"body": "later", "delay_ms": 1500}]}
    sent = [http.post(f"{url}/v1/topics/{topic}/messages", json=body, headers={KEY: "d-1"}) for _ in range(2)]
    assert [r.status_code for r in sent] == [200, 200], sent[0].text
    assert sent[1].json() == sent[0].json()
    (first,) = sent[0].json()["messages"]
    assert first["offset"] == -1 and first["recall_handle"]
    found: list[bytes] = []
    pause = threading.Event()  # never set: a wait between looks
    for _ in range(600):  # up to a minute on a loaded machine, looking again every 100 ms
        found = bodies(url, topic)
        if found:
            break
        pause.wait(0.1)
    assert found == [b"later"]
    other = http.post(
        f"{url}/v1/topics/{topic}/messages", json={"messages": [{"body": "x", "delay_ms": 1}]}, headers={KEY: "d-1"}
    )
    assert other.status_code == 409 and other.json()["error"] == "SendConflict"
    assert bodies(url, topic) == [b"later"]


def test_a_half_message_sent_again_with_its_key_answers_its_transaction(url):
    topic, http = topic_of(url, "TRANSACTION"), signed_http()
    half = {"body": "paid", "producer_group": "checkout"}
    sent = [http.post(f"{url}/v1/topics/{topic}/transactions", json=half, headers={KEY: "h-1"}) for _ in range(2)]
    assert [r.status_code for r in sent] == [200, 200], sent[0].text
    assert sent[1].json() == sent[0].json()
    other = http.post(f"{url}/v1/topics/{topic}/transactions", json={**half, "body": "refunded"}, headers={KEY: "h-1"})
    assert other.status_code == 409 and other.json()["error"] == "SendConflict"
    bad = http.post(f"{url}/v1/topics/{topic}/transactions", json=half, headers={KEY: "x" * 129})
    assert bad.status_code == 422, bad.text
    assert [t["msg_id"] for t in transactions_of(url, topic)] == [sent[0].json()["msg_id"]]


def test_the_sdk_retries_a_half_message_whose_answer_was_lost_under_its_key_and_it_is_prepared_once(url, proxy):
    topic = topic_of(url, "TRANSACTION")
    client = HttpClient(f"http://127.0.0.1:{proxy.server_address[1]}", retries=3, backoff_s=0.01)
    with TransactionProducer(topic, group="checkout", client=client) as producer:
        half = producer.send("paid")
        half.commit()
    assert proxy.lost.is_set() and len(proxy.produces) == 2
    assert proxy.produces[0] == proxy.produces[1] is not None
    assert [t["msg_id"] for t in transactions_of(url, topic)] == [half.msg_id]
    assert bodies(url, topic) == [b"paid"]


def test_the_sdk_sends_buffered_delay_messages_at_most_99_to_a_put(url):
    """A put holds at most MAX_TIMERS_PER_PUT messages due later (the key is the 100th item of the serverless
    transaction): the SDK's batches of its default 100 stop short of it when they hold one."""
    topic = topic_of(url, "DELAY")
    results = []
    with Producer(topic, url=url) as producer:
        for n in range(100):
            results += producer.add(f"later-{n}", delay=3_600_000)  # the 100th sends them all
        assert producer.buffered == 0
    assert len(results) == 100 and len({r.msg_id for r in results}) == 100
    assert all(r.offset == -1 and r.recall_handle for r in results)
