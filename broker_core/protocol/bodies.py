"""JSON bodies in fastjson's forms (reference §5.1).

fastjson writes a map whose keys are not strings with the key itself in key position: ``{0:12}`` for
``Map<Integer,Long>`` and ``{{"brokerName":"b","queueId":0,"topic":"t"}:5}`` for ``Map<MessageQueue,Long>``.
Python's ``json`` rejects both. :func:`loads_fastjson` reads standard JSON plus those forms (an object with a
non-string key becomes a list of ``(key, value)`` pairs, keys made hashable); the ``encode_*`` functions write
the exact bodies Java tools parse.
"""

from __future__ import annotations

import json
import re
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class FastjsonPairs(list[tuple[Any, Any]]):
    """An object whose keys are not all strings, as ``(key, value)`` pairs in document order."""


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _skip(s: str, i: int) -> int:
    return _WS.match(s, i).end()  # type: ignore[union-attr]


def _value(s: str, i: int) -> tuple[Any, int]:
    if i >= len(s):
        raise ValueError("unexpected end of JSON text")
    c = s[i]
    if c == "{":
        return _object(s, i)
    if c == "[":
        return _array(s, i)
    return _DECODER.raw_decode(s, i)


def _array(s: str, i: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    i = _skip(s, i + 1)
    if s[i:i + 1] == "]":
        return out, i + 1
    while True:
        v, i = _value(s, i)
        out.append(v)
        i = _skip(s, i)
        if s[i:i + 1] == ",":
            i = _skip(s, i + 1)
        elif s[i:i + 1] == "]":
            return out, i + 1
        else:
            raise ValueError(f"expected ',' or ']' at {i}")


def _object(s: str, i: int) -> tuple[Any, int]:
    pairs: list[tuple[Any, Any]] = []
    i = _skip(s, i + 1)
    if s[i:i + 1] == "}":
        return {}, i + 1
    while True:
        k, i = _value(s, _skip(s, i))
        i = _skip(s, i)
        if s[i:i + 1] != ":":
            raise ValueError(f"expected ':' at {i}")
        v, i = _value(s, _skip(s, i + 1))
        pairs.append((k, v))
        i = _skip(s, i)
        if s[i:i + 1] == ",":
            i = _skip(s, i + 1)
        elif s[i:i + 1] == "}":
            i += 1
            break
        else:
            raise ValueError(f"expected ',' or '}}' at {i}")
    if all(isinstance(k, str) for k, _ in pairs):
        return dict(pairs), i
    return FastjsonPairs((_hashable(k), v) for k, v in pairs), i


def loads_fastjson(raw: bytes | str) -> Any:
    """Parse JSON as fastjson writes it (unquoted integer keys, object keys, any whitespace)."""
    s = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
    value, i = _value(s, _skip(s, 0))
    if _skip(s, i) != len(s):
        raise ValueError(f"extra data after the JSON value at {i}")
    return value


def items(obj: Any) -> list[tuple[Any, Any]]:
    """Key/value pairs of a parsed object whatever its key form (``{"0":1}``, ``{0:1}`` or object keys)."""
    if isinstance(obj, dict):
        return list(obj.items())
    if isinstance(obj, FastjsonPairs):
        return list(obj)
    raise ValueError(f"expected a JSON object, got {type(obj).__name__}")


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


def decode_mq_offset_table(body: bytes) -> dict[tuple[str, str, int], Any]:
    """``offsetTable`` of a body keyed by MessageQueue (ResetOffsetBody, ConsumeStats): mq -> value."""
    doc = loads_fastjson(body)
    return {mq_from_key(k): v for k, v in items(doc.get("offsetTable", {}))}
