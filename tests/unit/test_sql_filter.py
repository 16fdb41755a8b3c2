"""The SQL92 filter (tidemq_protocol.filter): RocketMQ's semantics, table-driven (tests/sql_filter_table.py), on
decoded messages and on records as stored; the refusals and their positions; what a record must hold to be
selected (`needles`), which reads rely on to pass over records unevaluated."""

from __future__ import annotations

import pytest

from tidemq_protocol.errors import CorruptStore, InvalidArgument, InvalidFilterExpression
from tidemq_protocol.filter import SqlFilter, TagFilter, message_filter, selected_records, subscription_filter
from tidemq_protocol.message import Message, StoredMessage
from tidemq_protocol.record import (
    PropertiesView,
    decode_records,
    encode_properties,
    encode_stored,
    properties_at,
    property_map,
    queue_offset_at,
    record_starts,
    v1,
)

from ..sql_filter_table import MESSAGES, REFUSED, SELECTS, selected_names


def stored(name: str, offset: int) -> StoredMessage:
    message = MESSAGES[name]
    return StoredMessage(
        "t", 0, offset, f"{offset:024x}", 1, 2, message.body, message.keys, message.tag, dict(message.properties)
    )


def run_of(messages: dict[str, Message]) -> bytes:
    """The messages as a run of stored records, back to back, as a read reads them."""
    parts, position = [], 0
    for offset, message in enumerate(messages.values()):
        properties = encode_properties(message.keys, message.tag, message.properties)
        parts.append(encode_stored(b"t", 0, offset, position, 2, 1, properties, message.body))
        position += len(parts[-1])
    return b"".join(parts)


@pytest.mark.parametrize(("expression", "expected"), SELECTS, ids=[row[0] for row in SELECTS])
def test_each_expression_selects_the_messages_rocketmq_selects(expression, expected):
    sql = SqlFilter.parse(expression)
    decoded = [stored(name, offset) for offset, name in enumerate(MESSAGES)]
    assert selected_names([m for m in decoded if sql.accepts(m)]) == expected

    data = run_of(MESSAGES)  # the same, on the records as stored, without decoding them
    records = b"".join(data[start:end] for start, end in selected_records(data, sql))
    assert selected_names(decode_records(records)) == expected


def test_the_table_holds_more_than_forty_expressions_and_every_message_is_told_apart():
    assert len(SELECTS) >= 40
    assert len({expected for _, expected in SELECTS}) >= 25


@pytest.mark.parametrize(("expression", "position"), REFUSED, ids=[row[0] for row in REFUSED])
def test_a_bad_expression_is_refused_when_parsed_naming_where_it_goes_wrong(expression, position):
    with pytest.raises(InvalidFilterExpression) as refused:
        SqlFilter.parse(expression)
    assert refused.value.position == position
    assert f"at position {position}" in str(refused.value) and isinstance(refused.value, InvalidArgument)


def test_an_expression_too_long_or_nested_too_deep_is_refused():
    with pytest.raises(InvalidFilterExpression, match="longer than 4096"):
        SqlFilter.parse("a = 1 OR " * 500 + "a = 2")
    with pytest.raises(InvalidFilterExpression, match="nests deeper than 64"):
        SqlFilter.parse("NOT " * 100 + "a = 1")
    assert SqlFilter.parse(" OR ".join(f"a = {n}" for n in range(300))).accepts(stored("ten", 0))  # long, flat


@pytest.mark.parametrize(("expression", "expected"), SELECTS, ids=[row[0] for row in SELECTS])
def test_every_message_an_expression_selects_holds_one_of_its_needles(expression, expected):
    sql = SqlFilter.parse(expression)
    if sql.needles is None:
        return
    for name in expected:
        message = MESSAGES[name]
        encoded = encode_properties(message.keys, message.tag, message.properties)
        assert any(needle in encoded for needle in sql.needles), (name, sql.needles)


def test_needles_name_the_value_of_an_equality_and_nothing_when_a_missing_property_can_match():
    assert SqlFilter.parse("region = 'eu'").needles == {b"region\x01eu\x02"}
    assert SqlFilter.parse("a IN ('x', 'y') AND b > 1").needles == {b"a\x01x\x02", b"a\x01y\x02"}
    assert SqlFilter.parse("a > 1 OR b STARTSWITH 'p'").needles == {b"a\x01", b"b\x01p"}
    assert SqlFilter.parse("NOT a = 1").needles == {b"a\x01"}
    assert SqlFilter.parse("a IS NULL").needles is None
    assert SqlFilter.parse("NOT b CONTAINS 'x'").needles is None
    assert SqlFilter.parse("FALSE").needles == frozenset()


def test_a_records_properties_read_where_they_lie_are_its_decoded_properties():
    data = run_of(MESSAGES)
    messages = decode_records(data)
    assert len(record_starts(data)) == len(messages) == len(MESSAGES)
    for position, message in zip(record_starts(data), messages, strict=True):
        view = PropertiesView(data, *properties_at(data, position))
        expected = property_map(message.keys, message.tag, message.properties)
        for name in ("a", "b", "c", "d", "flag", "region", "missing", "TAGS", "KEYS", "egion", "a\x01"):
            assert view.get(name) == expected.get(name), (message.body, name)
        assert queue_offset_at(data, position) == message.queue_offset


def test_a_view_cut_before_its_last_separator_reads_its_last_value_to_the_end():
    properties = encode_properties((), None, {"a": "1", "b": "22"})
    assert PropertiesView(properties, 0, len(properties) - 1).get("b") == "22"
    assert PropertiesView(properties, 2, len(properties)).get("a") is None  # only what lies in [start, end) is read


def test_records_whose_sizes_do_not_tile_what_was_read_are_refused():
    data = run_of(MESSAGES)
    with pytest.raises(CorruptStore):
        record_starts(data[:-1])
    with pytest.raises(CorruptStore):
        record_starts(data + b"\x00" * 10)


def test_a_version_1_records_properties_are_found_where_version_1_lays_them_out():
    record = bytearray(v1.HEADER_SIZE) + b"t" + b"a\x015\x02" + b"body"
    v1.HEADER.pack_into(record, 0, len(record), v1.MAGIC, 0, 0, 0, 0, 0, 0, 0, 1, 4, 4)
    start, end = properties_at(bytes(record))
    assert PropertiesView(bytes(record), start, end).get("a") == "5"


def test_a_subscription_filters_by_tag_or_by_sql_never_both():
    assert subscription_filter() is None and subscription_filter(tag="*") is None
    assert subscription_filter(tag="A || B") == TagFilter(frozenset({"A", "B"}))
    assert subscription_filter(sql="a = 1") == SqlFilter.parse("a = 1")
    with pytest.raises(InvalidArgument, match="not both"):
        subscription_filter(tag="A", sql="a = 1")
    assert message_filter("A") == TagFilter(frozenset({"A"})) and message_filter(None) is None


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("amount = 5", {"five"}),
        ("amount = '5'", {"five"}),
        ("amount < 10", {"five"}),
        ("amount IN ('5', '50')", {"five", "fifty"}),
        ("amount = 5 OR region = 'eu'", {"five"}),
        ("amount = 50 AND region IS NULL", {"fifty"}),
    ],
)
def test_a_needle_in_a_body_or_at_the_end_of_a_longer_name_selects_nothing(expression, expected):
    decoy = b"amount\x015\x02"  # what a selected record's properties hold, in bodies and longer names
    messages = {
        "body": Message(decoy * 3, properties={"amount": "500"}),
        "name": Message(b"name", properties={"xamount": "5", "amount": "77"}),
        "five": Message(b"five " + decoy, properties={"amount": "5"}),
        "fifty": Message(decoy + b"fifty", properties={"xamount": "5", "amount": "50"}),
        "none": Message(decoy),
    }
    data = run_of(messages)
    sql = SqlFilter.parse(expression)
    chosen = decode_records(b"".join(data[start:end] for start, end in selected_records(data, sql)))
    assert {m.body.replace(decoy, b"").strip().decode() or "?" for m in chosen} == expected
