"""Per-group consumption status of one message (rocketmq-dashboard's "track message"), from committed offsets,
subscriptions and the groups' retry and dead-letter topics; no trace needed.

For each group that consumes the message's topic (it holds offsets on the topic, or an online member subscribes to
it), the first that applies:
1. ``dead_lettered``: a copy with the message's id is in ``%DLQ%<group>``;
2. ``retrying``: a copy is in ``%RETRY%<group>`` past the group's committed offset there (a later retry
   consumed means ``consumed``);
3. ``filtered``: an online member subscribes to the topic with a tag or SQL92 expression the message does not
   match (RocketMQ's CONSUMED_BUT_FILTERED: the offset moves past it, it is never delivered);
4. ``consumed``: the group's committed offset on the message's queue is past the message;
5. ``not_consumed``: the group is behind it (or never committed on that queue);
``online`` says whether members are connected now (an offline group's expression is unknown, so it is never
``filtered``).
"""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError, MessageExt
from broker_core.codec.names import ADMIN_GROUP, TRANSACTION_CHECK_GROUP
from broker_core.protocol.filter import SubscriptionParseError, parse_subscription
from broker_core.protocol.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from console import broker_client

STATES = ("dead_lettered", "retrying", "filtered", "consumed", "not_consumed")
_INTERNAL_GROUPS = {ADMIN_GROUP, TRANSACTION_CHECK_GROUP}


def _committed(group: str, topic: str) -> dict[tuple[str, int], int]:
    rows = broker_client.admin().consume_stats(group, topic)["offsetTable"]
    return {(r["brokerName"], r["queueId"]): int(r["consumerOffset"]) for r in rows if r["topic"] == topic}


def _copies(topic: str, msg_id: str, topics: set[str]) -> list[MessageExt]:
    if topic not in topics:
        return []
    try:
        found, _ = broker_client.admin().query_message(topic, msg_id, max_num=32)
    except ClientError:
        return []
    return [m for m in found if m.msg_id == msg_id]


def group_status(msg: MessageExt, group: str, topics: set[str]) -> dict[str, Any]:
    """The status of ``msg`` for ``group`` (see the module docstring); ``topics``: the cluster's topic list."""
    admin = broker_client.admin()
    subs = admin.subscriptions(group)
    online = bool(subs)
    expression, kind = subs.get(msg.topic, ("", ""))
    committed = _committed(group, msg.topic).get((msg.broker_name, msg.queue_id), -1)
    row: dict[str, Any] = {"group": group, "online": online, "expression": expression or None,
                           "expression_type": kind or None, "committed_offset": committed, "detail": ""}
    if _copies(DLQ_GROUP_TOPIC_PREFIX + group, msg.msg_id, topics):
        return {**row, "state": "dead_lettered", "detail": f"in {DLQ_GROUP_TOPIC_PREFIX}{group}"}
    retry = RETRY_GROUP_TOPIC_PREFIX + group
    copies = _copies(retry, msg.msg_id, topics)
    if copies:
        done = _committed(group, retry)
        pending = [c for c in copies if done.get((c.broker_name, c.queue_id), -1) <= c.queue_offset]
        if pending:
            times = max(c.reconsume_times for c in copies)
            return {**row, "state": "retrying", "detail": f"in {retry}, attempt {times + 1}"}
        return {**row, "state": "consumed", "detail": f"consumed on retry {max(c.reconsume_times for c in copies)}"}
    if expression:
        try:
            matches = parse_subscription(msg.topic, expression, kind).matches_message(msg.properties)
        except SubscriptionParseError:
            matches = True  # an expression this console cannot read: do not claim it filters
        if not matches:
            return {**row, "state": "filtered", "detail": f"{kind or 'TAG'} expression {expression!r} does not match"}
    if committed > msg.queue_offset:
        return {**row, "state": "consumed", "detail": f"committed offset {committed} > {msg.queue_offset}"}
    return {**row, "state": "not_consumed",
            "detail": "never committed on this queue" if committed < 0 else f"committed offset {committed} <= "
                                                                             f"{msg.queue_offset}"}


def consumption_status(msg: MessageExt) -> list[dict[str, Any]]:
    """One row per group consuming ``msg.topic`` (offsets on the topic, or an online subscription), by name."""
    admin = broker_client.admin()
    topics = set(admin.topic_list())
    groups = []
    for group, info in admin.group_list().items():
        if group in _INTERNAL_GROUPS:
            continue
        subscribed = bool(info.get("online")) and msg.topic in admin.subscriptions(group)
        if msg.topic in info.get("offsetTopics", []) or subscribed:
            groups.append(group)
    return [group_status(msg, g, topics) for g in sorted(groups)]
