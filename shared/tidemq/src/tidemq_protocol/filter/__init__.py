"""What a subscription selects of a topic's messages: RocketMQ's filter expression, of one of its two types.

    tag.py   FilterType.TAG: `*`, or tags joined by `||` (`TagFilter`), chosen by the ConsumeQueue's tag codes
    sql.py   FilterType.SQL92: an expression over message properties (`SqlFilter`), evaluated on each record
    records.py  a SQL92 filter over records as stored (`selected_records`), without decoding them

A subscription carries one or the other, never both (`subscription_filter`). The broker, the SDK (which checks
an expression before it sends it) and the Spark jobs all read filters through this package.
"""

from __future__ import annotations

from ..errors import InvalidArgument
from .records import selected_records
from .sql import MAX_EXPRESSION_LENGTH, SqlFilter
from .tag import TagFilter

MessageFilter = TagFilter | SqlFilter
"""A subscription's filter; where one is optional, None selects every message."""


def one_filter(tag: str | None, sql: str | None) -> None:
    """InvalidArgument (a ValueError: a 422 in a body) when a subscription gives both a SQL92 expression and a tag
    filter that filters (not blank or `*`): RocketMQ's subscription has one filter type."""
    if sql is not None and tag is not None and tag.strip() not in ("", "*"):
        raise InvalidArgument("a subscription filters by tag or by SQL92 expression, not both: give tag or sql")


def subscription_filter(tag: str | None = None, sql: str | None = None) -> MessageFilter | None:
    """The filter a subscription asks for with a tag expression or a SQL92 expression (None: every message);
    InvalidArgument for both (`one_filter`), InvalidFilterExpression for an expression that does not parse."""
    one_filter(tag, sql)
    return TagFilter.parse(tag) if sql is None else SqlFilter.parse(sql)


def message_filter(expression: str | MessageFilter | None) -> MessageFilter | None:
    """A filter as the store's reads take one: a filter, a tag expression (a string, RocketMQ's default type), or
    None (every message)."""
    if expression is None or isinstance(expression, str):
        return TagFilter.parse(expression)
    return expression


__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "MessageFilter",
    "SqlFilter",
    "TagFilter",
    "message_filter",
    "one_filter",
    "selected_records",
    "subscription_filter",
]
