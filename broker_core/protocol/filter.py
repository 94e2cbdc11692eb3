"""Subscription expressions by tag: ``*`` (everything), ``TagA``, ``TagA || TagB``.

The broker filters by tag hash (ConsumeQueue ``tagsCode``); clients re-check the tag string because
different tags can share a hash.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.codec.hashing import tag_hash

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


class SubscriptionParseError(ValueError):
    pass


@dataclass(frozen=True)
class Subscription:
    topic: str
    expression: str
    tags: frozenset[str] | None  # None = all

    @property
    def tag_hashes(self) -> set[int] | None:
        return None if self.tags is None else {tag_hash(t) for t in self.tags}

    def matches(self, tag: str | None) -> bool:
        return self.tags is None or (tag is not None and tag in self.tags)


def parse_subscription(topic: str, expression: str | None) -> Subscription:
    expr = (expression or SUB_ALL).strip()
    if expr in ("", SUB_ALL):
        return Subscription(topic, SUB_ALL, None)
    tags = [t.strip() for t in expr.split("||")]
    if any(not t for t in tags):
        raise SubscriptionParseError(f"bad subscription expression {expression!r}: empty tag")
    return Subscription(topic, expr, frozenset(tags))
