"""Names the protocol accepts: topics and groups (upstream ``TopicValidator``)."""

from __future__ import annotations

import re

from broker_core.codec.names import (  # noqa: F401 (re-exported: the names validation is about)
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SYSTEM_TOPICS,
    TRACE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_VALID = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def topic_error(topic: object) -> str | None:
    """Why ``topic`` is not a valid topic name, or None."""
    if not isinstance(topic, str) or not topic:
        return "topic name is empty"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"topic name is longer than {TOPIC_MAX_LENGTH} characters"
    if not _VALID.match(topic):
        return f"topic name {topic!r} may only contain letters, digits, '%', '|', '_' and '-'"
    return None


def group_error(group: object) -> str | None:
    if not isinstance(group, str) or not group:
        return "group name is empty"
    if len(group) > GROUP_MAX_LENGTH:
        return f"group name is longer than {GROUP_MAX_LENGTH} characters"
    if not _VALID.match(group):
        return f"group name {group!r} may only contain letters, digits, '%', '|', '_' and '-'"
    return None


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group
