"""docs/openapi.json says what the server enforces: each constraint the document declares accepts exactly what the
check behind it accepts (checked with jsonschema_rs, the validator Schemathesis uses, which reads patterns as
ECMA-262 does), and the API's JSON integers are JSON Schema's."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import jsonschema_rs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from functions.openapi import openapi_json
from tidemq_protocol.api.groups import OffsetCommit, PushSubscription
from tidemq_protocol.api.messages import MessageIn
from tidemq_protocol.api.topics import TopicSpec
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.filter import TagFilter
from tidemq_protocol.limits import MAX_QUEUES
from tidemq_protocol.names import check_name
from tidemq_protocol.push_target import push_target_kind
from tidemq_protocol.record import encode_properties

# Characters each check treats specially, mixed with any others.
SPECIAL = [*"aZ09_%|-*. :/@#?[]+=", "\t", "\n", "\x00", "\x01", "\x02", "\x1f", "\x85", "\xa0", "\u3000"]
text = st.text(st.sampled_from(SPECIAL) | st.characters(codec="utf-8"), max_size=40)


DOCUMENT = json.loads(openapi_json())


def component(name: str) -> dict:
    return DOCUMENT["components"]["schemas"][name]


def accepts(schema: dict, value: object) -> bool:
    return jsonschema_rs.validator_for(schema).is_valid(value)


def passes(check, *args) -> bool:
    try:
        check(*args)
    except (InvalidArgument, ValueError):
        return False
    return True


@given(st.text(st.sampled_from([*"aZ09_%|-", ".", " ", "\n", "é"]), max_size=130))
@example("x" * 127)
@example("x" * 128)
@example("orders\n")
def test_a_name_is_valid_in_the_document_exactly_when_the_store_takes_it(name):
    assert accepts(component("TopicSpec")["properties"]["name"], name) == passes(check_name, "topic", name)


@given(text)
@example("order 7")
@example("a\u3000b")
def test_a_message_key_is_valid_in_the_document_exactly_when_the_store_takes_it(key):
    schema = component("MessageIn")["properties"]["keys"]["items"]
    assert accepts(schema, key) == passes(encode_properties, (key,), None, {})


@given(text)
@example(" * ")
@example("a||b")
@example("paid ")
def test_a_message_tag_is_valid_in_the_document_exactly_when_the_store_takes_it(tag):
    schema = component("MessageIn")["properties"]["tag"]["anyOf"][0]
    assert accepts(schema, tag) == passes(encode_properties, (), tag, {})


@given(st.dictionaries(text, text, max_size=3))
@example({"KEYS": "x"})
@example({"": "x"})
@example({"a": "\x01"})
@example({"a": "\n"})
def test_user_properties_are_valid_in_the_document_exactly_when_the_store_takes_them(properties):
    schema = component("MessageIn")["properties"]["properties"]
    assert accepts(schema, properties) == passes(encode_properties, (), None, properties)


@given(text)
@example("a|||b")
@example("*|||x")
@example("a||||b")
@example(" || b")
@example("  ")
def test_a_tag_filter_is_valid_in_the_document_exactly_when_the_store_takes_it(expression):
    schema = component("PushSubscription")["properties"]["tag"]
    assert accepts(schema, expression) == passes(TagFilter.parse, expression)


@given(st.text(st.sampled_from([*"QUJD", "+", "/", "=", "-", " ", "\n"]), max_size=12))
@example("QQ")
@example("QQ==QQ==")
@example("DDDD=")  # the standard library's decoder takes a stray "=" after a whole quantum; RFC 4648 does not
def test_a_base64_body_is_valid_in_the_document_exactly_when_the_server_takes_it(body):
    message = {"body": body, "body_encoding": "base64"}
    valid = accepts(component("MessageIn"), message)
    assert valid == passes(MessageIn.model_validate, message)
    assert not valid or base64.b64decode(body, validate=True) is not None  # and what is valid decodes


def test_a_utf8_body_is_any_text():
    assert accepts(component("MessageIn"), {"body": "not base64 at all ==="})


@given(st.text(st.sampled_from([*"0123456789", "-", "+", " "]), max_size=5))
@example("1023")
@example("1024")
@example("007")
def test_a_queue_key_is_valid_in_the_document_exactly_when_a_commit_takes_it(key):
    schema = component("OffsetCommit")
    commit = {"topic": "orders", "offsets": {key: 5}}
    assert accepts(schema, commit) == passes(OffsetCommit.model_validate, commit)
    assert accepts(schema, commit) == (key in {str(queue) for queue in range(MAX_QUEUES)})


@given(
    st.one_of(
        st.builds("lambda:{}".format, text),
        st.builds("{}://{}".format, st.sampled_from(["http", "https", "HTTP"]), text),
        st.builds("python:{}".format, text),
        text,
    )
)
@example("lambda:billing:live")
@example("lambda:arn:aws:lambda:eu-west-1:123456789012:function:billing:$LATEST")
@example("https://user:secret@hooks.example.com:8443/orders?x=1#y")
@example("http://:80/")
@example("http://a@/")
@example("http://a:65535/")
@example("http://a:065536/")
@example("http://@\x00:01814970463521")
def test_a_push_target_valid_in_the_document_is_one_the_server_takes(target):
    if accepts(component("PushSubscription")["properties"]["target"], target):
        push_target_kind(target)


@pytest.mark.parametrize("value", [True, False, "3", None])
def test_an_integer_field_takes_no_boolean_or_text(value):
    with pytest.raises(ValidationError, match="valid integer"):
        TopicSpec.model_validate({"name": "orders", "queues": value})
    with pytest.raises(ValidationError, match="valid integer"):
        OffsetCommit.model_validate({"topic": "orders", "offsets": {"0": value}})


def test_an_integer_field_takes_a_number_without_a_fraction_as_json_schema_does():
    assert TopicSpec.model_validate({"name": "orders", "queues": 2.0}).queues == 2
    assert MessageIn.model_validate({"body": "x", "queue": 1.0}).queue == 1
    assert PushSubscription.model_validate({"topic": "t", "target": "lambda:f", "batch_size": 3.0}).batch_size == 3
    with pytest.raises(ValidationError):
        TopicSpec.model_validate({"name": "orders", "queues": 2.5})


def bounds(node: object) -> Iterator[float]:
    if isinstance(node, dict):
        yield from (value for key, value in node.items() if key in ("minimum", "maximum"))
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            yield from bounds(item)


def test_every_bound_in_the_document_is_an_integer_every_json_parser_reads_exactly():
    """A bound beyond 2**53 is rounded where JSON numbers are doubles: 2**63 - 1 would read as 2**63."""
    found = list(bounds(DOCUMENT))
    assert found and all(bound == int(bound) and abs(bound) <= 2**53 - 1 for bound in found)


ROUTING = st.one_of(st.none(), st.text(st.sampled_from("ab"), min_size=1, max_size=3))
TIMING = st.one_of(st.none(), st.integers(0, 10_000))


@given(
    st.fixed_dictionaries(
        {},
        optional={"sharding_key": ROUTING, "message_group": ROUTING, "delivery_time_ms": TIMING, "delay_ms": TIMING},
    )
)
@example({"message_group": None, "sharding_key": "k"})  # a null is a field left out (found by Schemathesis)
@example({"message_group": "g", "sharding_key": "k"})
@example({"delivery_time_ms": None, "delay_ms": 5})
def test_a_message_routed_and_timed_one_way_is_valid_in_the_document_exactly_when_the_server_takes_it(fields):
    message = {"body": "x", **fields}
    assert accepts(component("MessageIn"), message) == passes(MessageIn.model_validate, message)
