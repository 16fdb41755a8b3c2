"""Names, tag filters and topic configs follow RocketMQ's rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tidemq_protocol.attributes import (
    MAX_ATTRIBUTE_NAME_CHARS,
    MAX_ATTRIBUTE_VALUE_CHARS,
    MAX_ATTRIBUTES,
    MAX_ATTRIBUTES_BYTES,
)
from tidemq_protocol.errors import InvalidArgument, InvalidName
from tidemq_protocol.filter import TagFilter
from tidemq_protocol.names import check_name
from tidemq_store.model import TopicConfig


@pytest.mark.parametrize("name", ["a", "Orders_2024", "%DLQ%group", "a|b-c", "x" * 127])
def test_valid_names_pass(name):
    assert check_name("topic", name) == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [("", "empty"), ("x" * 128, "128 characters"), ("a b", "' '"), ("topic.1", "'.'"), ("a@b", "'@'"), (7, "string")],
)
def test_invalid_names_say_what_is_wrong(name, problem):
    with pytest.raises(InvalidName, match=problem):
        check_name("topic", name)


def test_tag_filters():
    assert TagFilter.parse(None) is None and TagFilter.parse("*") is None and TagFilter.parse(" ") is None
    tag_filter = TagFilter.parse("TagA || TagB")
    assert tag_filter.matches("TagA") and tag_filter.matches("TagB")
    assert not tag_filter.matches("TagC") and not tag_filter.matches(None)
    for bad in ["A ||", "|| B", "A || *"]:
        with pytest.raises(InvalidArgument):
            TagFilter.parse(bad)


def test_topic_config_validates_its_fields():
    with pytest.raises(ValidationError):
        TopicConfig(name="bad name")
    with pytest.raises(ValidationError):
        TopicConfig(name="t", queues=0)
    with pytest.raises(ValidationError):
        TopicConfig(name="t", retention_ms=10)
    assert TopicConfig(name="t", retention_ms=None).retention_ms is None


def test_the_largest_attributes_allowed_fit_in_one_dynamodb_item_with_room_to_spare():
    widest = "\U0001f600"  # 4 bytes in UTF-8, the most a character takes
    largest = {
        f"{i:02d}".ljust(MAX_ATTRIBUTE_NAME_CHARS, widest): widest * MAX_ATTRIBUTE_VALUE_CHARS
        for i in range(MAX_ATTRIBUTES)
    }
    config = TopicConfig(name="t" * 127, attributes=largest)
    assert len(config.model_dump_json().encode()) <= MAX_ATTRIBUTES_BYTES + 1024 < 400_000 // 8
    with pytest.raises(ValidationError, match="at most 32 items"):
        TopicConfig(name="t", attributes={**largest, "one more": ""})
