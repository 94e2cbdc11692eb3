"""HA byte layouts (RocketMQ 4.9 ``HAConnection`` / ``HAClient``, reference §8). Plain TCP, no framing.

Slave -> master, repeated for the life of the connection:

| offset | size | field |
|---|---|---|
| 0 | 8 | the slave's max CommitLog offset (i64, big-endian) |

Master -> slave, one per chunk (a header with size 0 is a heartbeat):

| offset | size | field |
|---|---|---|
| 0 | 8 | CommitLog offset of the chunk's first byte (i64) |
| 8 | 4 | body size (i32) |
| 12 | size | raw CommitLog bytes |
"""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
TRANSFER_HEADER = struct.Struct(">qi")
assert REPORT.size == 8 and TRANSFER_HEADER.size == 12


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def take_last_report(buf: bytearray) -> int | None:
    """The master's read: consume every complete 8-byte group at the start of ``buf`` and return the last one's
    value (upstream reads the last aligned group of its buffer); None when no complete group is there."""
    end = len(buf) - len(buf) % 8
    if end == 0:
        return None
    value: int = REPORT.unpack_from(buf, end - 8)[0]
    del buf[:end]
    return value


def encode_transfer(offset: int, body: bytes = b"") -> bytes:
    return TRANSFER_HEADER.pack(offset, len(body)) + body


class TransferReader:
    """The slave's incremental parse of the master's stream into ``(offset, body)`` chunks."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self.buf += data
        out = []
        pos = 0
        buf = self.buf
        while len(buf) - pos >= TRANSFER_HEADER.size:
            offset, size = TRANSFER_HEADER.unpack_from(buf, pos)
            if size < 0:
                raise ValueError(f"HA transfer header with a negative size {size} at offset {offset}")
            end = pos + TRANSFER_HEADER.size + size
            if end > len(buf):
                break
            out.append((offset, bytes(buf[pos + TRANSFER_HEADER.size:end])))
            pos = end
        del buf[:pos]
        return out
