"""RocketMQ's SQL92 filter semantics as a table: messages with chosen properties, and for each expression the
messages it selects. The unit tests evaluate it on decoded messages and on records as stored; the integration
tests read it from a store, hot and cold, on both backends (tests/unit/test_sql_filter.py,
tests/integration/test_sql_filter_reads.py).

The expected sets follow RocketMQ's filter module (apache/rocketmq `filter/`: ComparisonExpression,
LogicExpression, UnaryExpression, ExpressionTest): values are strings, read as the number they are compared with
(an integer constant reads an integer: `3.0` is a type mismatch; a decimal one a double); a missing property makes a
comparison unknown, which NOT keeps unknown and AND / OR combine three-valued; a type mismatch ends the evaluation
(nothing selected), terms being evaluated left to right as RocketMQ does; CONTAINS and its kin are false on a
missing property. Precedence: OR < AND < NOT < comparisons.
"""

from __future__ import annotations

from tidemq_protocol.message import Message

MESSAGES: dict[str, Message] = {
    "none": Message(b"none"),
    "one": Message(b"one", keys=("k1",), tag="TagA", properties={"a": "1", "b": "hello"}),
    "five": Message(b"five", tag="TagB", properties={"a": "5", "b": "world", "c": "3.5"}),
    "ten": Message(b"ten", properties={"a": "10", "b": "hello world", "c": "abc", "flag": "true"}),
    "text": Message(b"text", properties={"a": "abc", "b": "it's", "flag": "TRUE"}),
    "neg": Message(b"neg", properties={"a": "-3", "c": "1e3", "d": "5", "flag": "false", "region": "eu"}),
    "zeros": Message(b"zeros", properties={"a": "007", "b": "", "region": "us"}),
    "decimal": Message(
        b"decimal", keys=("k1", "k2"), tag="TagA", properties={"a": "3.0", "b": "hello", "region": "eu"}
    ),
}
"""Each message's body is its name."""

EVERY = frozenset(MESSAGES)
WITH_A = EVERY - {"none"}

SELECTS: list[tuple[str, frozenset[str]]] = [
    # comparisons with numbers: the value read as the constant's type, a mismatch selects nothing
    ("a = 5", frozenset({"five"})),
    ("a <> 5", frozenset({"one", "ten", "neg", "zeros"})),
    ("a > 3", frozenset({"five", "ten", "zeros"})),
    ("a > 3.0", frozenset({"five", "ten", "zeros"})),
    ("a >= 3.0", frozenset({"five", "ten", "zeros", "decimal"})),
    ("a < 0", frozenset({"neg"})),
    ("a <= 1", frozenset({"one", "neg"})),
    ("a = 7", frozenset({"zeros"})),
    ("a > -4 AND a < -2", frozenset({"neg"})),
    ("c > 1", frozenset()),  # 3.5, 1e3 and abc are no integers
    ("c > 1.0", frozenset({"five", "neg"})),
    ("c > a", frozenset({"neg"})),  # two properties: read as doubles (five: 3.5 < 5; ten: abc)
    ("d = 5 AND d = 5.0", frozenset({"neg"})),
    # BETWEEN: >= AND <=; NOT BETWEEN: < OR >
    ("a BETWEEN 1 AND 5", frozenset({"one", "five"})),
    ("a NOT BETWEEN 1 AND 5", frozenset({"ten", "neg", "zeros"})),
    ("a BETWEEN 2.5 AND 3.5", frozenset({"decimal"})),
    # strings
    ("a = '5'", frozenset({"five"})),
    ("a = '007'", frozenset({"zeros"})),
    ("a = '7'", frozenset()),
    ("b = 'it''s'", frozenset({"text"})),
    ("b = ''", frozenset({"zeros"})),
    ("region = 'eu'", frozenset({"neg", "decimal"})),
    ("region <> 'eu'", frozenset({"zeros"})),  # the others have no region: unknown
    # IN
    ("a IN ('1', '10')", frozenset({"one", "ten"})),
    ("a NOT IN ('1', '10')", frozenset({"five", "text", "neg", "zeros", "decimal"})),
    ("a IN ('abc') AND flag = TRUE", frozenset({"text"})),
    # IS NULL: never unknown
    ("a IS NULL", frozenset({"none"})),
    ("a IS NOT NULL", WITH_A),
    ("region IS NULL OR region = 'eu'", EVERY - {"zeros"}),
    ("missing IS NULL AND a = 10", frozenset({"ten"})),
    # booleans: a value is true when it is `true` in any case
    ("flag = TRUE", frozenset({"ten", "text"})),
    ("flag = FALSE", frozenset({"neg"})),
    ("flag <> TRUE", frozenset({"neg"})),
    ("TRUE", EVERY),
    ("FALSE", frozenset()),
    # tags and keys are properties too (KEYS: the keys joined by spaces)
    ("TAGS = 'TagA'", frozenset({"one", "decimal"})),
    ("TAGS IN ('TagA', 'TagB')", frozenset({"one", "five", "decimal"})),
    ("KEYS = 'k1'", frozenset({"one"})),
    ("KEYS CONTAINS 'k2'", frozenset({"decimal"})),
    # CONTAINS, STARTSWITH, ENDSWITH: false on a missing property, NOT or not
    ("b CONTAINS 'hello'", frozenset({"one", "ten", "decimal"})),
    ("b NOT CONTAINS 'hello'", frozenset({"five", "text", "zeros"})),
    ("NOT b CONTAINS 'hello'", frozenset({"none", "five", "text", "neg", "zeros"})),
    ("b STARTSWITH 'hello'", frozenset({"one", "ten", "decimal"})),
    ("b NOT STARTSWITH 'hello'", frozenset({"five", "text", "zeros"})),
    ("b ENDSWITH 'world'", frozenset({"five", "ten"})),
    ("b CONTAINS ''", frozenset()),
    # missing properties: unknown, and NOT unknown is unknown
    ("missing = 1", frozenset()),
    ("NOT missing = 1", frozenset()),
    ("missing = 1 OR a = 5", frozenset({"five"})),
    ("A = 5", frozenset()),  # names are case-sensitive; keywords are not
    ("a = 5 and B is null", frozenset({"five"})),
    ("NOT (a = 10 AND b STARTSWITH 'hello')", frozenset({"none", "one", "five", "neg", "zeros"})),
    # precedence: OR < AND < NOT < comparisons
    ("a = 1 OR a = 5 AND b = 'world'", frozenset({"one", "five"})),
    ("(a = 1 OR a = 5) AND b = 'world'", frozenset({"five"})),
    ("NOT a = 10 AND b STARTSWITH 'hello'", frozenset({"one"})),
    ("NOT NOT a = 1", frozenset({"one"})),
    # a type mismatch ends the evaluation, left to right
    ("a = 1 OR region = 'eu'", frozenset({"one", "neg"})),  # decimal: 3.0 is no integer, before its region
    ("region = 'eu' OR a = 1", frozenset({"one", "neg", "decimal"})),  # decimal: selected before a is read
    # comments and layout
    ("a = 5 -- the fives\n", frozenset({"five"})),
    ("/* a comment */ a\t=\n5", frozenset({"five"})),
]

REFUSED: list[tuple[str, int]] = [
    ("", 0),
    ("a > 5 OR", 8),
    ("a >> 5", 3),
    ("(a = 1", 6),
    ("a = 1)", 5),
    ("a", 0),  # a property alone is no condition
    ("'x'", 0),
    ("a = NULL", 4),
    ("a > 'x'", 4),
    ("a > TRUE", 4),
    ("'a' = 1", 0),
    ("TRUE = 1", 0),
    ("a BETWEEN 5 AND 1", 10),
    ("a BETWEEN NULL AND 1", 10),
    ("a IN ()", 6),
    ("'a' IN ('a')", 0),
    ("a = 99999999999999999999", 4),
    ("a = 1e999", 4),
    ("a # 1", 2),
    ("and = 1", 0),
    ("a = 'open", 4),
    ("a CONTAINS b", 11),
    ("(a = 1) = TRUE", 8),
]
"""Expressions refused when they are parsed, and the position (0-based) each refusal names."""


def selected_names(messages: list) -> set[str]:
    """The names of the messages read (their bodies)."""
    return {message.body.decode() for message in messages}
