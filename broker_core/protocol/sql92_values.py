"""Java value semantics for SQL92 selectors (:mod:`broker_core.protocol.sql92`): the values RocketMQ's filter
compares and how ``ComparisonExpression`` brings two of them together.

Values: ``str`` (String), ``bool`` (Boolean), ``float`` (Double), :class:`JavaInt` (Integer), :class:`JavaLong`
(Long) and ``None`` (null). Conversions follow ``Integer.valueOf``/``Long.valueOf``/``Double.valueOf``; a string
that does not convert raises :class:`EvalError`, as the Java code throws.
"""

from __future__ import annotations

import math
import re
from typing import Any, Union


class EvalError(Exception):
    """A value that cannot be converted during evaluation (RocketMQ throws; the message does not match)."""



class JavaInt(int):
    """A Java ``Integer``."""


class JavaLong(int):
    """A Java ``Long``."""


Value = Union[str, bool, float, int, None]  # noqa: UP007 - runtime alias

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MIN = 5e-324  # Java's Double.MIN_VALUE
_JAVA_INT = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)")


def parse_int(text: str, lo: int, hi: int) -> int:
    """``Integer.valueOf`` / ``Long.valueOf``: an optional sign and decimal digits, in range."""
    if not _JAVA_INT.fullmatch(text):
        raise EvalError(f"For input string: {text!r}")
    value = int(text)
    if not lo <= value <= hi:
        raise EvalError(f"For input string: {text!r} (out of range)")
    return value


def parse_double(text: str) -> float:
    """``Double.valueOf``: Java's decimal syntax (leading and trailing control/space characters trimmed)."""
    s = text.strip("".join(chr(c) for c in range(33)))
    if not _JAVA_DOUBLE.fullmatch(s):
        raise EvalError(f"For input string: {text!r}")
    s = s.rstrip("fFdD") if not s.endswith("Infinity") else s
    return float(s.replace("Infinity", "inf"))


def java_class(v: Value) -> type:
    if isinstance(v, bool):
        return bool
    if isinstance(v, (JavaInt, JavaLong, float, str)):
        return type(v)
    raise EvalError(f"not comparable: {v!r}")  # pragma: no cover - every value is one of the above


def double_compare(a: float, b: float) -> int:
    """``Double.compareTo``: NaN above everything and equal to itself; -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    if math.isnan(a) or math.isnan(b):
        return 0 if math.isnan(a) and math.isnan(b) else (1 if math.isnan(a) else -1)
    ab, bb = math.copysign(1.0, a), math.copysign(1.0, b)
    return 0 if ab == bb else (-1 if ab < bb else 1)


def compare_to(a: Any, b: Any) -> int:
    if isinstance(a, float):
        return double_compare(a, float(b))
    if isinstance(a, str):  # String.compareTo: UTF-16 code units
        ea, eb = a.encode("utf-16-be"), b.encode("utf-16-be")
        return (ea > eb) - (ea < eb)
    return (a > b) - (a < b)


def convert(v: str, to: type) -> Value:
    if to is bool:
        return v.lower() == "true"  # Boolean.valueOf
    if to is JavaInt:
        return JavaInt(parse_int(v, INT_MIN, INT_MAX))
    if to is JavaLong:
        return JavaLong(parse_int(v, LONG_MIN, LONG_MAX))
    return parse_double(v)


def java_compare(left: Value, right: Value) -> int:
    """``ComparisonExpression.__compare`` with string conversion on; -1 for classes it cannot bring together."""
    lc, rc = java_class(left), java_class(right)
    lv: Any = left  # re-bound below to the converted value, as the Java code does
    rv: Any = right
    if lc is not rc:
        if lc is bool:
            if rc is str:  # Java casts the Boolean to String here and throws
                raise EvalError("Boolean cannot be cast to String")
            return -1
        if lc is JavaInt:
            if rc is JavaLong:
                lv = JavaLong(lv)
            elif rc is float:
                lv = float(lv)
            elif rc is str:
                rv = convert(rv, JavaInt)
            else:
                return -1
        elif lc is JavaLong:
            if rc is JavaInt:
                rv = JavaLong(rv)
            elif rc is float:
                lv = float(lv)
            elif rc is str:
                rv = convert(rv, JavaLong)
            else:
                return -1
        elif lc is float:
            if rc is JavaInt or rc is JavaLong:
                rv = float(rv)
            elif rc is str:
                rv = convert(rv, float)
            else:
                return -1
        elif lc is str:
            lv = convert(lv, rc)
        else:  # pragma: no cover
            return -1
    return compare_to(lv, rv)


def java_equals(lv: Value, rv: Value) -> bool:
    """``Object.equals``: same class and value (``Integer(5)`` does not equal ``Long(5)``)."""
    if java_class(lv) is not java_class(rv):
        return False
    if isinstance(lv, float) and isinstance(rv, float):
        return double_compare(lv, rv) == 0  # Double.equals compares bits
    return lv == rv
