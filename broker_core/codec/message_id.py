"""Message ids.

Offset message id (INVENTORY §7), hex of 16 bytes, uppercase, 32 characters for IPv4:

| offset | size | field                              |
|--------|------|------------------------------------|
| 0      | 4    | store host IPv4                    |
| 4      | 4    | store port (int)                   |
| 8      | 8    | CommitLog physical offset (long)   |

Unique id (``UNIQ_KEY``), assigned by producers to every message (also inside batches), 32 hex chars:

| offset | size | field                                            |
|--------|------|--------------------------------------------------|
| 0      | 4    | host prefix (IPv4 or random)                     |
| 4      | 2    | process id (low 16 bits)                         |
| 6      | 2    | random per generator                             |
| 8      | 4    | seconds since the generator started (wraps)      |
| 12     | 4    | counter (wraps)                                  |
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time

from broker_core.codec.errors import CodecError

OFFSET_MSG_ID = struct.Struct(">4siq")
OFFSET_MSG_ID_HEX_LEN = 32


def encode_offset_msg_id(store_ip: bytes, store_port: int, phy_offset: int) -> str:
    return OFFSET_MSG_ID.pack(store_ip, store_port, phy_offset).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """``(ip, port, phy_offset)``. Raises :class:`CodecError` for anything that is not 32 hex chars."""
    if len(msg_id) != OFFSET_MSG_ID_HEX_LEN:
        raise CodecError(f"offset message id must be {OFFSET_MSG_ID_HEX_LEN} hex characters, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise CodecError(f"offset message id is not hex: {msg_id!r}") from None
    ip, port, offset = OFFSET_MSG_ID.unpack(raw)
    if offset < 0:
        raise CodecError(f"offset message id has a negative offset: {msg_id!r}")
    return socket.inet_ntoa(ip), port, offset


_UNIQ = struct.Struct(">4sHHII")


class UniqueIdGenerator:
    """Thread-safe generator of 32-hex-character unique message ids."""

    def __init__(self, host_ip: str | None = None) -> None:
        try:
            prefix = socket.inet_aton(host_ip) if host_ip else os.urandom(4)
        except OSError:
            prefix = os.urandom(4)
        self._prefix = prefix
        self._pid = os.getpid() & 0xFFFF
        self._rand = int.from_bytes(os.urandom(2), "big")
        self._start = time.monotonic()
        # next() on an itertools.count is atomic under the GIL: no lock, no id given out twice
        self._counter = itertools.count(int.from_bytes(os.urandom(2), "big"))
        # the first 8 bytes never change: their hex is computed once (the layout is _UNIQ's)
        self._head = _UNIQ.pack(prefix, self._pid, self._rand, 0, 0)[:8].hex().upper()

    def next_id(self) -> str:
        secs = int(time.monotonic() - self._start) & 0xFFFFFFFF
        tail = (secs << 32) | (next(self._counter) & 0xFFFFFFFF)
        return self._head + tail.to_bytes(8, "big").hex().upper()
