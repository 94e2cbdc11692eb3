"""JSON bodies in fastjson's forms (reference §5.1): the parser and writer live in
:mod:`broker_core.codec.fastjson` (config files use them too); the ``encode_*`` functions here write the exact
bodies Java tools parse.
"""

from __future__ import annotations

import json
from typing import Any

from broker_core.codec.fastjson import FastjsonPairs, dumps_fastjson, items, loads_fastjson

__all__ = ["FastjsonPairs", "decode_mq_offset_table", "dumps_fastjson", "encode_reset_offset_body",
           "encode_reset_offset_body_for_c", "items",
           "loads_fastjson", "mq_from_key", "mq_key"]


def mq_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A ``MessageQueue`` as fastjson writes it in key position (keys sorted, compact)."""
    return json.dumps({"brokerName": broker_name, "queueId": queue_id, "topic": topic}, separators=(",", ":"),
                      ensure_ascii=False)


def mq_from_key(key: Any) -> tuple[str, str, int]:
    """``(topic, brokerName, queueId)`` of a parsed MessageQueue key."""
    d = dict(key) if isinstance(key, tuple) else key
    return str(d["topic"]), str(d["brokerName"]), int(d["queueId"])


def encode_reset_offset_body(topic: str, broker_name: str, offsets: dict[int, int]) -> bytes:
    """``ResetOffsetBody``: ``{"offsetTable":{<MessageQueue>:offset,...}}``."""
    inner = ",".join(f"{mq_key(topic, broker_name, q)}:{o}" for q, o in sorted(offsets.items()))
    return ('{"offsetTable":{' + inner + "}}").encode()


def encode_reset_offset_body_for_c(topic: str, broker_name: str, offsets: dict[int, int]) -> bytes:
    """``ResetOffsetBodyForC``: ``{"offsetTable":[MessageQueueForC...]}``, each
    ``{"brokerName","offset","queueId","topic"}`` (what a broker sends clients when the reset came from a CPP
    admin client)."""
    rows = [{"brokerName": broker_name, "offset": o, "queueId": q, "topic": topic} for q, o in sorted(offsets.items())]
    return json.dumps({"offsetTable": rows}, separators=(",", ":"), ensure_ascii=False).encode()


def decode_mq_offset_table(body: bytes) -> dict[tuple[str, str, int], Any]:
    """``offsetTable`` of a body keyed by MessageQueue (ResetOffsetBody, ConsumeStats): mq -> value."""
    doc = loads_fastjson(body)
    return {mq_from_key(k): v for k, v in items(doc.get("offsetTable", {}))}
