"""Hash functions stored in files.

- Tag hash (ConsumeQueue ``tagsCode``): Java ``String.hashCode()`` over UTF-16 code units, as a signed
  64-bit field; ``"TagA"`` hashes to 2598919 as in the seeds' dump example.
- IndexFile key hash: ``crc32(UTF-8 key) & 0x7FFFFFFF``. The seeds leave the method open (upstream uses
  ``abs(String.hashCode())``); crc32 runs in C, which matters on the put path. Collisions are resolved
  by reading the record and comparing the key.
"""

from __future__ import annotations

import struct
import zlib
from functools import lru_cache


@lru_cache(maxsize=65536)
def tag_hash(tag: str) -> int:
    """Java ``String.hashCode()`` of ``tag`` as a signed 32-bit value."""
    data = tag.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h >= 0x80000000 else h


def index_key_hash(key: str) -> int:
    """Non-negative 31-bit hash of an index key (``topic#key``)."""
    return zlib.crc32(key.encode()) & 0x7FFFFFFF


def index_key(topic: str, key: str) -> str:
    """Upstream ``buildKey``: ``topic + "#" + key``."""
    return f"{topic}#{key}"
