"""Every input is bounded before it costs much: each bound refused with a 4xx that says which, changing nothing,
through a real gateway process, each backend (docs/http-api.md: Limits)."""

from __future__ import annotations

import json
import struct
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.gateways import (
    each_dispatch,  # noqa: F401 (a fixture: this suite runs under both dispatches)
    gateway_as_admin,
)
from tests.raw_requests import RawApi
from tidemq import Admin, Producer
from tidemq_protocol import codec
from tidemq_protocol.api.topics import TopicChange
from tidemq_protocol.attributes import MAX_ATTRIBUTE_NAME_CHARS, MAX_ATTRIBUTE_VALUE_CHARS, MAX_ATTRIBUTES
from tidemq_protocol.limits import MIB
from tidemq_protocol.message import Message
from tidemq_protocol.record import MAX_PROPERTIES

LIMIT = 6 * MIB  # TIDEMQ_MAX_REQUEST_BYTES's default, which the gateway fixture keeps
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def raw(gateway) -> Iterator[RawApi]:
    api = RawApi(gateway.url)
    yield api
    api.close()


@pytest.fixture(scope="module")
def admin(gateway) -> Iterator[Admin]:
    with Admin(gateway.url) as admin:
        yield admin


@pytest.fixture
def topic(admin) -> str:
    """A fresh topic of 2 queues holding one message in queue 0."""
    name = f"bounds-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, queues=2)
    with Producer(name, admin._client.url) as producer:
        producer.send("first", queue=0)
    return name


def stored(admin: Admin, topic: str) -> list[tuple[int, int]]:
    return [(q.min_offset, q.max_offset) for q in admin.describe_topic(topic).queue_offsets]


def error_of(body: bytes) -> tuple[str, str]:
    parsed = json.loads(body)
    return parsed["error"], parsed["message"]


# ---- request bodies ------------------------------------------------------------------------------


def test_a_body_declared_larger_than_the_limit_is_refused_before_any_of_it_is_sent(raw, admin, topic):
    declared = {**JSON, "Content-Length": str(LIMIT + 1)}
    with raw.upload("POST", f"/v1/topics/{topic}/messages", declared) as upload:
        assert upload.answered(wait_s=30)  # nothing of the body sent yet
        status, headers, body = upload.response()
    assert (status, upload.sent, headers["connection"]) == (413, 0, "close")
    assert error_of(body) == ("RequestTooLarge", f"the request body is {LIMIT + 1} bytes; the limit is {LIMIT}")
    assert stored(admin, topic) == [(0, 1), (0, 0)]


def test_a_body_is_refused_as_it_arrives_once_past_the_limit_long_before_it_ends(raw, admin, topic):
    planned, piece = 8 * LIMIT, b'{"messages": [{"body": "' + b"x" * (256 * 1024)
    with raw.upload("POST", f"/v1/topics/{topic}/messages", {**JSON, "Transfer-Encoding": "chunked"}) as upload:
        while upload.sent < planned and not upload.answered() and upload.send(piece, chunked=True):
            pass
        status, _, body = upload.response()
    assert status == 413 and error_of(body)[0] == "RequestTooLarge"
    assert LIMIT < upload.sent < planned // 2  # answered once past the limit, long before the client was done
    assert stored(admin, topic) == [(0, 1), (0, 0)]


def test_a_json_body_that_is_not_utf8_is_a_400_and_nothing_is_stored(raw, admin, topic):
    body = b'{"messages": [{"body": "caf\xe9 is latin-1", "queue": 1}]}'
    response = raw.request("POST", f"/v1/topics/{topic}/messages", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "InvalidArgument" and "not valid UTF-8" in response.json()["message"]
    assert stored(admin, topic) == [(0, 1), (0, 0)]


@pytest.mark.parametrize("depth", [33, 100_000])
def test_json_nested_too_deep_is_a_400_and_never_a_500(raw, admin, topic, depth):
    nested = "[" * depth + "]" * depth
    for path, body in (
        (f"/v1/topics/{topic}/messages", f'{{"messages": {nested}}}'),
        ("/v1/topics", f'{{"name": "deep-{depth}", "attributes": {nested}}}'),
    ):
        response = raw.request("POST", path, content=body.encode(), headers=JSON)
        assert response.status_code == 400, response.text
        assert response.json()["message"] == "the JSON body is nested more than 32 levels deep"
    assert stored(admin, topic) == [(0, 1), (0, 0)]
    assert f"deep-{depth}" not in {t.name for t in admin.iter_topics()}


# ---- binary batches ------------------------------------------------------------------------------


def malformed_frame() -> bytes:
    """A frame whose properties are not UTF-8: refused as malformed if it were decoded."""
    properties = b"\xff\xfe"
    return struct.pack("<IiHI", 2 + 4 + 4 + len(properties), 1, 0, len(properties)) + properties


def post_batch(raw: RawApi, topic: str, batch: bytes):
    return raw.request("POST", f"/v1/topics/{topic}/batch", content=batch, headers={"content-type": codec.CONTENT_TYPE})


def test_a_binary_batch_of_too_many_frames_is_refused_from_its_headers_before_any_is_decoded(raw, admin, topic):
    frames = [Message(b"", queue=1)] * 1000
    response = post_batch(raw, topic, malformed_frame() + codec.encode_produce((m, None) for m in frames))
    assert response.status_code == 400, response.text  # InvalidBatch, not frame 0's malformed properties
    assert response.json() == {
        "error": "InvalidBatch",
        "message": "a batch holds at most 1000 messages; this one holds more",
    }
    assert stored(admin, topic) == [(0, 1), (0, 0)]


def test_a_binary_batch_frame_claiming_more_than_a_message_may_hold_is_a_413_before_decoding(raw, admin, topic):
    claims_5_mib = struct.pack("<IiHI", 5 * MIB, 1, 0, 0) + b"body the frame does not hold"
    response = post_batch(raw, topic, malformed_frame() + claims_5_mib)
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "MessageTooLarge" and "message 1 is" in response.json()["message"]
    assert stored(admin, topic) == [(0, 1), (0, 0)]


# ---- attributes and properties -------------------------------------------------------------------


def attributes(count: int = MAX_ATTRIBUTES, name: int = MAX_ATTRIBUTE_NAME_CHARS, value: int = 256) -> dict:
    return {f"{i:02d}".ljust(name, "n"): "v" * value for i in range(count)}


TOO_MUCH = {
    "one attribute too many": attributes(count=MAX_ATTRIBUTES + 1),
    "a name too long": attributes(count=1, name=MAX_ATTRIBUTE_NAME_CHARS + 1),
    "a value too long": attributes(count=1, value=MAX_ATTRIBUTE_VALUE_CHARS + 1),
    "an empty name": {"": "v"},
    "the 3 MB map of the finding": {f"k{i}": "v" * 30 for i in range(100_000)},
}


@pytest.mark.parametrize("given", TOO_MUCH.values(), ids=TOO_MUCH.keys())
def test_attributes_over_their_bounds_are_a_422_naming_the_field_and_nothing_is_stored(raw, admin, topic, given):
    name = f"attrs-{uuid.uuid4().hex[:8]}"
    for method, path, body in (
        ("POST", "/v1/topics", {"name": name, "attributes": given}),
        ("PATCH", f"/v1/topics/{topic}", {"attributes": given}),
        ("POST", "/v1/groups", {"name": name, "attributes": given}),
    ):
        response = raw.request(method, path, json=body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][:2] == ["body", "attributes"]
    assert admin.describe_topic(topic).attributes == {}
    assert name not in {t.name for t in admin.iter_topics()} | {g.name for g in admin.iter_groups()}


BAD_POLICY = {
    "an unknown cleanup policy": ({"cleanup.policy": "compact"}, "cleanup.policy='compact' must be one of DELETE"),
    "a grace that is not a number": (
        {"cleanup.policy": "COMPACTION", "compaction.tombstone_grace_ms": "1d"},
        "compaction.tombstone_grace_ms='1d' must be a number of milliseconds",
    ),
    "an unknown storage class": ({"tier.storage_class": "GLACIER"}, "tier.storage_class='GLACIER' must be one of"),
    "a negative age": ({"tier.storage_class_after_ms": "-1"}, "tier.storage_class_after_ms='-1' must be a number"),
}


@pytest.mark.parametrize(("given", "says"), BAD_POLICY.values(), ids=BAD_POLICY.keys())
def test_an_attribute_tidemq_reads_with_a_bad_value_is_a_422_saying_so_and_nothing_is_stored(
    raw, admin, topic, given, says
):
    name = f"attrs-{uuid.uuid4().hex[:8]}"
    for method, path, body in (
        ("POST", "/v1/topics", {"name": name, "attributes": given}),
        ("PATCH", f"/v1/topics/{topic}", {"attributes": given}),
    ):
        response = raw.request(method, path, json=body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"][:2] == ["body", "attributes"]
        assert says in response.json()["detail"][0]["msg"]
    assert admin.describe_topic(topic).attributes == {}
    assert name not in {t.name for t in admin.iter_topics()}
    good = {"cleanup.policy": "COMPACTION", "tier.storage_class": "GLACIER_IR", "tier.storage_class_after_ms": "0"}
    assert admin.change_topic(topic, TopicChange(attributes=good)).attributes == good


def test_the_largest_attributes_allowed_are_taken(admin):
    name = f"attrs-{uuid.uuid4().hex[:8]}"
    assert admin.create_topic(name, attributes=attributes()).attributes == attributes()
    assert admin.create_group(name, attributes=attributes()).attributes == attributes()


def test_a_message_with_more_properties_than_allowed_is_a_400_and_nothing_is_stored(raw, admin, topic):
    properties = {f"p{i}": "v" for i in range(MAX_PROPERTIES + 1)}
    response = raw.request(
        "POST", f"/v1/topics/{topic}/messages", json={"messages": [{"body": "x", "properties": properties}]}
    )
    assert response.status_code == 400, response.text
    assert response.json()["message"] == f"message 0: a message has at most {MAX_PROPERTIES} properties, got 129"
    assert stored(admin, topic) == [(0, 1), (0, 0)]


# ---- listings and lookups ------------------------------------------------------------------------


def test_a_page_of_topics_or_groups_is_bounded_in_bytes_and_paging_still_finds_every_one(raw, admin):
    prefix = f"page-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i:03d}" for i in range(110)]  # ~10.5 KB of config each: over the 1 MiB page
    for name in names:
        admin.create_topic(name, queues=1, attributes=attributes())
        admin.create_group(name, attributes=attributes())
    for path, key in (("/v1/topics", "topics"), ("/v1/groups", "groups")):
        seen, after, pages = [], None, 0
        while True:
            response = raw.request("GET", path, params={"limit": 1000, **({"after": after} if after else {})})
            assert response.status_code == 200 and len(response.content) < MIB + 16 * 1024
            page = response.json()
            seen += [item["name"] for item in page[key]]
            pages += 1
            after = page["next_after"]
            if after is None:
                break
        assert pages >= 2 and [name for name in seen if name.startswith(prefix)] == names
    assert [t.name for t in admin.iter_topics() if t.name.startswith(prefix)] == names  # the SDK pages the same


def test_a_forged_message_id_is_a_404(raw, admin, topic):
    with Producer(topic, admin._client.url) as producer:
        sent = producer.send("findable", queue=1)
    assert admin.message(sent.msg_id).body == "findable"
    position, size = int(sent.msg_id[:16], 16), int(sent.msg_id[16:], 16)
    forged = [
        f"{position:016x}{0xFFFFFFFF:08x}",  # the largest size an id can claim
        f"{position:016x}{size + 1:08x}",  # the right place, the wrong size
        f"{position + 1:016x}{size - 1:08x}",  # inside the record
        f"{0:016x}{48 * MIB:08x}",  # 48 MB from the start of the log
    ]
    for msg_id in forged:
        response = raw.request("GET", f"/v1/messages/{msg_id}")
        assert response.status_code == 404, (msg_id, response.text)
        assert response.json()["error"] == "MessageNotFound"


# ---- long polls ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["embedded", "serverless"])
def test_with_200_long_polls_waiting_health_and_a_produce_answer_at_once(tmp_path, backend):
    with gateway_as_admin(tmp_path / "data", TIDEMQ_BACKEND=backend, TIDEMQ_GATEWAY_LONG_POLLS="200") as url:
        raw = RawApi(url)
        path = "/v1/topics/polled/queues/{}/messages"

        def long_poll(queue: int):
            """Wait up to 20 s for a message (sent again when refused, as the SDK does with a 503)."""
            while True:
                response = raw.request("GET", path.format(queue), params={"wait_ms": 20_000}, timeout=60)
                if response.status_code != 503:
                    return response
                time.sleep(0.05)

        with Admin(url) as admin, Producer("polled", url) as producer, ThreadPoolExecutor(200) as pool:
            admin.create_topic("polled", queues=4)
            polls = [pool.submit(long_poll, i % 4) for i in range(200)]
            # Probe, one at a time, until the gateway is at its bound: then the 200 in flight are the 200 polls.
            while (probe := raw.request("GET", path.format(0), params={"wait_ms": 1})).status_code == 200:
                assert not any(poll.done() for poll in polls)  # no poll ends before a message arrives
            assert probe.status_code == 503 and probe.headers["retry-after"] == "1"
            assert probe.json()["error"] == "Overloaded"

            assert raw.request("GET", "/health").json()["status"] == "ok"
            assert producer.send("to queue 0", queue=0).offset == 0
            assert not any(poll.done() for i, poll in enumerate(polls) if i % 4)  # answered while they waited

            for queue in (1, 2, 3):
                producer.send(f"to queue {queue}", queue=queue)
            answers = [poll.result() for poll in polls]  # each woke up with the message of its queue
            assert [[m["body"] for m in r.json()["messages"]] for r in answers] == [
                [f"to queue {i % 4}"] for i in range(200)
            ]
        raw.close()


# ---- records (the produce body the store appends as it is) --------------------------------------


def post_records(raw: RawApi, topic: str, records: bytes):
    headers = {"content-type": codec.RECORDS_CONTENT_TYPE}
    return raw.request("POST", f"/v1/topics/{topic}/batch", content=records, headers=headers)


def test_records_with_a_changed_byte_are_a_400_naming_the_record_and_store_nothing(raw, admin, topic):
    records = codec.encode_records(topic, [Message(b"a" * 100, 0, ("k",), "T"), Message(b"b" * 100, 1)])
    first = int.from_bytes(records[:4], "little")
    for position in (5, 12, 30, 36, 40, 45, 60, first - 1, first + 8, len(records) - 1):  # header, CRCs, body
        damaged = bytearray(records)
        damaged[position] ^= 0x10
        response = post_records(raw, topic, bytes(damaged))
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "InvalidArgument"
        assert f"record {0 if position < first else 1} " in response.json()["message"]
    assert stored(admin, topic) == [(0, 1), (0, 0)]
    response = post_records(raw, topic, records)
    assert response.status_code == 200, response.text
    assert [line.split()[1:] for line in response.text.splitlines()] == [[q, o] for q, o in (("0", "1"), ("1", "0"))]


def test_records_for_another_topic_or_queue_are_refused(raw, admin, topic):
    response = post_records(raw, topic, codec.encode_records("elsewhere", [Message(b"x", 0)]))
    assert response.status_code == 400 and "another topic" in response.json()["message"], response.text
    response = post_records(raw, topic, codec.encode_records(topic, [Message(b"x", 7)]))
    assert response.status_code == 409 and response.json()["error"] == "QueueOutOfRange", response.text
    assert stored(admin, topic) == [(0, 1), (0, 0)]
