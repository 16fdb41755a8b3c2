"""Streaming reads (GET /v1/topics/{topic}/queues/{queue}/stream) through a live local gateway, on both backends: the
frames and the SDK's streaming Consumer, their order and completeness, filters, resuming from an offset, the
checks of the opening (as the batch route's), flow control against a client that stops reading, and the
Consumer's fallback to long polling where no stream is offered."""

from __future__ import annotations

import http.client
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from servers.process import free_port
from tidemq import Admin, Consumer, HttpClient, OutgoingMessage, Producer
from tidemq.auth import signature_headers
from tidemq.credentials import Credentials
from tidemq_protocol import codec, stream
from tidemq_protocol.acl import AclEntry
from tidemq_protocol.errors import AccessDenied, InvalidArgument, OffsetOutOfRange, TopicNotFound
from tidemq_protocol.message import StoredMessage

DEADLINE_S = 120


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def client(gateway) -> Iterator[HttpClient]:
    with HttpClient(gateway.url) as http:
        yield http


@pytest.fixture(scope="module")
def admin(client) -> Admin:
    return Admin(client=client)


def stream_path(topic: str, queue: int = 0) -> str:
    return f"/v1/topics/{topic}/queues/{queue}/stream"


def read_stream(client: HttpClient, topic: str, queue: int, until: int, **params) -> list[StoredMessage]:
    """The messages of a queue's stream from `offset` (in `params`) until the frame reaching `until`, every frame
    following the previous one's next_offset."""
    connection, answer = client.open_stream(stream_path(topic, queue), params, timeout_s=DEADLINE_S)
    assert answer.getheader("content-type") == stream.CONTENT_TYPE
    messages, offset, deadline = [], params["offset"], time.monotonic() + DEADLINE_S
    try:
        while offset < until:
            assert time.monotonic() < deadline, f"at {offset} of {until}"
            batch = stream.read_frame(answer.read)
            if batch is None:
                continue
            found, next_offset, _, _ = codec.decode_consume(batch)
            assert [m.queue_offset for m in found[:1]] in ([], [offset])  # no gap, no repeat
            messages += found
            offset = next_offset
    finally:
        connection.close()
    return messages


def produce(client: HttpClient, topic: str, count: int, batch: int = 10, tag_of=lambda i: None) -> None:
    with Producer(topic, client=client) as producer:
        for first in range(0, count, batch):
            messages = [OutgoingMessage(f"m-{i}".encode(), tag=tag_of(i), queue=0) for i in range(first, first + batch)]
            producer.send_batch(messages)


def test_a_stream_hands_over_every_batch_in_order_as_it_is_stored(admin, client):
    topic = unique("stream-order")
    admin.create_topic(topic, queues=1)
    producing = threading.Thread(target=produce, args=(client, topic, 2000))
    producing.start()  # the stream opens on an empty queue, or part way: it reads on as batches are stored
    try:
        messages = read_stream(client, topic, 0, until=2000, offset=0, max_bytes=4096)
    finally:
        producing.join()
    assert [m.body for m in messages] == [f"m-{i}".encode() for i in range(2000)]
    assert [m.queue_offset for m in messages] == list(range(2000))


def test_a_stream_reopened_at_its_next_offset_goes_on_without_a_gap_or_a_repeat(admin, client):
    topic = unique("stream-resume")
    admin.create_topic(topic, queues=1)
    produce(client, topic, 300)
    first = read_stream(client, topic, 0, until=120, offset=0, max_messages=40)
    assert [m.queue_offset for m in first] == list(range(120))
    rest = read_stream(client, topic, 0, until=300, offset=120, max_messages=40)
    assert [m.body for m in first + rest] == [f"m-{i}".encode() for i in range(300)]


def test_a_streaming_consumer_with_a_filter_gets_only_its_messages_and_reaches_the_end(admin, client):
    topic = unique("stream-filter")
    admin.create_topic(topic, queues=1)
    produce(client, topic, 200, tag_of=lambda i: "keep" if i % 3 == 0 else "skip")
    with Consumer(topic, group=unique("g"), tag="keep", client=client) as consumer:
        received = []
        while len(received) < 67:
            received += consumer.poll(wait_ms=DEADLINE_S * 1000)
        assert consumer._streams is not None  # it streamed
        assert [m.body for m in received] == [f"m-{i}".encode() for i in range(0, 200, 3)]
        while consumer.positions[0] < 200:  # the skipped tail moves the position on too
            assert consumer.poll(wait_ms=DEADLINE_S * 1000) == []
        consumer.commit()
    assert admin.describe_group(consumer.group, topic).topics[0].queues[0].committed_offset == 200


def test_a_streaming_consumer_reads_every_queue_with_its_group_and_commits_what_it_handed_out(admin, client):
    topic = unique("stream-sdk")
    admin.create_topic(topic, queues=3)
    group = unique("g")
    with Producer(topic, client=client) as producer:
        for i in range(90):
            producer.send_batch([OutgoingMessage(f"m-{i}-{j}".encode(), queue=i % 3) for j in range(5)])
    received: list[StoredMessage] = []
    with Consumer(topic, group=group, client=client) as consumer:
        for message in consumer:
            received.append(message)
            if len(received) == 450:
                break
        consumer.commit()
    for queue in range(3):
        offsets = [m.queue_offset for m in received if m.queue == queue]
        assert offsets == list(range(150)), queue
    assert sorted(m.body for m in received) == sorted(f"m-{i}-{j}".encode() for i in range(90) for j in range(5))
    lags = admin.describe_group(group, topic).topics[0].queues
    assert {q.queue: q.committed_offset for q in lags} == {0: 150, 1: 150, 2: 150}


def test_opening_a_stream_is_checked_as_a_batch_read_is(gateway, admin, client):
    topic = unique("stream-checks")
    admin.create_topic(topic, queues=2)
    produce(client, topic, 10)
    unsigned = httpx.get(gateway.url + stream_path(topic), params={"offset": 0}, timeout=30)
    assert unsigned.status_code == 401 and unsigned.json()["error"] == "Unauthenticated"
    created = admin.create_user(unique("nobody"), policies=[AclEntry(resource="Topic:other", actions=["Sub"])])
    credentials = Credentials(created.name, created.secret_key)
    with HttpClient(gateway.url, credentials=credentials, retries=0) as nobody, pytest.raises(AccessDenied):
        nobody.open_stream(stream_path(topic), {"offset": 0}, timeout_s=30)
    with pytest.raises(TopicNotFound):
        client.open_stream(stream_path(unique("missing")), {"offset": 0}, timeout_s=30)
    with pytest.raises(OffsetOutOfRange) as out_of_range:
        client.open_stream(stream_path(topic), {"offset": 11}, timeout_s=30)
    assert (out_of_range.value.min_offset, out_of_range.value.max_offset) == (0, 10)
    answers = {
        "negative offset": client.send("GET", stream_path(topic), params={"offset": -1}),
        "max_bytes 0": client.send("GET", stream_path(topic), params={"offset": 0, "max_bytes": 0}),
        "queue 7": client.send("GET", stream_path(topic, 7), params={"offset": 0}),
        "bad sql": client.send("GET", stream_path(topic), params={"offset": 0, "sql": "a ="}),
        "tag and sql": client.send("GET", stream_path(topic), params={"offset": 0, "tag": "a", "sql": "a = 1"}),
        "a POST": client.send("POST", stream_path(topic), params={"offset": 0}),
    }
    statuses = {why: answer.status_code for why, answer in answers.items()}
    assert statuses == {
        "negative offset": 422,
        "max_bytes 0": 422,
        "queue 7": 404,
        "bad sql": 400,
        "tag and sql": 400,
        "a POST": 404,
    }, {why: answer.text for why, answer in answers.items()}
    assert all(answer.json()["message"] for answer in answers.values())  # each says what was wrong
    assert admin.describe_topic(topic).queue_offsets[0].max_offset == 10  # nothing changed
    with pytest.raises(InvalidArgument):
        client.open_stream(stream_path(topic), {"offset": "x"}, timeout_s=30)


def test_a_client_that_stops_reading_stops_the_stream_holding_no_more_than_the_transport_buffers(
    gateway, admin, client
):
    """While the client reads nothing, the server reads a frame from the store only once the previous one went
    into the socket: every frame read before the last batch was stored (so showing an older end, `max_offset`)
    fits in the socket buffers plus about a frame. A server that read on regardless would have read all of it
    before the client came back, each frame showing the end as it was then."""
    topic = unique("stream-slow")
    admin.create_topic(topic, queues=1)
    frame_bytes, batches, body = 256 * 1024, 48, b"x" * 100_000  # 48 batches of 1 MB
    answer, sock = _unread_stream(gateway.url, client.credentials, topic, frame_bytes)
    try:
        with Producer(topic, client=client) as producer:
            for _ in range(batches):
                producer.send_batch([OutgoingMessage(body, queue=0)] * 10)
        end, stale_bytes, offset = batches * 10, 0, 0
        while offset < end:  # now read it all
            batch = stream.read_frame(answer.read)
            if batch is None:
                continue
            next_offset, _, max_offset, count = codec.consume_header(batch)
            assert count == next_offset - offset
            if max_offset < end:
                stale_bytes += len(batch)
            offset = next_offset
    finally:
        sock.close()
    produced = batches * 10 * len(body)
    send_buffer = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])  # the server socket's largest
    bound = send_buffer + 2 * 65536 + 64 * 1024 + 2 * frame_bytes  # + the client's, uvicorn's, a frame or two
    assert stale_bytes <= bound < produced / 2, (stale_bytes, bound, produced)


def _unread_stream(url: str, credentials: Credentials, topic: str, max_bytes: int):
    """A stream opened on a socket with a small receive buffer, its headers read and nothing more."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.settimeout(DEADLINE_S)
    sock.connect((parts.hostname, parts.port))
    target = stream_path(topic) + "?" + urlencode({"offset": 0, "max_bytes": max_bytes})
    headers = {"host": parts.netloc, **signature_headers(credentials, "GET", target, b"")}
    request = f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock.sendall(request.encode())
    answer = http.client.HTTPResponse(sock, method="GET")
    answer.begin()
    assert answer.status == 200
    return answer, sock


class WithoutStreams(ThreadingHTTPServer):
    """A proxy in front of a gateway that answers the stream route as API Gateway in front of Lambda does (a 404
    of its own) and forwards every other request; counts the requests it forwards by route."""

    def __init__(self, target: str) -> None:
        self.target, self.forwarded, self.refused = urlsplit(target), [], 0
        super().__init__(("127.0.0.1", free_port()), _Forward)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        server: WithoutStreams = self.server  # type: ignore[assignment]
        if urlsplit(self.path).path.endswith("/stream"):
            server.refused += 1
            self._answer(404, {"content-type": "application/json"}, b'{"message":"Not Found"}')
            return
        server.forwarded.append(urlsplit(self.path).path)
        upstream = http.client.HTTPConnection(server.target.hostname, server.target.port, timeout=DEADLINE_S)
        try:
            upstream.request("GET", self.path, headers=dict(self.headers))
            answer = upstream.getresponse()
            self._answer(answer.status, dict(answer.getheaders()), answer.read())
        finally:
            upstream.close()

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_consumer_long_polls_where_the_server_offers_no_stream_and_remembers_it(gateway, admin, client):
    topic = unique("stream-fallback")
    admin.create_topic(topic, queues=2)
    produce(client, topic, 100)
    proxy = WithoutStreams(gateway.url)
    serving = threading.Thread(target=proxy.serve_forever, daemon=True)
    serving.start()
    try:
        with HttpClient(proxy.url) as through, Consumer(topic, client=through) as consumer:
            received = []
            while len(received) < 100:
                received += consumer.poll(wait_ms=1000)
            assert consumer.poll(wait_ms=100) == []
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert [m.body for m in received] == [f"m-{i}".encode() for i in range(100)]
    assert proxy.refused == 1  # asked once, then remembered
    assert any(path.endswith("/batch") for path in proxy.forwarded)
