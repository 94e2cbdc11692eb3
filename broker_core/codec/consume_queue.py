"""ConsumeQueue unit (INVENTORY §9), 20 bytes, big-endian.

| offset | size | field                              |
|--------|------|------------------------------------|
| 0      | 8    | CommitLog physical offset (long)   |
| 8      | 4    | message size (int)                 |
| 12     | 8    | tagsCode (long): tag hash, or the deliver time for the delay topic |

Unit ``n`` of a queue lives at byte ``n * 20``; a file holds 300,000 units (6,000,000 bytes). A unit whose
size is 0 marks the end of written data. A unit written to pad the start of a queue whose first file
does not begin at offset 0 has physical offset 0 and size ``BLANK_UNIT_SIZE``.
"""

from __future__ import annotations

import struct

from broker_core.codec.errors import CodecError

CQ_UNIT = struct.Struct(">qiq")
CQ_STORE_UNIT_SIZE = CQ_UNIT.size  # 20
DEFAULT_UNITS_PER_FILE = 300_000
BLANK_UNIT_SIZE = 0x7FFFFFFF


def encode_unit(phy_offset: int, size: int, tags_code: int) -> bytes:
    return CQ_UNIT.pack(phy_offset, size, tags_code)


def decode_unit(buf: bytes | bytearray | memoryview, pos: int = 0, source: str | None = None) -> tuple[int, int, int]:
    """``(phy_offset, size, tags_code)``; raises :class:`CodecError` on a short buffer."""
    if pos < 0 or pos + CQ_STORE_UNIT_SIZE > len(buf):
        raise CodecError(f"truncated ConsumeQueue unit: need {CQ_STORE_UNIT_SIZE} bytes", source, pos)
    return CQ_UNIT.unpack_from(buf, pos)
