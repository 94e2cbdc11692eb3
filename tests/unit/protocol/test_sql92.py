"""SQL92 selectors: a table of expressions, properties and RocketMQ's results (only a definite TRUE selects).

Expected values follow RocketMQ's filter classes (ComparisonExpression with string conversion on, three-valued
LogicExpression, UnaryExpression, ConstantExpression), checked by reading them; the cases that surprise are noted.
"""

from __future__ import annotations

import pytest

from broker_core.protocol.filter import EXPRESSION_SQL92, SubscriptionParseError, parse_subscription
from broker_core.protocol.sql92 import Sql92Error, compile_sql92

T, F, U = True, False, None  # U: unknown (null), which never selects

CASES: list[tuple[str, dict[str, str], bool | None]] = [
    # numeric comparisons: properties are strings, converted to the literal's type
    ("a > 10", {"a": "15"}, T),
    ("a > 10", {"a": "10"}, F),
    ("a >= 10", {"a": "10"}, T),
    ("a < 10", {"a": "-3"}, T),
    ("a <= 10", {"a": "+10"}, T),          # Integer.valueOf takes a sign
    ("a > 1.5", {"a": "2"}, T),
    ("a > 1.5", {"a": "1.25"}, F),
    ("a = 10", {"a": "10"}, T),
    ("a = 10", {"a": "010"}, T),           # Integer.valueOf("010") == 10
    ("a = 10L", {"a": "10"}, T),
    ("a > 3000000000", {"a": "3000000001"}, T),   # a Long literal
    ("a > b", {"a": "2", "b": "1.5"}, T),         # two strings under >: both read as doubles
    ("a < 1E3", {"a": "999"}, T),
    ("a = 1.5", {"a": "1.50"}, T),
    # type mismatch: RocketMQ throws while converting, so the message is not selected
    ("a > 10", {"a": "abc"}, F),
    ("a = 10", {"a": "10.0"}, F),          # Integer.valueOf("10.0") throws
    ("a > 5", {"a": "3000000001"}, F),     # out of Integer range for an Integer literal
    ("a > b", {"a": "x", "b": "1"}, F),
    ("a = 'x'", {"a": "x"}, T),
    ("a = 'x'", {"a": "X"}, F),
    ("a <> 'x'", {"a": "y"}, T),
    ("a = 'it''s'", {"a": "it's"}, T),
    # NULL: a missing property makes comparisons unknown
    ("a > 10", {}, U),
    ("a = 'x'", {}, U),
    ("a <> 'x'", {}, U),
    ("NOT a = 'x'", {}, U),
    ("a IS NULL", {}, T),
    ("a IS NULL", {"a": ""}, F),
    ("a IS NOT NULL", {"a": "1"}, T),
    ("a IS NOT NULL", {}, F),
    # BETWEEN / NOT BETWEEN
    ("a BETWEEN 0 AND 3", {"a": "0"}, T),
    ("a BETWEEN 0 AND 3", {"a": "3"}, T),
    ("a BETWEEN 0 AND 3", {"a": "4"}, F),
    ("a NOT BETWEEN 0 AND 3", {"a": "4"}, T),
    ("a NOT BETWEEN 0 AND 3", {"a": "2"}, F),
    ("a BETWEEN -5 AND 5", {"a": "-5"}, T),
    ("a BETWEEN 0 AND 3", {}, U),
    # IN / NOT IN: strings only
    ("TAGS IN ('TagA', 'TagB')", {"TAGS": "TagB"}, T),
    ("TAGS IN ('TagA', 'TagB')", {"TAGS": "TagC"}, F),
    ("TAGS NOT IN ('TagA', 'TagB')", {"TAGS": "TagC"}, T),
    ("TAGS IN ('TagA')", {}, U),
    ("TAGS NOT IN ('TagA')", {}, U),
    # AND / OR / NOT with unknowns (Java's LogicExpression)
    ("a = 1 AND b = 2", {"a": "1", "b": "2"}, T),
    ("a = 1 AND b = 2", {"a": "1"}, U),
    ("a = 1 AND b = 2", {"a": "0"}, F),    # FALSE AND unknown is FALSE
    ("a = 1 OR b = 2", {"b": "2"}, T),     # unknown OR TRUE is TRUE
    ("a = 1 OR b = 2", {"b": "3"}, U),
    ("NOT (a = 1)", {"a": "2"}, T),
    ("(a > 1 AND a < 5) OR c = 'x'", {"a": "3"}, T),
    ("a > 1 AND a < 5 OR c = 'x'", {"c": "x"}, T),   # AND binds tighter than OR
    # TRUE / FALSE / NULL literals, boolean casts and comparisons with booleans
    ("TRUE", {}, T),
    ("FALSE", {}, F),
    ("NULL", {}, U),
    ("a = TRUE", {"a": "true"}, T),        # Boolean.valueOf("true")
    ("a = TRUE", {"a": "TRUE"}, T),
    ("a = FALSE", {"a": "yes"}, T),        # Boolean.valueOf("yes") is false
    ("a", {"a": "true"}, F),               # a string property is never a boolean
    ("NOT a", {"a": "true"}, T),
    ("a", {}, U),
    # negation: numbers only; a property is a string, so it negates to null
    ("-a < 0", {"a": "5"}, U),
    ("a > -5", {"a": "-4"}, T),
    ("a > -3000000000", {"a": "0"}, T),
    # RocketMQ 5 string tests: null or non-string is FALSE (not unknown), even for the NOT forms
    ("a CONTAINS 'bc'", {"a": "abcd"}, T),
    ("a NOT CONTAINS 'bc'", {"a": "abcd"}, F),
    ("a NOT CONTAINS 'bc'", {}, F),
    ("a STARTSWITH 'ab'", {"a": "abcd"}, T),
    ("a ENDSWITH 'cd'", {"a": "abcd"}, T),
    ("a NOT ENDSWITH 'cd'", {"a": "abce"}, T),
    ("a CONTAINS ''", {"a": "abc"}, F),
    # keywords are case-insensitive; names keep their case; comments are skipped
    ("a between 1 and 2 and b is not null", {"a": "1", "b": "x"}, T),
    ("index = 3 AND notx = 1 AND IN_x = 2", {"index": "3", "notx": "1", "IN_x": "2"}, T),
    ("A = 1", {"a": "1"}, U),
    ("/* why */ a = 1 -- because\n", {"a": "1"}, T),
    ("$x_1 = 'y'", {"$x_1": "y"}, T),
]


@pytest.mark.parametrize(("expression", "properties", "expected"), CASES)
def test_selector_table(expression: str, properties: dict[str, str], expected: bool | None) -> None:
    selector = compile_sql92(expression)
    if expected is not U:
        assert selector.matches(properties) is expected
        return
    assert selector.matches(properties) is False
    assert selector.evaluate(properties) is None


def test_a_conversion_error_is_an_error_when_evaluated_and_no_match() -> None:
    s = compile_sql92("a > 10")
    with pytest.raises(ValueError, match="abc"):
        s.evaluate({"a": "abc"})
    assert s.matches({"a": "abc"}) is False


REFUSED = [
    ("a = NULL", "cannot be compared"),               # use IS NULL
    ("a > 'x'", "cannot be compared"),                # only numeric constants under > < >= <=
    ("a > TRUE", "cannot be compared"),
    ("(a = 1) > 2", "cannot be compared"),            # a boolean expression under >
    ("a BETWEEN 3 AND 1", "must less than or equal"),
    ("a BETWEEN NULL AND 1", "can not be null"),
    ("1 IN ('a')", "Expected a property"),
    ("a IN (1, 2)", "Unexpected token"),              # IN lists are strings
    ("TRUE = 1", "cannot be compared with"),
    ("a > 0.0", "is less than"),                      # RocketMQ's createFloat refuses 0.0
    ("a = 9223372036854775808", "beyond a Java long"),
    ("5", "will not result in a boolean"),
    ("'x'", "will not result in a boolean"),
    ("a >", "Unexpected"),
    ("a = 1 AND", "Unexpected"),
    ("a == 1", "Unexpected"),
    ("a LIKE 'x%'", "Unexpected"),                    # LIKE was removed by RocketMQ
    ("a = 0x10", "Unexpected"),                       # so were hex literals
    ("a.b = 1", "Unexpected"),
    ("", "empty"),
]


@pytest.mark.parametrize(("expression", "reason"), REFUSED)
def test_refused_expressions(expression: str, reason: str) -> None:
    with pytest.raises(Sql92Error, match=reason):
        compile_sql92(expression)


def test_subscription_of_type_sql92_checks_messages_by_properties() -> None:
    sub = parse_subscription("T", "a > 1 AND TAGS = 'x'", EXPRESSION_SQL92)
    assert sub.is_sql92 and sub.tag_hashes is None and sub.expression_type == "SQL92"
    assert sub.matches_message({"a": "2", "TAGS": "x"})
    assert not sub.matches_message({"a": "2", "TAGS": "y"})
    with pytest.raises(SubscriptionParseError, match="cannot be compared"):
        parse_subscription("T", "a = NULL", "SQL92")
    with pytest.raises(SubscriptionParseError, match="unknown expression type"):
        parse_subscription("T", "*", "XPATH")
    tag = parse_subscription("T", "x || y", "")
    assert not tag.is_sql92 and tag.matches_message({"TAGS": "y"}) and not tag.matches_message({})
