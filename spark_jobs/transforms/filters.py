"""Search filters: the spec a caller gives, and its compiled form the record scan runs.

Every filter is ANDed. Cheap raw-byte checks run on every record before any decoding (store time and topic
from the header, the body substring with ``bytes.find`` over the mapping, and literal "must occur" needles
for keys, tags and properties); only records that pass are decoded with the codec and checked exactly.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

from broker_core.codec.message import COMPRESSED_FLAG, MessageRecord

MAX_MS = (1 << 63) - 1


@dataclass
class SearchSpec:
    """What to search for. ``topics`` empty = every topic; times are store times in ms (inclusive).

    - ``key``: one of the record's KEYS; ``tag``: the TAGS value (``"a || b"`` for any of several);
    - ``properties``: property equality, all must hold;
    - ``body_contains`` (text, matched as its UTF-8 bytes) / ``body_contains_hex`` (raw bytes as hex);
    - ``body_regex`` (Python regex over the body decoded as UTF-8; bodies that are not UTF-8 never match) /
      ``body_regex_bytes`` (a bytes regex, given as text whose code points 0-255 are the bytes: latin-1);
    - ``json_path`` + ``json_equals``: JSON bodies whose value at the path (``$.a.b[0].c``) equals the value;
    - ``msg_id``: the unique key or the offset message id.
    Compressed bodies (SYSFLAG bit 0) are inflated before body filters."""

    topics: list[str] = field(default_factory=list)
    begin_ms: int | None = None
    end_ms: int | None = None
    key: str | None = None
    tag: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    body_contains: str | None = None
    body_contains_hex: str | None = None
    body_regex: str | None = None
    body_regex_bytes: str | None = None
    json_path: str | None = None
    json_equals: Any = None
    msg_id: str | None = None
    limit: int | None = None  # rows kept (counts stay exact; ``truncated`` says when rows were cut)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchSpec:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown search fields: {sorted(unknown)}")
        return cls(**data)


def parse_json_path(path: str) -> list[str | int]:
    """``$.a.b[0].c`` or ``a.b.0.c`` -> ``["a", "b", 0, "c"]``."""
    p = path.strip()
    if p.startswith("$"):
        p = p[1:]
    out: list[str | int] = []
    for part in re.findall(r"\[(\d+)\]|\[\"([^\"]*)\"\]|\.?([^.\[\]]+)", p):
        idx, quoted, name = part
        if idx:
            out.append(int(idx))
        elif quoted:
            out.append(quoted)
        elif name.isdigit():
            out.append(int(name))
        else:
            out.append(name)
    if not out:
        raise ValueError(f"empty JSON path {path!r}")
    return out


_MISSING = object()


def json_lookup(doc: Any, path: list[str | int]) -> Any:
    for step in path:
        if isinstance(step, int) and isinstance(doc, list):
            if step >= len(doc):
                return _MISSING
            doc = doc[step]
        elif isinstance(doc, dict) and str(step) in doc:
            doc = doc[str(step)]
        else:
            return _MISSING
    return doc


def plain_body(rec: MessageRecord) -> bytes:
    if rec.sys_flag & COMPRESSED_FLAG:
        try:
            return zlib.decompress(rec.body)
        except zlib.error:
            return rec.body
    return rec.body


class Compiled:
    """The picklable, compiled form of a :class:`SearchSpec` that the executors run."""

    def __init__(self, spec: SearchSpec) -> None:
        self.spec = spec
        self.topics = frozenset(t.encode() for t in spec.topics) or None
        self.lo = spec.begin_ms if spec.begin_ms is not None else -MAX_MS
        self.hi = spec.end_ms if spec.end_ms is not None else MAX_MS
        needle = None
        if spec.body_contains is not None and spec.body_contains_hex is not None:
            raise ValueError("give body_contains or body_contains_hex, not both")
        if spec.body_contains is not None:
            needle = spec.body_contains.encode()
        elif spec.body_contains_hex is not None:
            needle = bytes.fromhex(spec.body_contains_hex)
        self.body_needle = needle or None
        must: list[bytes] = []
        if spec.key:
            must.append(spec.key.encode())
        self.tags = frozenset(t.strip() for t in spec.tag.split("||") if t.strip()) if spec.tag else None
        if self.tags and len(self.tags) == 1:
            must.append(next(iter(self.tags)).encode())
        for k, v in spec.properties.items():
            must.append(f"{k}\x01{v}\x02".encode())
        self.json_path = parse_json_path(spec.json_path) if spec.json_path else None
        if self.json_path is not None and isinstance(spec.json_equals, str) and spec.json_equals.isalnum():
            must.append(spec.json_equals.encode())
        self.must = tuple(must)
        self.text_re = re.compile(spec.body_regex) if spec.body_regex else None
        self.bytes_re = re.compile(spec.body_regex_bytes.encode("latin-1")) if spec.body_regex_bytes else None
        self.needs_body = bool(self.text_re or self.bytes_re or self.json_path)

    def exact(self, rec: MessageRecord) -> bool:
        """The full check on a decoded record (the raw-byte checks are prefilters only)."""
        spec = self.spec
        if spec.key and spec.key not in rec.keys:
            return False
        if self.tags is not None and rec.tags not in self.tags:
            return False
        props = rec.properties
        for k, v in spec.properties.items():
            if props.get(k) != v:
                return False
        if spec.msg_id and spec.msg_id not in (rec.uniq_key, rec.offset_msg_id):
            return False
        body = plain_body(rec) if (self.needs_body or self.body_needle) else rec.body
        if self.body_needle is not None and self.body_needle not in body:
            return False
        if self.bytes_re is not None and not self.bytes_re.search(body):
            return False
        if self.text_re is not None:
            try:
                if not self.text_re.search(body.decode("utf-8")):
                    return False
            except UnicodeDecodeError:
                return False
        if self.json_path is not None:
            try:
                doc = json.loads(body)
            except ValueError:
                return False
            if json_lookup(doc, self.json_path) != spec.json_equals:
                return False
        return True
