"""Expression nodes of a compiled SQL92 selector, one constructor per RocketMQ expression class
(``ComparisonExpression``, ``LogicExpression``, ``UnaryExpression``, the RocketMQ 5 string tests), each with the
Java class's parse-time checks and its three-valued evaluation (``None`` is unknown)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker_core.protocol.sql92_values import (
    JavaInt,
    JavaLong,
    Value,
    double_compare,
    java_compare,
    java_equals,
    parse_double,
)


class Sql92Error(ValueError):
    """An expression RocketMQ's parser refuses (syntax or a parse-time type check)."""


Props = Mapping[str, str]
Eval = Callable[[Props], Value]


@dataclass(frozen=True)
class Node:
    ev: Eval
    kind: str  # "const", "bool_const", "property", "boolean", "value"
    const: Value = None
    name: str = ""

    @property
    def is_boolean(self) -> bool:
        return self.kind in ("bool_const", "boolean")


def const(v: Value, kind: str = "const") -> Node:
    return Node(lambda p: v, kind, v)


def boolean(ev: Eval) -> Node:
    return Node(ev, "boolean")


def as_boolean(n: Node) -> Node:
    """``asBooleanExpression``: a boolean as is, a property through a boolean cast, anything else refused."""
    if n.is_boolean:
        return n
    if n.kind == "property":
        ev = n.ev

        def cast(p: Props) -> Value:
            v = ev(p)
            return None if v is None else (v if isinstance(v, bool) else False)
        return boolean(cast)
    raise Sql92Error(f"Invalid MessageSelector. Expression will not result in a boolean value: {show(n)}")


def show(n: Node) -> str:
    if n.kind == "property":
        return n.name
    if n.kind in ("const", "bool_const"):
        v = n.const
        if v is None or isinstance(v, bool):
            return {None: "NULL", True: "TRUE", False: "FALSE"}[v]
        return "'" + v.replace("'", "''") + "'" if isinstance(v, str) else str(v)
    return "expression"


def check_less_than_operand(n: Node) -> None:
    if n.kind in ("const", "bool_const"):
        if isinstance(n.const, (JavaInt, JavaLong, float)) and not isinstance(n.const, bool):
            return
        raise Sql92Error(f"Value '{show(n)}' cannot be compared.")
    if n.is_boolean:
        raise Sql92Error("Value 'boolean expression' cannot be compared.")


def ordered(symbol: str, left: Node, right: Node) -> Node:
    check_less_than_operand(left)
    check_less_than_operand(right)
    test: Callable[[int], bool] = {">": lambda c: c > 0, ">=": lambda c: c >= 0,
                                   "<": lambda c: c < 0, "<=": lambda c: c <= 0}[symbol]
    lev, rev = left.ev, right.ev

    def ev(p: Props) -> Value:
        lv = lev(p)
        if lv is None:
            return None
        rv = rev(p)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):  # comparing strings is illegal: both as doubles
            return test(double_compare(parse_double(lv), parse_double(rv)))
        return test(java_compare(lv, rv))
    return boolean(ev)


def equal_raw(left: Node, right: Node) -> Node:
    lev, rev = left.ev, right.ev

    def ev(p: Props) -> Value:
        lv, rv = lev(p), rev(p)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or java_equals(lv, rv):
            return True
        return java_compare(lv, rv) == 0
    return boolean(ev)


def equal(left: Node, right: Node) -> Node:
    for n in (left, right):
        if n.kind in ("const", "bool_const") and n.const is None:
            raise Sql92Error("'NULL' cannot be compared.")
    if left.kind == "bool_const" and right.kind == "const":
        raise Sql92Error(f"'{show(left)}' cannot be compared with '{show(right)}'")
    return equal_raw(left, right)


def not_(n: Node) -> Node:
    ev = n.ev

    def neg(p: Props) -> Value:
        v = ev(p)
        return None if v is None else not v
    return boolean(neg)


def and_(a: Node, b: Node) -> Node:
    aev, bev = a.ev, b.ev

    def ev(p: Props) -> Value:
        lv = aev(p)
        if lv is False:
            return False
        rv = bev(p)
        if rv is False:
            return False
        return None if lv is None or rv is None else True
    return boolean(ev)


def or_(a: Node, b: Node) -> Node:
    aev, bev = a.ev, b.ev

    def ev(p: Props) -> Value:
        lv = aev(p)
        if lv is True:
            return True
        rv = bev(p)
        if rv is True:
            return True
        return None if lv is None or rv is None else False
    return boolean(ev)


def string_test(left: Node, search: str, op: Callable[[str, str], bool], negate: bool) -> Node:
    lev = left.ev

    def ev(p: Props) -> Value:
        if not search:
            return False
        v = lev(p)
        if not isinstance(v, str):
            return False
        return op(v, search) != negate
    return boolean(ev)
