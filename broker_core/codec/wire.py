"""Wire formats of the broker protocol: the frame and the message batch.

Frame (every request, response and oneway message), big-endian:

| offset | size | field                                                           |
|--------|------|-----------------------------------------------------------------|
| 0      | 4    | length: bytes after this field (12 + header length + body length) |
| 4      | 1    | version (1)                                                      |
| 5      | 1    | flags: bit 0 response, bit 1 oneway                              |
| 6      | 2    | code: request code, or response code in a response               |
| 8      | 4    | opaque: request id, echoed by the response                       |
| 12     | 4    | header length                                                    |
| 16     | h    | header: a JSON object (UTF-8), string keys                       |
| 16+h   | b    | body: opaque bytes (messages, JSON payloads)                     |

Message batch (the body of SEND_BATCH_MESSAGE; a single send uses the same layout with one entry):

| offset | size | field                                                |
|--------|------|------------------------------------------------------|
| 0      | 4    | entry size (all fields below)                        |
| 4      | 4    | flag                                                 |
| 8      | 4    | body length n                                        |
| 12     | n    | body                                                 |
| 12+n   | 2    | properties length p                                  |
| 14+n   | p    | properties (``name\\x01value\\x02`` pairs, UTF-8)     |

Pull responses carry CommitLog records as stored (see ``message.py``), back to back.
"""

from __future__ import annotations

import struct

from broker_core.codec.errors import CodecError

FRAME_HEADER = struct.Struct(">IBBHII")
FRAME_HEADER_SIZE = FRAME_HEADER.size  # 16
FRAME_LENGTH_SIZE = 4
FRAME_VERSION = 1
FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

BATCH_ENTRY_HEAD = struct.Struct(">iii")
_SHORT = struct.Struct(">H")


def encode_frame(code: int, opaque: int, flags: int, header: bytes, body: bytes = b"") -> bytes:
    return FRAME_HEADER.pack(12 + len(header) + len(body), FRAME_VERSION, flags, code, opaque, len(header)) + \
        header + body


def decode_frame_head(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int, int, int, int, int]:
    """``(length, version, flags, code, opaque, header_length)`` of the frame at ``pos`` (16 bytes needed)."""
    if len(buf) - pos < FRAME_HEADER_SIZE:
        raise CodecError(f"truncated frame head: need {FRAME_HEADER_SIZE} bytes", None, pos)
    return FRAME_HEADER.unpack_from(buf, pos)


def encode_batch(entries: list[tuple[int, bytes, bytes]]) -> bytes:
    """``entries`` of ``(flag, body, properties_bytes)``."""
    parts = []
    for flag, body, props in entries:
        parts.append(BATCH_ENTRY_HEAD.pack(14 + len(body) + len(props), flag, len(body)))
        parts.append(body)
        parts.append(_SHORT.pack(len(props)))
        parts.append(props)
    return b"".join(parts)


def decode_batch(buf: bytes | memoryview, max_entries: int = 1 << 20) -> list[tuple[int, bytes, bytes]]:
    """Inverse of :func:`encode_batch`; raises :class:`CodecError` naming the position of a bad entry."""
    out = []
    pos = 0
    end = len(buf)
    mv = memoryview(buf)
    while pos < end:
        if end - pos < 12:
            raise CodecError("truncated batch entry head", "batch", pos)
        size, flag, blen = BATCH_ENTRY_HEAD.unpack_from(mv, pos)
        if size < 14 or pos + size > end or blen < 0 or 14 + blen > size:
            raise CodecError(f"bad batch entry sizes: entry {size}, body {blen}", "batch", pos)
        body = bytes(mv[pos + 12:pos + 12 + blen])
        (plen,) = _SHORT.unpack_from(mv, pos + 12 + blen)
        if 14 + blen + plen != size:
            raise CodecError(f"bad batch entry: properties length {plen} does not end the entry", "batch", pos)
        props = bytes(mv[pos + 14 + blen:pos + size])
        out.append((flag, body, props))
        if len(out) > max_entries:
            raise CodecError(f"batch holds more than {max_entries} messages", "batch", pos)
        pos += size
    return out
