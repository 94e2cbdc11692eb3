"""Consumer group reads: committed offsets and lag per queue, online clients."""

from __future__ import annotations

from typing import Any

from console import broker_client
from console.selectors.messages import iso_ms


def consume_stats(group: str, topic: str | None) -> dict[str, Any]:
    """Per-queue committed offset and lag of ``group`` (on ``topic``, or every topic), total lag, clients."""
    data = broker_client.admin().consume_stats(group, topic or None)
    queues = [{"broker_name": r["brokerName"], "topic": r.get("topic", topic), "queue_id": r["queueId"],
               "min_offset": r.get("minOffset"), "max_offset": r.get("maxOffset"),
               "consumer_offset": r.get("consumerOffset"), "lag": r.get("lag", 0),
               "last_timestamp": iso_ms(r.get("lastTimestamp", 0))} for r in data["offsetTable"]]
    return {"group": group, "topic": topic or None, "total_lag": data["totalLag"], "online": data["online"],
            "queues": queues}
