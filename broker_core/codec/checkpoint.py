"""Store checkpoint file (INVENTORY §12.1; layout as upstream ``StoreCheckpoint``), 4 KiB file.

| offset | size | field                                               |
|--------|------|-----------------------------------------------------|
| 0      | 8    | physicMsgTimestamp: store time of the last CommitLog record flushed |
| 8      | 8    | logicsMsgTimestamp: store time of the last ConsumeQueue unit flushed |
| 16     | 8    | indexMsgTimestamp: store time of the last IndexFile entry flushed   |

The rest of the file is zero.
"""

from __future__ import annotations

import struct

from broker_core.codec.errors import CodecError

CHECKPOINT = struct.Struct(">qqq")
CHECKPOINT_FILE_SIZE = 4096


def encode_checkpoint(physic_ts: int, logics_ts: int, index_ts: int) -> bytes:
    return CHECKPOINT.pack(physic_ts, logics_ts, index_ts).ljust(CHECKPOINT_FILE_SIZE, b"\x00")


def decode_checkpoint(buf: bytes | bytearray | memoryview, source: str | None = None) -> tuple[int, int, int]:
    if len(buf) < CHECKPOINT.size:
        raise CodecError(f"truncated checkpoint: {len(buf)} bytes, need {CHECKPOINT.size}", source, 0)
    values = CHECKPOINT.unpack_from(buf, 0)
    for i, v in enumerate(values):
        if v < 0:
            raise CodecError(f"negative timestamp {v} in checkpoint", source, i * 8)
    return values
