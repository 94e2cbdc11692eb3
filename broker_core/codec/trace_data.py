"""RocketMQ's client-side message trace records (``TraceDataEncoder``), as Java and C++ clients with message trace
on write them into ``RMQ_SYS_TRACE_TOPIC`` (or their ``customizedTraceTopic``). Text, UTF-8; stdlib only.

A trace message's body is records back to back. Fields are separated by ``CONTENT_SPLITOR`` (U+0001) and each record
ends with ``FIELD_SPLITOR`` (U+0002). Layouts, field by field:

==============  ==================================================================================================
record          fields
==============  ==================================================================================================
Pub (14)        ``Pub``, timeStamp, regionId, groupName, topic, msgId (unique id), tags, keys, storeHost,
                bodyLength, costTime, msgType (ordinal), offsetMsgId, success; 12 to 15 accepted (15th: clientHost)
SubBefore (8)   ``SubBefore``, timeStamp, regionId, groupName, requestId, msgId, retryTimes, keys
SubAfter (9)    ``SubAfter``, requestId, msgId, costTime, success, keys, contextCode, timeStamp, groupName
                (6 or 7 fields from older or CLOUD clients)
EndTransaction  ``EndTransaction``, timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost, msgType,
(13)            transactionId, transactionState (COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW), fromTransactionCheck
==============  ==================================================================================================

msgType: 0 Normal_Msg, 1 Trans_Msg_Half, 2 Trans_msg_Commit, 3 Delay_Msg, 4 Order_Msg. contextCode is the
``ConsumeReturnType`` ordinal: 0 SUCCESS, 1 TIME_OUT, 2 EXCEPTION, 3 RETURNNULL, 4 FAILED. A null tags or keys is the
literal ``null``. Decoding splits as Java's ``String.split`` (trailing empty fields vanish) and skips records it
cannot read rather than failing the whole body.
"""

from __future__ import annotations

from typing import Any

CONTENT_SPLITOR = "\u0001"
FIELD_SPLITOR = "\u0002"
MSG_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")
CONSUME_RETURN_TYPES = ("SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED")
RECORD_TYPES = ("Pub", "SubBefore", "SubAfter", "EndTransaction")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _null(text: str) -> str:
    return "" if text == "null" else text


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def _msg_type(text: str) -> str:
    n = _int(text)
    return MSG_TYPES[n] if 0 <= n < len(MSG_TYPES) else text


def _pub(f: list[str]) -> dict[str, Any]:
    out = {"type": "Pub", "timestamp": _int(f[1]), "regionId": f[2], "groupName": f[3], "topic": f[4],
           "msgId": f[5], "tags": _null(f[6]), "keys": _null(f[7]), "storeHost": f[8], "bodyLength": _int(f[9]),
           "costTime": _int(f[10]), "msgType": _msg_type(f[11])}
    out["offsetMsgId"] = f[12] if len(f) > 12 else ""
    out["success"] = _bool(f[13]) if len(f) > 13 else True
    out["clientHost"] = f[14] if len(f) > 14 else ""
    return out


def _sub_before(f: list[str]) -> dict[str, Any]:
    return {"type": "SubBefore", "timestamp": _int(f[1]), "regionId": f[2], "groupName": f[3], "requestId": f[4],
            "msgId": f[5], "retryTimes": _int(f[6]), "keys": _null(f[7]) if len(f) > 7 else ""}


def _sub_after(f: list[str]) -> dict[str, Any]:
    code = _int(f[6]) if len(f) > 6 else -1
    return {"type": "SubAfter", "requestId": f[1], "msgId": f[2], "costTime": _int(f[3]), "success": _bool(f[4]),
            "keys": _null(f[5]),
            "contextCode": CONSUME_RETURN_TYPES[code] if 0 <= code < len(CONSUME_RETURN_TYPES) else "",
            "timestamp": _int(f[7]) if len(f) > 7 else 0, "groupName": f[8] if len(f) > 8 else ""}


def _end_transaction(f: list[str]) -> dict[str, Any]:
    return {"type": "EndTransaction", "timestamp": _int(f[1]), "regionId": f[2], "groupName": f[3], "topic": f[4],
            "msgId": f[5], "tags": _null(f[6]), "keys": _null(f[7]), "storeHost": f[8], "msgType": _msg_type(f[9]),
            "transactionId": f[10], "transactionState": f[11], "fromTransactionCheck": _bool(f[12])}


_MIN_FIELDS = {"Pub": 12, "SubBefore": 7, "SubAfter": 6, "EndTransaction": 13}
_DECODERS = {"Pub": _pub, "SubBefore": _sub_before, "SubAfter": _sub_after, "EndTransaction": _end_transaction}


def is_trace_data(body: bytes | bytearray | memoryview) -> bool:
    """Whether ``body`` starts like a client trace record (not the broker's own JSON trace events)."""
    head = bytes(body[:16])
    return CONTENT_SPLITOR.encode() in head and any(head.startswith(t.encode()) for t in RECORD_TYPES)


def decode_trace_data(body: bytes | str) -> list[dict[str, Any]]:
    """The records of one trace message's body, in order (unreadable ones skipped)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    out = []
    for raw in text.split(FIELD_SPLITOR):
        fields = raw.split(CONTENT_SPLITOR)
        while fields and fields[-1] == "":  # String.split drops trailing empty strings
            fields.pop()
        if not fields:
            continue
        kind = fields[0].strip()
        if kind not in _DECODERS or len(fields) < _MIN_FIELDS[kind]:
            continue
        out.append(_DECODERS[kind](fields))
    return out


def encode_trace_record(record: dict[str, Any]) -> str:
    """One record in the encoder's layout (the inverse of :func:`decode_trace_data` for full records)."""
    kind = record["type"]

    def s(v: Any) -> str:
        if v is None or v == "":
            return "null"
        return str(v).lower() if isinstance(v, bool) else str(v)

    if kind == "Pub":
        fields = [kind, record["timestamp"], record.get("regionId", "DefaultRegion"), record["groupName"],
                  record["topic"], record["msgId"], s(record.get("tags")), s(record.get("keys")), record["storeHost"],
                  record.get("bodyLength", 0), record.get("costTime", 0),
                  MSG_TYPES.index(record.get("msgType", "Normal_Msg")), record.get("offsetMsgId", ""),
                  s(bool(record.get("success", True)))]
    elif kind == "SubBefore":
        fields = [kind, record["timestamp"], record.get("regionId", "DefaultRegion"), record["groupName"],
                  record["requestId"], record["msgId"], record.get("retryTimes", 0), s(record.get("keys"))]
    elif kind == "SubAfter":
        fields = [kind, record["requestId"], record["msgId"], record.get("costTime", 0),
                  s(bool(record.get("success", True))), s(record.get("keys")),
                  CONSUME_RETURN_TYPES.index(record.get("contextCode", "SUCCESS")), record["timestamp"],
                  record["groupName"]]
    else:
        raise ValueError(f"cannot encode a {kind!r} trace record")
    return CONTENT_SPLITOR.join(str(f) for f in fields) + FIELD_SPLITOR
