"""Client-side trace records (RocketMQ's ``TraceDataEncoder`` layout, :mod:`broker_core.codec.trace_data`) as
timeline events of the trace job: what Java and C++ clients with message trace on write beside the broker's own
trace events."""

from __future__ import annotations

from typing import Any

from broker_core.codec.trace_data import decode_trace_data, is_trace_data


def client_events(row: dict[str, Any], ids: set[str]) -> list[dict[str, Any]]:
    """The records a client wrote in one trace message (``TraceDataEncoder``: Pub, SubBefore, SubAfter,
    EndTransaction) about the messages of ``ids``, as timeline events (``source`` = ``client``): ``client-sent``
    (send start, cost, success, the producer group and store host), ``client-consume-start`` and
    ``client-consumed`` (per consumer group: retry times, the listener's cost and outcome), ``client-transaction-end``
    (the local transaction's state). The client's host is the trace message's born host where the record does not
    name it."""
    if not is_trace_data(bytes(row["body"])):
        return []
    coords = {"segment": row["segment"], "pos": row["pos"], "phy_offset": row["phy_offset"]}
    host = str(row.get("born_host") or "")
    out = []
    for rec in decode_trace_data(bytes(row["body"])):
        if rec["msgId"] not in ids:
            continue
        base = {"msgId": rec["msgId"], "timestamp": rec.get("timestamp", 0), "costMs": rec.get("costTime", 0),
                "topic": rec.get("topic", ""), "group": "", "reconsumeTimes": 0, "status": "", "broker": "",
                "source": "client", "_coords": coords}
        kind = rec["type"]
        if kind == "Pub":
            out.append({**base, "type": "client-sent", "status": "success" if rec["success"] else "failed",
                        "extra": {"producerGroup": rec["groupName"], "storeHost": rec["storeHost"],
                                  "clientHost": rec.get("clientHost") or host, "msgType": rec["msgType"],
                                  "tags": rec["tags"], "keys": rec["keys"], "bodyLength": rec["bodyLength"],
                                  "offsetMsgId": rec["offsetMsgId"]}})
        elif kind == "SubBefore":
            out.append({**base, "type": "client-consume-start", "group": rec["groupName"], "costMs": 0,
                        "reconsumeTimes": rec["retryTimes"],
                        "extra": {"requestId": rec["requestId"], "clientHost": host}})
        elif kind == "SubAfter":
            out.append({**base, "type": "client-consumed", "group": rec["groupName"],
                        "status": rec["contextCode"] or ("SUCCESS" if rec["success"] else "FAILED"),
                        "extra": {"requestId": rec["requestId"], "success": rec["success"], "clientHost": host}})
        else:
            out.append({**base, "type": "client-transaction-end", "costMs": 0, "status": rec["transactionState"],
                        "extra": {"producerGroup": rec["groupName"], "transactionId": rec["transactionId"],
                                  "fromTransactionCheck": rec["fromTransactionCheck"], "clientHost": host}})
    return out


def pair_client_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ``client-consumed`` without its time or group (older and CLOUD clients leave them out) takes them from the
    ``client-consume-start`` of the same ``requestId``: the start plus the cost."""
    starts = {e["extra"]["requestId"]: e for e in events if e["type"] == "client-consume-start"}
    for e in events:
        start = starts.get(e["extra"].get("requestId")) if e["type"] == "client-consumed" else None
        if start is not None:
            e["group"] = e["group"] or start["group"]
            e["timestamp"] = e["timestamp"] or start["timestamp"] + int(e["costMs"])
            e["reconsumeTimes"] = start["reconsumeTimes"]
    return events
