"""RocketMQ's SQL92 property filter (FilterType.SQL92): its grammar, parsed once with lark, and `SqlFilter`, the
parsed filter (expression.py holds the parts parsed, evaluation.py evaluates them).

    expression := or
    or         := and (OR and)*
    and        := not (AND not)*
    not        := NOT not | predicate
    predicate  := value (= | <> | < | <= | > | >=) value
                | value [NOT] BETWEEN value AND value
                | value [NOT] IN (string, string, ...)
                | value IS [NOT] NULL
                | value [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
                | TRUE | FALSE | ( expression )
    value      := property | string | number | TRUE | FALSE | NULL

Keywords are case-insensitive and reserved; a property is `[A-Za-z_$][A-Za-z0-9_$]*` and names a message property
as stored (user properties, and `TAGS`, `KEYS`: the keys joined by spaces); strings are `'...'` with `''` for a quote;
numbers are 64-bit integers (`5`, `5L`) or doubles (`5.0`, `.5`, `5e3`); `--` and `/* */` are comments.

Evaluation is RocketMQ's (its `filter` module: ComparisonExpression, LogicExpression, UnaryExpression):
- property values are strings; a comparison with a number reads the value as the number's type (an integer
  constant: a 64-bit integer, so a value `3.5` compared with `2` is a type mismatch; a decimal constant: a double),
  `<` `<=` `>` `>=` and BETWEEN take numbers only (two properties are read as doubles), with TRUE / FALSE a value is
  true when it is `true` in any case;
- a missing property makes a comparison, BETWEEN, IN and their NOTs unknown (SQL's NULL): NOT unknown is unknown,
  AND and OR are three-valued, and a filter whose result is unknown does not select the message; IS NULL is never
  unknown; CONTAINS, STARTSWITH, ENDSWITH and their NOTs are false on a missing property (RocketMQ 5.2);
- a type mismatch (a value that is not the number it is compared with) ends the evaluation: the filter does not
  select the message. Terms are evaluated left to right, AND stopping at a false term and OR at a true one, as
  RocketMQ does, so `b = 1 OR a > 2` selects a message with b = 1 whatever its a;
- nothing is an error at read time: an expression that could be is refused when it is parsed (InvalidFilterExpression
  with its position), e.g. `a > 'x'`, `a = NULL`, `'a' = 1`, `a BETWEEN 9 AND 1`, or a property alone.

Differences from RocketMQ (docs/filters.md says why): NOT binds looser than a comparison (`NOT a = 1` is
`NOT (a = 1)`, as SQL and JMS have it; RocketMQ reads `(NOT a) = 1`, which selects nothing), a property alone is
refused rather than read as a boolean (false for every string), `a = b` with `b` missing is unknown (RocketMQ:
false, so its NOT is true), and integers are 64-bit wherever they are compared.

Beyond RocketMQ: `needles` is what a message must carry in its encoded properties to be selected, derived from the
expression (`name\\x01` for a property it needs, `name\\x01value\\x02` for an equality or an IN), so a read finds
the few records that can match with one `bytes.find` over many records and evaluates only those.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from lark import Lark, Token, Transformer, Tree, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, v_args
from lark.exceptions import VisitError

from ..errors import InvalidFilterExpression
from ..message import StoredMessage
from ..record.properties import property_map
from .evaluation import (
    Condition,
    Mismatch,
    Needles,
    Properties,
    compile_condition,
    compile_integer_test,
    names_read,
    needles,
    reader,
)
from .expression import (
    BooleanConstant,
    Comparison,
    Constant,
    Expression,
    InList,
    IsNull,
    Literal,
    Logic,
    Node,
    Not,
    Property,
    TextTest,
    Value,
)

MAX_EXPRESSION_LENGTH = 4096
"""Characters of one SQL92 filter expression at most."""
MAX_DEPTH = 64
"""How deeply the parts of one expression may nest (NOT, AND within OR, ...): building and evaluating it recurse
that deep."""

GRAMMAR = r"""
?start: or_
?or_: and_ (_OR and_)*
?and_: not_ (_AND not_)*
?not_: NOT not_ -> negation
     | predicate
?predicate: value COMPARISON value -> comparison
          | value NOT? _BETWEEN value _AND value -> between
          | value NOT? _IN "(" STRING ("," STRING)* ")" -> in_list
          | value _IS NOT? NULL -> is_null
          | value NOT? (CONTAINS | STARTSWITH | ENDSWITH) STRING -> text_test
          | "(" or_ ")"
          | value -> alone
?value: NAME -> property
      | STRING -> string
      | SIGN? INTEGER -> integer
      | SIGN? DECIMAL -> decimal
      | TRUE -> true
      | FALSE -> false
      | NULL -> null

_OR: "OR"i
_AND: "AND"i
NOT: "NOT"i
_BETWEEN: "BETWEEN"i
_IN: "IN"i
_IS: "IS"i
NULL: "NULL"i
TRUE: "TRUE"i
FALSE: "FALSE"i
CONTAINS: "CONTAINS"i
STARTSWITH: "STARTSWITH"i
ENDSWITH: "ENDSWITH"i
COMPARISON: "=" | "<>" | "<=" | ">=" | "<" | ">"
SIGN: "+" | "-"
NAME: /[A-Za-z_$][A-Za-z0-9_$]*/
STRING: /'(?:[^']|'')*'/
DECIMAL.2: /(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
INTEGER: /(?:0|[1-9][0-9]*)[lL]?/

%ignore /[ \t\n\r\f]+/
%ignore /--[^\n\r]*/
%ignore /\/\*(?:[^*]|\*+[^*\/])*\*+\//
"""

_PARSER = Lark(GRAMMAR, parser="lalr", lexer="basic", propagate_positions=True, maybe_placeholders=False)
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _refuse(message: str, position: int) -> InvalidFilterExpression:
    return InvalidFilterExpression(f"SQL92 filter: {message} (at position {position})", position)


def _unquoted(token: Token) -> str:
    return token[1:-1].replace("''", "'")


@v_args(meta=True)
class _Builder(Transformer):
    """The parse tree as `Node`s, refusing what RocketMQ refuses when it builds its expression, and a few more."""

    def property(self, meta, children):
        return Property(meta.start_pos, str(children[0]))

    def string(self, meta, children):
        return Literal(meta.start_pos, _unquoted(children[0]))

    def integer(self, meta, children):
        text = "".join(children).rstrip("lL")
        number = int(text)
        if not _LONG_MIN <= number <= _LONG_MAX:
            raise _refuse(f"{text} is outside the 64-bit integers", meta.start_pos)
        return Literal(meta.start_pos, number)

    def decimal(self, meta, children):
        number = float("".join(children))
        if math.isinf(number):
            raise _refuse(f"{''.join(children)} is too large for a double", meta.start_pos)
        return Literal(meta.start_pos, number)

    def true(self, meta, _):
        return Literal(meta.start_pos, True)

    def false(self, meta, _):
        return Literal(meta.start_pos, False)

    def null(self, meta, _):
        return Literal(meta.start_pos, None)

    def comparison(self, meta, children):
        left, operator, right = children
        return _comparison(meta.start_pos, str(operator), left, right)

    def between(self, meta, children):
        negated = len(children) == 4
        value, (low, high) = children[0], children[-2:]
        for bound in (low, high):
            if isinstance(bound, Literal) and bound.value is None:
                raise _refuse("BETWEEN's bounds cannot be NULL", bound.position)
        low_check = _comparison(meta.start_pos, "<" if negated else ">=", value, low)
        high_check = _comparison(meta.start_pos, ">" if negated else "<=", value, high)
        if isinstance(low, Literal) and isinstance(high, Literal) and low.value > high.value:  # type: ignore[operator]
            raise _refuse(f"BETWEEN's low bound {low.value} is above its high bound {high.value}", low.position)
        return Logic(meta.start_pos, "OR" if negated else "AND", (low_check, high_check))

    def in_list(self, meta, children):
        negated = isinstance(children[1], Token) and children[1].type == "NOT"
        operand = children[0]
        if not isinstance(operand, Property):
            raise _refuse("IN takes a property on its left", meta.start_pos)
        strings = children[2:] if negated else children[1:]
        return InList(meta.start_pos, operand, frozenset(_unquoted(s) for s in strings), negated)

    def is_null(self, meta, children):
        operand = children[0]
        return IsNull(meta.start_pos, _value(operand, "IS NULL"), len(children) == 3)

    def text_test(self, meta, children):
        negated = len(children) == 4
        operand, test, text = children[0], children[-2], children[-1]
        return TextTest(meta.start_pos, str(test).upper(), _value(operand, str(test).upper()), _unquoted(text), negated)

    def negation(self, meta, children):
        return Not(meta.start_pos, _condition(children[-1]))

    def and_(self, meta, children):
        return Logic(meta.start_pos, "AND", tuple(_condition(c) for c in children))

    def or_(self, meta, children):
        return Logic(meta.start_pos, "OR", tuple(_condition(c) for c in children))

    def alone(self, meta, children):
        return children[0]


def _value(node: object, where: str) -> Value:
    if not isinstance(node, Property | Literal):
        raise _refuse(f"{where} takes a property or a literal, not a condition", node.position)  # type: ignore[attr-defined]
    return node


def _condition(node: Node) -> Expression:
    """`node` as a condition: TRUE and FALSE are; another literal or a property alone is not."""
    if isinstance(node, Literal):
        if isinstance(node.value, bool):
            return BooleanConstant(node.position, node.value)
        raise _refuse(f"{_shown(node.value)} is not a condition", node.position)
    if isinstance(node, Property):
        raise _refuse(
            f"property {node.name!r} alone is not a condition: compare it ({node.name} = 'x') or test it "
            f"({node.name} IS NOT NULL)",
            node.position,
        )
    return node  # type: ignore[return-value]


def _shown(value: Constant) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return repr(value) if isinstance(value, str) else str(value)


def _comparison(position: int, operator: str, left: object, right: object) -> Comparison:
    """A comparison RocketMQ would build and evaluate without an error for some message."""
    left, right = _value(left, operator), _value(right, operator)
    for side in (left, right):
        if isinstance(side, Literal):
            if side.value is None:
                raise _refuse(f"NULL cannot be compared with {operator}: use IS NULL or IS NOT NULL", side.position)
            if operator not in ("=", "<>") and (isinstance(side.value, bool | str)):
                raise _refuse(
                    f"{_shown(side.value)} cannot be compared with {operator}: only numbers can", side.position
                )
    if isinstance(left, Literal) and isinstance(right, Literal) and not _comparable(left.value, right.value):
        raise _refuse(f"{_shown(left.value)} cannot be compared with {_shown(right.value)}", left.position)
    return Comparison(position, operator, left, right)


def _comparable(a: Constant, b: Constant) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return isinstance(a, numbers) == isinstance(b, numbers) or _converts(a, b) or _converts(b, a)


def _converts(text: Constant, number: Constant) -> bool:
    if not isinstance(text, str):
        return False
    try:
        reader(number)(text)
    except Mismatch:
        return False
    return True


@dataclass(frozen=True, slots=True, eq=False)
class SqlFilter:
    """A parsed SQL92 filter expression (`SqlFilter.parse`), evaluated on a message's properties: a decoded
    message's (`accepts`) or a record's where it lies (`selects`, with a `record.PropertiesView`)."""

    expression: str
    needles: Needles = field(repr=False)
    """A record is selected only if its encoded properties hold one of these (None: no such clue)."""
    reads: frozenset[str] = field(repr=False)
    """The properties the expression reads."""
    integer_test: Callable[[int], bool] | None = field(repr=False)
    """For an expression comparing one property with integers only: its verdict on a message whose property is a
    decimal integer, as a function of the integer (`evaluation.compile_integer_test`)."""
    _condition: Condition = field(repr=False)

    @classmethod
    def parse(cls, expression: str) -> SqlFilter:
        """The filter `expression` says, or InvalidFilterExpression saying where it goes wrong."""
        return _parse(expression)

    def selects(self, properties: Properties) -> bool:
        """Whether the filter selects a message with these properties (stored names: KEYS and TAGS included)."""
        try:
            return self._condition(properties) is True
        except Mismatch:
            return False

    def accepts(self, message: StoredMessage) -> bool:
        """Whether the filter selects `message` (decoded)."""
        return self.selects(property_map(message.keys, message.tag, message.properties))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SqlFilter) and other.expression == self.expression

    def __hash__(self) -> int:
        return hash(self.expression)


@functools.lru_cache(maxsize=256)
def _parse(expression: str) -> SqlFilter:
    """Parsed once per process for each expression a subscription sends again and again (RocketMQ caches 100)."""
    if not isinstance(expression, str) or not expression.strip():
        raise _refuse("the expression is empty", 0)
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise _refuse(f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters", MAX_EXPRESSION_LENGTH)
    try:
        tree = _PARSER.parse(expression)
    except UnexpectedInput as error:
        raise _syntax_error(expression, error) from None
    _check_depth(tree)
    try:
        node = _Builder().transform(tree)
    except VisitError as error:  # lark wraps what a callback raises
        if isinstance(error.orig_exc, InvalidFilterExpression):
            raise error.orig_exc from None
        raise
    root = _condition(node)
    reads = names_read(root)
    integer_test = compile_integer_test(root) if len(reads) == 1 else None
    return SqlFilter(expression, needles(root), reads, integer_test, compile_condition(root))


def _syntax_error(expression: str, error: UnexpectedInput) -> InvalidFilterExpression:
    position = len(expression) if isinstance(error, UnexpectedEOF) else error.pos_in_stream
    position = len(expression) if position is None or position < 0 else position
    token = getattr(error, "token", None)
    if isinstance(error, UnexpectedCharacters):
        what = f"unexpected character {expression[position]!r}"
    elif position >= len(expression) or (isinstance(token, Token) and token.type == "$END"):
        what, position = "the expression ends too soon", len(expression)
    else:
        what = f"unexpected {str(token)!r}"
    return _refuse(what, position)


def _check_depth(tree: Tree) -> None:
    """Refuse an expression nested deeper than MAX_DEPTH (walked without recursion: it is not checked yet)."""
    stack: list[tuple[Tree | Token, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Tree):
            if depth > MAX_DEPTH:
                raise _refuse(f"the expression nests deeper than {MAX_DEPTH} levels", node.meta.start_pos)
            stack.extend((child, depth + 1) for child in node.children)
