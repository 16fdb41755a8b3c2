"""How a parsed SQL92 expression (expression.py) is evaluated, and what a message must hold to be selected.

`compile_condition` makes the expression a function of a message's properties (a dict, or a record's
`record.PropertiesView`: anything with `get(name)`), with RocketMQ's semantics (sql.py's docstring says them):
values read as the constant they are compared with, three-valued logic for missing properties, and a type mismatch
(`Mismatch`) ending the evaluation. `needles` derives from the expression what the encoded properties of a message
it selects must hold (filter/records.py finds them with `bytes.find` before evaluating anything).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from .expression import (
    BooleanConstant,
    Comparison,
    Constant,
    Expression,
    InList,
    IsNull,
    Literal,
    Logic,
    Not,
    Property,
    TextTest,
    Value,
)

_DECIMAL_TEXT = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class Properties(Protocol):
    """What a filter reads a message's properties through: a dict (`property_map`) or a record's
    `record.PropertiesView`."""

    def get(self, name: str, /) -> str | None: ...


Truth = bool | None
"""A condition's value: true, false, or unknown (None: SQL's NULL, from a missing property)."""
Condition = Callable[[Properties], Truth]
Needles = frozenset[bytes] | None
"""What a condition's outcome needs in a message's encoded properties: one of these byte strings (an empty set:
it never has that outcome), or None: nothing is known."""


class Mismatch(Exception):
    """A value is not of the type it is compared with: the evaluation ends, and the filter selects nothing."""


def _as_integer(text: str) -> int:
    """A property read as an integer constant reads it (Java's Long.valueOf): a sign, ASCII digits, 64 bits."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if digits.isdigit() and digits.isascii():
        number = int(text)
        if _LONG_MIN <= number <= _LONG_MAX:
            return number
    raise Mismatch


def _as_double(text: str) -> float:
    """A property read as a decimal constant reads it (Java's Double.valueOf)."""
    text = text.strip()
    if _DECIMAL_TEXT.fullmatch(text):
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    raise Mismatch


def _as_boolean(text: str) -> bool:
    """A property compared with TRUE or FALSE (Java's Boolean.valueOf): true if it is `true` in any case."""
    return text.lower() == "true"


def reader(constant: Constant) -> Callable[[str], Constant]:
    """How a property's value is read to compare it with `constant`."""
    if isinstance(constant, bool):
        return _as_boolean
    if isinstance(constant, int):
        return _as_integer
    if isinstance(constant, float):
        return _as_double
    return str


_ORDER: dict[str, Callable[[object, object], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}
_MIRRORED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def names_read(node: Expression) -> frozenset[str]:
    """The properties the expression reads."""
    return frozenset(value.name for value in _values(node) if isinstance(value, Property))


def _values(node: Expression) -> Iterator[Value]:
    if isinstance(node, Comparison):
        yield node.left
        yield node.right
    elif isinstance(node, InList | IsNull | TextTest | Not):
        yield from _values(node.operand) if isinstance(node, Not) else (node.operand,)
    elif isinstance(node, Logic):
        for operand in node.operands:
            yield from _values(operand)


# ---- evaluation -----------------------------------------------------------------------------------


def compile_condition(node: Expression) -> Condition:
    """A function of a message's properties giving the condition's value (raising Mismatch)."""
    if isinstance(node, Comparison):
        return _compile_comparison(node)
    if isinstance(node, InList):
        return _compile_in(node)
    if isinstance(node, IsNull):
        return _compile_is_null(node)
    if isinstance(node, TextTest):
        return _compile_text_test(node)
    if isinstance(node, Not):
        inner = compile_condition(node.operand)

        def negation(properties: Properties) -> Truth:
            value = inner(properties)
            return None if value is None else not value

        return negation
    if isinstance(node, Logic):
        return _compile_logic(node.operator, tuple(compile_condition(operand) for operand in node.operands))
    constant = node.value
    return lambda _: constant


def _compile_logic(operator: str, operands: tuple[Condition, ...]) -> Condition:
    """RocketMQ's AND and OR, made n-ary: left to right, stopping at the term that decides."""
    decisive = operator == "OR"  # OR stops at a true term, AND at a false one

    def logic(properties: Properties) -> Truth:
        unknown = False
        for operand in operands:
            value = operand(properties)
            if value is None:
                unknown = True
            elif value is decisive:
                return decisive
        return None if unknown else not decisive

    return logic


def _compile_comparison(node: Comparison) -> Condition:
    operator, left, right = node.operator, node.left, node.right
    if isinstance(left, Literal) and isinstance(right, Property):
        operator, left, right = _MIRRORED[operator], right, left
    test = _ORDER[operator]
    if isinstance(left, Literal) and isinstance(right, Literal):
        folded = _compare_constants(test, left.value, right.value)
        return lambda _: folded
    if isinstance(right, Literal):
        name, constant, read = left.name, right.value, reader(right.value)  # type: ignore[union-attr]

        def with_constant(properties: Properties) -> Truth:
            value = properties.get(name)
            return None if value is None else test(read(value), constant)

        return with_constant
    left_name, right_name = left.name, right.name  # type: ignore[union-attr]
    read = str if operator in ("=", "<>") else _as_double

    def between_properties(properties: Properties) -> Truth:
        a, b = properties.get(left_name), properties.get(right_name)
        if a is None or b is None:
            return None
        return test(read(a), read(b))

    return between_properties


def _compare_constants(test: Callable[[object, object], bool], a: Constant, b: Constant) -> bool:
    if isinstance(a, str) and not isinstance(b, str):
        a = reader(b)(a)
    elif isinstance(b, str) and not isinstance(a, str):
        b = reader(a)(b)
    return test(a, b)


def _compile_in(node: InList) -> Condition:
    name, values, negated = node.operand.name, node.values, node.negated

    def in_list(properties: Properties) -> Truth:
        value = properties.get(name)
        return None if value is None else (value in values) != negated

    return in_list


def _compile_is_null(node: IsNull) -> Condition:
    negated = node.negated
    if isinstance(node.operand, Literal):
        folded = (node.operand.value is None) != negated
        return lambda _: folded
    name = node.operand.name

    def is_null(properties: Properties) -> Truth:
        return (properties.get(name) is None) != negated

    return is_null


_TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": str.__contains__,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def _compile_text_test(node: TextTest) -> Condition:
    test, text, negated = _TEXT_TESTS[node.test], node.text, node.negated
    if not text:  # RocketMQ: an empty search matches nothing, NOT or not
        return lambda _: False
    if isinstance(node.operand, Literal):
        value = node.operand.value
        folded = isinstance(value, str) and test(value, text) != negated
        return lambda _: folded
    name = node.operand.name

    def text_test(properties: Properties) -> Truth:
        value = properties.get(name)
        return value is not None and test(value, text) != negated

    return text_test


def compile_integer_test(node: Expression) -> Callable[[int], bool] | None:
    """For an expression that only compares one property with integer constants (`n < 10`, `n BETWEEN 1 AND 5`,
    their AND, OR and NOT), its verdict on a message whose property is a decimal integer, as a function of that
    integer (no value is then missing or mismatched: the logic is two-valued); None for any other expression. What a
    read evaluates on a value's bytes without decoding it (filter/records.py)."""
    if isinstance(node, Comparison):
        operator, left, right = node.operator, node.left, node.right
        if isinstance(left, Literal):
            operator, left, right = _MIRRORED[operator], right, left
        if not isinstance(left, Property) or not isinstance(right, Literal):
            return None
        constant = right.value
        if type(constant) is not int:
            return None
        test = _ORDER[operator]
        return lambda value: test(value, constant)
    if isinstance(node, Not):
        inner = compile_integer_test(node.operand)
        return None if inner is None else lambda value: not inner(value)
    if isinstance(node, Logic):
        tests = [compile_integer_test(operand) for operand in node.operands]
        if any(test is None for test in tests):
            return None
        combine = all if node.operator == "AND" else any
        return lambda value: combine(test(value) for test in tests)  # type: ignore[misc]
    return None


# ---- what a message needs to be selected ------------------------------------------------------------


def _present(name: str) -> frozenset[bytes]:
    return frozenset({name.encode() + b"\x01"})


def _best(needs: Iterable[Needles]) -> Needles:
    """What a condition needs when it needs all of `needs`: the most telling one (any will do)."""
    known = [need for need in needs if need is not None]
    if not known:
        return None
    return min(known, key=_telling)


def _telling(need: frozenset[bytes]) -> tuple[bool, int, int]:
    """How rarely a record holds one of `need`, for ordering: needles of values (`name\x01value\x02`) before
    needles of mere names (`name\x01`), then fewer of them, then longer ones."""
    return (any(n.endswith(b"\x01") for n in need), len(need), -min((len(n) for n in need), default=0))


def _any(needs: Iterable[Needles]) -> Needles:
    """What a condition needs when it needs one of `needs`."""
    joined: set[bytes] = set()
    for need in needs:
        if need is None:
            return None
        joined |= need
    return frozenset(joined)


def needles(node: Expression, outcome: bool = True) -> Needles:
    """What the encoded properties of a message for which `node` evaluates to `outcome` must hold."""
    if isinstance(node, BooleanConstant):
        return None if node.value == outcome else frozenset()
    if isinstance(node, Not):
        return needles(node.operand, not outcome)
    if isinstance(node, Logic):
        parts = [needles(operand, outcome) for operand in node.operands]
        every = (node.operator == "AND") == outcome  # true AND, false OR: every term has the outcome
        return _best(parts) if every else _any(parts)
    if isinstance(node, IsNull):
        if isinstance(node.operand, Literal) or (node.negated != outcome):
            return None  # a missing property: no needle for it
        return _present(node.operand.name)
    if isinstance(node, TextTest):
        if not node.text:  # false whatever the message
            return None if not outcome else frozenset()
        if isinstance(node.operand, Literal) or not outcome:  # false also for a missing property
            return None
        if node.test == "STARTSWITH" and not node.negated:
            return frozenset({node.operand.name.encode() + b"\x01" + node.text.encode()})
        return _present(node.operand.name)
    names = [side.name for side in _sides(node) if isinstance(side, Property)]
    if isinstance(node, InList) and outcome != node.negated:
        return frozenset(node.operand.name.encode() + b"\x01" + v.encode() + b"\x02" for v in node.values)
    if isinstance(node, Comparison) and _is_string_equality(node, outcome):
        prop, literal = (node.left, node.right) if isinstance(node.left, Property) else (node.right, node.left)
        return frozenset({prop.name.encode() + b"\x01" + literal.value.encode() + b"\x02"})  # type: ignore[union-attr]
    return _best(_present(name) for name in names)  # a missing property makes it unknown: neither outcome


def _sides(node: Comparison | InList) -> tuple[Value, ...]:
    return (node.left, node.right) if isinstance(node, Comparison) else (node.operand,)


def _is_string_equality(node: Comparison, outcome: bool) -> bool:
    """A property equal to a string literal: its `name\\x01value\\x02` is in the properties (`=` true, `<>` false)."""
    sides = {type(node.left), type(node.right)}
    if sides != {Property, Literal} or (node.operator == "=") != outcome or node.operator not in ("=", "<>"):
        return False
    literal = node.right if isinstance(node.right, Literal) else node.left
    return isinstance(literal.value, str)  # type: ignore[union-attr]
