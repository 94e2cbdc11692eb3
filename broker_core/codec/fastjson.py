"""fastjson's JSON forms (reference §5.1), read and written: the text RocketMQ 4.9 (fastjson 1.2.x) puts in
bodies and config files.

fastjson writes a map whose keys are not strings with the key itself in key position: ``{0:12}`` for
``Map<Integer,Long>`` and ``{{"brokerName":"b","queueId":0,"topic":"t"}:5}`` for ``Map<MessageQueue,Long>``.
Python's ``json`` rejects both. :func:`loads_fastjson` reads standard JSON plus those forms (an object with a
non-string key becomes :class:`FastjsonPairs`, keys made hashable); :func:`dumps_fastjson` writes them:
``int`` keys bare, ``dict``/``tuple``-of-pairs keys as objects, compact for wire bodies or in fastjson's
``PrettyFormat`` (tabs, no space after ``:``) for config files. Readers never depend on whitespace.
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
    return _WS.match(s, i).end()  # type: ignore[union-attr]  # the pattern matches the empty string


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
    try:  # standard JSON (every string key) parses the same with the C decoder, 10x faster on large files
        return json.loads(s)
    except ValueError:
        pass
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


_encode_str = json.encoder.encode_basestring  # json.dumps(s, ensure_ascii=False) for a str, as a bare call


def _key(k: Any) -> str:
    if isinstance(k, str):
        return _encode_str(k)
    if isinstance(k, bool) or not isinstance(k, int | dict | tuple):
        raise TypeError(f"unsupported map key {k!r}")
    if isinstance(k, int):
        return str(k)
    return _dump(dict(k) if isinstance(k, tuple) else k, None, 0)


def _dump(v: Any, indent: str | None, depth: int) -> str:
    if isinstance(v, dict | FastjsonPairs):
        pairs = list(v.items()) if isinstance(v, dict) else list(v)
        if not pairs:
            return "{}"
        if indent is None:
            return "{" + ",".join(f"{_key(k)}:{_dump(x, None, 0)}" for k, x in pairs) + "}"
        pad = "\n" + indent * (depth + 1)
        inner = ",".join(f"{pad}{_key(k)}:{_dump(x, indent, depth + 1)}" for k, x in pairs)
        return "{" + inner + "\n" + indent * depth + "}"
    if isinstance(v, list | tuple | set | frozenset):
        seq = list(v)
        if not seq:
            return "[]"
        if indent is None:
            return "[" + ",".join(_dump(x, None, 0) for x in seq) + "]"
        pad = "\n" + indent * (depth + 1)
        return "[" + ",".join(pad + _dump(x, indent, depth + 1) for x in seq) + "\n" + indent * depth + "]"
    if isinstance(v, str):  # the scalars json.dumps would write, without its per-call encoder (a config file of
        return _encode_str(v)  # 50k topics holds 400k of them)
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if v is None or isinstance(v, float):
        return json.dumps(v, ensure_ascii=False)
    raise TypeError(f"cannot encode {type(v).__name__} as JSON")


def dumps_fastjson(value: Any, pretty: bool = False) -> str:
    """``value`` as fastjson writes it: ``int`` map keys bare, object keys as objects, insertion order kept
    (callers sort where fastjson would). ``pretty`` gives the config-file form (tab indents)."""
    return _dump(value, "\t" if pretty else None, 0)
