"""Dead-letter queue reads: which groups have dead letters, how many, and how recent."""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import ResponseCode
from broker_core.protocol.validation import DLQ_GROUP_TOPIC_PREFIX, group_error
from console import broker_client
from console.selectors.messages import iso_ms


def list_dlqs(search: str = "") -> list[dict[str, Any]]:
    """Every group with a ``%DLQ%<group>`` topic, sorted by group, filtered by a case-insensitive substring.

    ``count`` is the number of dead letters still stored (the sum over the DLQ topic's queues of max - min
    offset, from the brokers' topic stats; retention may have removed older ones) and ``newest`` the store
    time of the latest one (the queues' ``lastUpdateTimestamp``), None when the DLQ is empty.
    """
    admin = broker_client.admin()
    needle = search.lower()
    rows = []
    for name in sorted(admin.topic_list()):
        group = name[len(DLQ_GROUP_TOPIC_PREFIX):]
        if not name.startswith(DLQ_GROUP_TOPIC_PREFIX) or group_error(group) or needle not in group.lower():
            continue
        try:
            stats = admin.topic_stats(name)
        except ClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:  # deleted since the topic list was read
                continue
            raise
        newest = max((int(r.get("lastUpdateTimestamp") or 0) for r in stats), default=0)
        rows.append({"group": group, "topic": name,
                     "count": sum(max(0, int(r["maxOffset"]) - int(r["minOffset"])) for r in stats),
                     "newest": iso_ms(max(newest, 0))})
    return rows
