"""IndexFile (INVENTORY §10): a 40-byte header, ``slots`` 4-byte hash slots, ``entries`` 20-byte entries.

Header (40 bytes):

| offset | size | field                                            |
|--------|------|--------------------------------------------------|
| 0      | 8    | beginTimestamp: min store time in the file (ms)  |
| 8      | 8    | endTimestamp: max store time (ms)                |
| 16     | 8    | beginPhyOffset: min CommitLog offset             |
| 24     | 8    | endPhyOffset: max CommitLog offset               |
| 32     | 4    | hashSlotCount: used slots                        |
| 36     | 4    | indexCount: next entry number, starts at 1       |

Slot ``s`` (4 bytes) at ``40 + s*4`` holds the newest entry number of its chain (0 = empty).
Entry ``n`` (20 bytes) at ``40 + slots*4 + n*20``:

| offset | size | field                                              |
|--------|------|----------------------------------------------------|
| 0      | 4    | keyHash                                            |
| 4      | 8    | phyOffset                                          |
| 12     | 4    | timeDiff: seconds since the header beginTimestamp  |
| 16     | 4    | prevIndex: previous head of the slot chain (0 = none) |

Default 5,000,000 slots and 20,000,000 entries: 420,000,040 bytes a file.
"""

from __future__ import annotations

import struct

from broker_core.codec.errors import CodecError

INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
HASH_SLOT = struct.Struct(">i")
HASH_SLOT_SIZE = HASH_SLOT.size  # 4
INDEX_ENTRY = struct.Struct(">iqii")
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20
DEFAULT_HASH_SLOTS = 5_000_000
DEFAULT_INDEX_ENTRIES = 20_000_000
INVALID_INDEX = 0


def index_file_size(slots: int, entries: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + entries * INDEX_ENTRY_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(slots: int, index_no: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + index_no * INDEX_ENTRY_SIZE


def decode_header(
    buf: bytes | bytearray | memoryview, source: str | None = None,
) -> tuple[int, int, int, int, int, int]:
    """``(begin_ts, end_ts, begin_phy, end_phy, hash_slot_count, index_count)``."""
    if len(buf) < INDEX_HEADER_SIZE:
        raise CodecError(f"truncated IndexFile header: {len(buf)} bytes, need {INDEX_HEADER_SIZE}", source, 0)
    header = INDEX_HEADER.unpack_from(buf, 0)
    if header[5] < 1 or header[4] < 0:
        raise CodecError(f"bad IndexFile header counts: slots used {header[4]}, index count {header[5]}", source, 32)
    return header
