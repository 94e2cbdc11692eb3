"""SQL92 property filters (``MessageSelector.bySql``) with RocketMQ's semantics.

The grammar is RocketMQ's ``SelectorParser.jj`` (ActiveMQ's JMS selector without LIKE, arithmetic, hex and octal),
plus the ``CONTAINS``/``STARTSWITH``/``ENDSWITH`` tests of RocketMQ 5: ``OR``, ``AND``, ``NOT``, ``=``, ``<>``,
``>``, ``>=``, ``<``, ``<=``, ``[NOT] BETWEEN a AND b``, ``[NOT] IN ('x', ...)``, ``IS [NOT] NULL``, ``TRUE``,
``FALSE``, ``NULL``, numbers (``12``, ``12L``, ``1.5``, ``1E3``), strings in single quotes (``''`` escapes a quote),
property names ``[a-zA-Z_$][a-zA-Z0-9_$]*`` (keywords are case-insensitive and reserved), ``--`` and ``/* */``
comments. It is parsed with Lark (LALR), not by string tricks.

Evaluation follows RocketMQ's Java classes exactly, because a subscription must select the same messages here as
on an Apache broker:
- Property values are strings (message properties). Literals are Java ``Integer`` (when in int range), ``Long``,
  ``Double``, ``String`` or ``Boolean``. String expressions are converted for comparison (RocketMQ turns
  ``convertStringExpressions`` on): ``a > 10`` compares ``Integer.valueOf(a)`` with 10; ``a = 'x'`` compares
  strings; two strings under ``>``/``<`` are both read as doubles.
- Three-valued logic: a missing property makes a comparison *unknown* (``None``); ``AND``/``OR``/``NOT`` keep
  unknowns as Java's ``LogicExpression`` does; only a definite ``TRUE`` selects a message.
- A value that cannot be converted (``a > 10`` with ``a = 'abc'``) raises in Java; the broker then treats the
  message as not matched. :meth:`Selector.matches` does the same (type mismatch is false).
- Parse-time checks as RocketMQ's: ``>``/``<`` need numeric constants, ``= NULL`` is refused (use ``IS NULL``),
  ``BETWEEN`` bounds must be ordered, ``IN`` needs a property, ``0.0`` and out-of-range literals are refused.
Compiled selectors are cached (like ``SelectorParser``'s cache of 100).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedToken, VisitError

from broker_core.protocol.sql92_nodes import (
    Node,
    Props,
    Sql92Error,
    Value,
    and_,
    as_boolean,
    boolean,
    const,
    equal,
    equal_raw,
    not_,
    or_,
    ordered,
    show,
    string_test,
)
from broker_core.protocol.sql92_values import DOUBLE_MIN, INT_MAX, LONG_MAX, EvalError, JavaInt, JavaLong, java_compare

__all__ = ["Selector", "Sql92Error", "compile_sql92"]


_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr | or_expr OR and_expr -> or_
?and_expr: eq_expr | and_expr AND eq_expr -> and_
?eq_expr: cmp_expr
    | eq_expr "=" cmp_expr -> eq
    | eq_expr "<>" cmp_expr -> ne
    | eq_expr IS NULL -> is_null
    | eq_expr IS NOT NULL -> is_not_null
?cmp_expr: unary
    | cmp_expr ">" unary -> gt
    | cmp_expr ">=" unary -> ge
    | cmp_expr "<" unary -> lt
    | cmp_expr "<=" unary -> le
    | cmp_expr CONTAINS STRING -> contains
    | cmp_expr NOT CONTAINS STRING -> not_contains
    | cmp_expr STARTSWITH STRING -> startswith
    | cmp_expr NOT STARTSWITH STRING -> not_startswith
    | cmp_expr ENDSWITH STRING -> endswith
    | cmp_expr NOT ENDSWITH STRING -> not_endswith
    | cmp_expr BETWEEN unary AND unary -> between
    | cmp_expr NOT BETWEEN unary AND unary -> not_between
    | cmp_expr IN "(" STRING ("," STRING)* ")" -> in_
    | cmp_expr NOT IN "(" STRING ("," STRING)* ")" -> not_in
?unary: primary
    | "+" unary
    | "-" unary -> neg
    | NOT unary -> not_
?primary: STRING -> string
    | DECIMAL -> decimal
    | FLOAT -> float_
    | TRUE -> true
    | FALSE -> false
    | NULL -> null
    | ID -> prop
    | "(" or_expr ")"

NOT: "NOT"i
AND: "AND"i
OR: "OR"i
BETWEEN: "BETWEEN"i
IN: "IN"i
TRUE: "TRUE"i
FALSE: "FALSE"i
NULL: "NULL"i
IS: "IS"i
CONTAINS: "CONTAINS"i
STARTSWITH: "STARTSWITH"i
ENDSWITH: "ENDSWITH"i
FLOAT.2: /([0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)/
DECIMAL: /(0|[1-9][0-9]*)[lL]?/
STRING: /'(''|[^'])*'/
ID: /[a-zA-Z_$][a-zA-Z0-9_$]*/

%ignore /[ \t\n\r\f]+/
%ignore /--[^\n\r]*(\r\n|\n|\r)/
%ignore /\/\*[^*]*\*+([^*\/][^*]*\*+)*\//
"""


def _unquote(tok: Token) -> str:
    return str(tok)[1:-1].replace("''", "'")


@v_args(inline=True)
class _Build(Transformer[Token, Node]):
    def string(self, tok: Token) -> Node:
        return const(_unquote(tok))

    def decimal(self, tok: Token) -> Node:
        text = str(tok).rstrip("lL")
        value = int(text)
        if value > LONG_MAX:
            raise Sql92Error(f"For input string: {text!r} (beyond a Java long)")
        return const(JavaInt(value) if value <= INT_MAX else JavaLong(value))

    def float_(self, tok: Token) -> Node:
        value = float(str(tok))
        if value > 1.7976931348623157e308:
            raise Sql92Error(f"{tok} is greater than {1.7976931348623157e308}")
        if value < DOUBLE_MIN:  # RocketMQ's check: 0.0 too
            raise Sql92Error(f"{tok} is less than {DOUBLE_MIN}")
        return const(value)

    def true(self, _tok: Token) -> Node:
        return const(True, "bool_const")

    def false(self, _tok: Token) -> Node:
        return const(False, "bool_const")

    def null(self, _tok: Token) -> Node:
        return const(None, "bool_const")

    def prop(self, tok: Token) -> Node:
        name = str(tok)
        return Node(lambda p: p.get(name), "property", name=name)

    def neg(self, n: Node) -> Node:
        ev = n.ev

        def negate(p: Props) -> Value:
            v = ev(p)
            if isinstance(v, (JavaInt, JavaLong)) and not isinstance(v, bool):
                return type(v)(-v)
            if isinstance(v, float):
                return -v
            return None
        return Node(negate, "value")

    def not_(self, _kw: Token, n: Node) -> Node:
        return not_(as_boolean(n))

    def or_(self, a: Node, _kw: Token, b: Node) -> Node:
        return or_(as_boolean(a), as_boolean(b))

    def and_(self, a: Node, _kw: Token, b: Node) -> Node:
        return and_(as_boolean(a), as_boolean(b))

    def eq(self, a: Node, b: Node) -> Node:
        return equal(a, b)

    def ne(self, a: Node, b: Node) -> Node:
        return not_(equal(a, b))

    def is_null(self, a: Node, _is: Token, _null: Token) -> Node:
        return equal_raw(a, const(None, "bool_const"))

    def is_not_null(self, a: Node, _is: Token, _not_kw: Token, _null: Token) -> Node:
        return not_(equal_raw(a, const(None, "bool_const")))

    def gt(self, a: Node, b: Node) -> Node:
        return ordered(">", a, b)

    def ge(self, a: Node, b: Node) -> Node:
        return ordered(">=", a, b)

    def lt(self, a: Node, b: Node) -> Node:
        return ordered("<", a, b)

    def le(self, a: Node, b: Node) -> Node:
        return ordered("<=", a, b)

    def between(self, v: Node, _kw: Token, lo: Node, _and_kw: Token, hi: Node) -> Node:
        if lo.kind in ("const", "bool_const") and hi.kind in ("const", "bool_const"):
            if lo.const is None or hi.const is None:
                raise Sql92Error("Illegal values of between, values can not be null!")
            try:
                in_order = java_compare(hi.const, lo.const) >= 0
            except EvalError as exc:
                raise Sql92Error(str(exc)) from None
            if not in_order:
                raise Sql92Error(f"Illegal values of between, left value({lo.const}) must less than or equal to "
                                 f"right value({hi.const})")
        return and_(ordered(">=", v, lo), ordered("<=", v, hi))

    def not_between(self, v: Node, _not_kw: Token, _kw: Token, lo: Node, _and_kw: Token, hi: Node) -> Node:
        return or_(ordered("<", v, lo), ordered(">", v, hi))

    def _in(self, left: Node, items: tuple[Token, ...], negate: bool) -> Node:
        if left.kind != "property":
            raise Sql92Error(f"Expected a property for In expression, got: {show(left)}")
        values = frozenset(_unquote(t) for t in items)
        lev = left.ev

        def ev(p: Props) -> Value:
            v = lev(p)
            if not isinstance(v, str):
                return None
            return (v in values) != negate
        return boolean(ev)

    def in_(self, left: Node, _kw: Token, *items: Token) -> Node:
        return self._in(left, items, False)

    def not_in(self, left: Node, _not_kw: Token, _kw: Token, *items: Token) -> Node:
        return self._in(left, items, True)

    def contains(self, left: Node, _kw: Token, s: Token) -> Node:
        return string_test(left, _unquote(s), str.__contains__, False)

    def not_contains(self, left: Node, _n: Token, _kw: Token, s: Token) -> Node:
        return string_test(left, _unquote(s), str.__contains__, True)

    def startswith(self, left: Node, _kw: Token, s: Token) -> Node:
        return string_test(left, _unquote(s), str.startswith, False)

    def not_startswith(self, left: Node, _n: Token, _kw: Token, s: Token) -> Node:
        return string_test(left, _unquote(s), str.startswith, True)

    def endswith(self, left: Node, _kw: Token, s: Token) -> Node:
        return string_test(left, _unquote(s), str.endswith, False)

    def not_endswith(self, left: Node, _n: Token, _kw: Token, s: Token) -> Node:
        return string_test(left, _unquote(s), str.endswith, True)


_PARSER = Lark(_GRAMMAR, parser="lalr")


@dataclass(frozen=True)
class Selector:
    """A compiled SQL92 expression; :meth:`matches` is what the broker and the client re-check call."""

    expression: str
    _root: Node

    def evaluate(self, properties: Props) -> Value:
        """The raw three-valued result (``True``/``False``/``None``); raises ``ValueError`` on a conversion
        RocketMQ would throw on."""
        try:
            return self._root.ev(properties)
        except EvalError as exc:
            raise ValueError(str(exc)) from None

    def matches(self, properties: Props) -> bool:
        """Whether a message with these properties is selected: only a definite TRUE; errors are false."""
        try:
            return self._root.ev(properties) is True
        except EvalError:
            return False


@lru_cache(maxsize=100)
def compile_sql92(expression: str) -> Selector:
    """Parse and check ``expression``; raises :class:`Sql92Error` with RocketMQ's reason when it is refused."""
    if expression is None or not expression.strip():
        raise Sql92Error("Invalid MessageSelector: empty expression")
    try:
        tree = _PARSER.parse(expression)
        root = _Build().transform(tree)
    except VisitError as exc:
        cause = exc.orig_exc
        raise Sql92Error(f"Invalid MessageSelector. {cause}") from None
    except UnexpectedCharacters as exc:
        raise Sql92Error(f"Invalid MessageSelector. Unexpected character {exc.char!r} at "
                         f"column {exc.column}") from None
    except UnexpectedToken as exc:
        what = "end of expression" if exc.token.type == "$END" else f"token {str(exc.token)!r} at column {exc.column}"
        raise Sql92Error(f"Invalid MessageSelector. Unexpected {what}") from None
    except LarkError as exc:
        raise Sql92Error(f"Invalid MessageSelector. {exc}") from None
    return Selector(expression, as_boolean(root))
