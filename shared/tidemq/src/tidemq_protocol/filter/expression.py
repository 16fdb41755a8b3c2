"""A SQL92 filter expression as parsed (sql.py builds it, evaluation.py compiles it): typed parts, each with the
position in the text where it starts, for the refusals that name it."""

from __future__ import annotations

from dataclasses import dataclass

Constant = str | int | float | bool | None
"""A literal's value: a string, a 64-bit integer, a double, TRUE / FALSE, or NULL."""


@dataclass(frozen=True, slots=True)
class Node:
    """A part of the expression, with where it starts in the text (for the errors that name it)."""

    position: int


@dataclass(frozen=True, slots=True)
class Property(Node):
    name: str


@dataclass(frozen=True, slots=True)
class Literal(Node):
    value: Constant


Value = Property | Literal


@dataclass(frozen=True, slots=True)
class Comparison(Node):
    operator: str
    left: Value
    right: Value


@dataclass(frozen=True, slots=True)
class InList(Node):
    operand: Property
    values: frozenset[str]
    negated: bool


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    operand: Value
    negated: bool


@dataclass(frozen=True, slots=True)
class TextTest(Node):
    test: str  # CONTAINS, STARTSWITH or ENDSWITH
    operand: Value
    text: str
    negated: bool


@dataclass(frozen=True, slots=True)
class Not(Node):
    operand: Expression


@dataclass(frozen=True, slots=True)
class Logic(Node):
    operator: str  # AND or OR
    operands: tuple[Expression, ...]


@dataclass(frozen=True, slots=True)
class BooleanConstant(Node):
    value: bool


Expression = Comparison | InList | IsNull | TextTest | Not | Logic | BooleanConstant
