"""Hash functions stored in files, both Java's ``String.hashCode`` as RocketMQ 4.9 computes them
(reference §7.2, §7.3), so a store directory written by Apache RocketMQ is read in place.

- Tag hash (ConsumeQueue ``tagsCode``): ``String.hashCode()`` of the tag over UTF-16 code units, as a
  signed 32-bit value stored in a 64-bit field; ``"TagA"`` hashes to 2598919.
- IndexFile key hash: ``abs(String.hashCode(topic + "#" + key))``; Java's ``abs(Integer.MIN_VALUE)``
  stays negative and RocketMQ stores 0 for it. Collisions are resolved by reading the record and
  comparing the key.

``hashCode`` is evaluated as one polynomial ``sum(unit[i] * 31**(n-1-i)) mod 2**32`` whose powers are
cached per length, so the loop runs in C (``sum(map(mul, ...))``) rather than per character in Python.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from operator import mul

from broker_core.codec.native import NATIVE

_MASK = 0xFFFFFFFF
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


@lru_cache(maxsize=1024)
def _powers(n: int) -> tuple[int, ...]:
    """``31**(n-1-i) mod 2**32`` for i in 0..n-1."""
    out = [1] * n
    for i in range(n - 2, -1, -1):
        out[i] = (out[i + 1] * 31) & _MASK
    return tuple(out)


def java_hash_u32(s: str) -> int:
    """Java ``String.hashCode()`` of ``s`` as an unsigned 32-bit value."""
    if s.isascii():
        units: bytes | memoryview = s.encode("ascii")
    else:
        units = memoryview(s.encode(_UTF16)).cast("H")  # non-BMP characters count as two units
    return sum(map(mul, units, _powers(len(units)))) & _MASK


@lru_cache(maxsize=65536)
def tag_hash(tag: str) -> int:
    """Java ``String.hashCode()`` of ``tag`` as a signed 32-bit value."""
    h = java_hash_u32(tag)
    return h - 0x100000000 if h & 0x80000000 else h


def index_key_hash(key: str) -> int:
    """RocketMQ's IndexFile hash of ``key`` (``topic#key``): ``abs(hashCode)``, 0 for ``Integer.MIN_VALUE``."""
    h = java_hash_u32(key)
    if h & 0x80000000:
        h = 0x100000000 - h
        if h == 0x80000000:
            return 0
    return h


def index_key(topic: str, key: str) -> str:
    """Upstream ``buildKey``: ``topic + "#" + key``."""
    return f"{topic}#{key}"


# the pure functions stay reachable for the native-vs-pure equality tests
py_java_hash_u32, py_index_key_hash = java_hash_u32, index_key_hash
if NATIVE is not None:
    java_hash_u32 = NATIVE.java_hash_u32
    index_key_hash = NATIVE.index_key_hash
