"""Subscription expressions: by tag (``*`` for everything, ``TagA``, ``TagA || TagB``) or SQL92 over properties.

By tag, the broker filters by tag hash (ConsumeQueue ``tagsCode``); clients re-check the tag string because
different tags can share a hash. By SQL92 (:mod:`broker_core.protocol.sql92`), a broker with
``enablePropertyFilter`` evaluates the expression on each message's properties, and clients re-check it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker_core.codec.hashing import tag_hash
from broker_core.protocol.sql92 import Selector, Sql92Error, compile_sql92

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


class SubscriptionParseError(ValueError):
    pass


@dataclass(frozen=True)
class Subscription:
    topic: str
    expression: str
    tags: frozenset[str] | None  # None = all (or SQL92: the selector decides)
    expression_type: str = EXPRESSION_TAG
    selector: Selector | None = None  # SQL92 only

    @property
    def tag_hashes(self) -> set[int] | None:
        return None if self.tags is None else {tag_hash(t) for t in self.tags}

    @property
    def is_sql92(self) -> bool:
        return self.selector is not None

    def matches(self, tag: str | None) -> bool:
        return self.tags is None or (tag is not None and tag in self.tags)

    def matches_message(self, properties: Mapping[str, str]) -> bool:
        """The client's (and the broker's) check of one message: its tag, or the SQL92 selector on its
        properties (which include ``TAGS`` and ``KEYS``)."""
        if self.selector is not None:
            return self.selector.matches(properties)
        return self.matches(properties.get("TAGS"))


def parse_subscription(topic: str, expression: str | None, expression_type: str | None = None) -> Subscription:
    """A subscription of ``expression_type`` (``TAG`` when empty, as Java's ``ExpressionType.isTagType``);
    raises :class:`SubscriptionParseError` on an expression RocketMQ's parser refuses or an unknown type."""
    kind = expression_type or EXPRESSION_TAG
    if kind == EXPRESSION_SQL92:
        try:
            selector = compile_sql92(expression or "")
        except Sql92Error as exc:
            raise SubscriptionParseError(str(exc)) from None
        return Subscription(topic, selector.expression, None, EXPRESSION_SQL92, selector)
    if kind != EXPRESSION_TAG:
        raise SubscriptionParseError(f"unknown expression type {kind!r} (TAG or SQL92)")
    expr = (expression or SUB_ALL).strip()
    if expr in ("", SUB_ALL):
        return Subscription(topic, SUB_ALL, None)
    tags = [t.strip() for t in expr.split("||")]
    if any(not t for t in tags):
        raise SubscriptionParseError(f"bad subscription expression {expression!r}: empty tag")
    return Subscription(topic, expr, frozenset(tags))
