"""Wire formats of RocketMQ 4.x remoting: the frame, the ROCKETMQ binary command header, the message batch.

Frame (every request, response and oneway command), big-endian (reference §1.1):

| offset | size | field                                                                    |
|--------|------|--------------------------------------------------------------------------|
| 0      | 4    | length: bytes after this word = 4 + header length + body length          |
| 4      | 4    | header word: bits 31..24 serialize type (0 JSON, 1 ROCKETMQ), 23..0 hlen |
| 8      | hlen | header: JSON text, or the binary header below                            |
| 8+hlen | rest | body (its length is derived, not stored)                                 |

ROCKETMQ binary header (reference §1.4):

| field     | size   | notes                                                                 |
|-----------|--------|-----------------------------------------------------------------------|
| code      | i16    | request code, or response code in a response                          |
| language  | u8     | ``LanguageCode`` ordinal                                              |
| version   | i16    | sender's version ordinal                                              |
| opaque    | i32    | request id, echoed by the response                                    |
| flag      | i32    | bit 0 response, bit 1 oneway                                          |
| remarkLen | i32    | 0 means null/empty                                                    |
| remark    | n      | UTF-8                                                                 |
| extLen    | i32    | byte size of the map block that follows; 0 means no map               |
| entries   | extLen | repeated: keyLen i16, key, valLen i32, value (UTF-8); last key wins   |

Message batch (the body of SEND_BATCH_MESSAGE, ``MessageDecoder.encodeMessages``, reference §3.3); entries are
concatenated with no count:

| offset | size | field                                                  |
|--------|------|--------------------------------------------------------|
| 0      | 4    | TOTALSIZE of this entry = 22 + body length + prop length |
| 4      | 4    | MAGICCODE (0 from clients; ignored)                    |
| 8      | 4    | BODYCRC (0 from clients; the broker computes it)       |
| 12     | 4    | FLAG (the message's user flag)                         |
| 16     | 4    | BODYLEN n                                              |
| 20     | n    | body                                                   |
| 20+n   | 2    | PROPLEN p (i16)                                        |
| 22+n   | p    | properties (``name\\x01value`` joined by ``\\x02``, UTF-8) |

Pull, query and view responses carry CommitLog records as stored (see ``message.py``), back to back.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import TypeVar

from broker_core.codec.errors import CodecError
from broker_core.codec.native import NATIVE

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

FRAME_HEAD = struct.Struct(">II")
FRAME_HEAD_SIZE = FRAME_HEAD.size  # 8: length word + header word
FRAME_LENGTH_SIZE = 4
HEADER_LENGTH_MASK = 0xFFFFFF

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

BINARY_HEAD = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remarkLen
BINARY_HEAD_SIZE = BINARY_HEAD.size  # 17
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

BATCH_ENTRY_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCrc, flag, bodyLen
BATCH_ENTRY_FIXED = BATCH_ENTRY_HEAD.size + 2  # 22


def encode_frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """One frame: the two head words, the header bytes, the body."""
    return FRAME_HEAD.pack(4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def decode_frame_head(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int, int]:
    """``(length, serialize_type, header_length)`` of the frame at ``pos`` (8 bytes needed)."""
    if len(buf) - pos < FRAME_HEAD_SIZE:
        raise CodecError(f"truncated frame head: need {FRAME_HEAD_SIZE} bytes", None, pos)
    length, word = FRAME_HEAD.unpack_from(buf, pos)
    return length, word >> 24, word & HEADER_LENGTH_MASK


def encode_binary_header(code: int, language: int, version: int, opaque: int, flag: int, remark: str | None,
                         ext_fields: dict[str, str] | None) -> bytes:
    """The ROCKETMQ header; ``code`` and ``version`` must fit an i16. Null keys or values are skipped; any other
    key or value that is not text raises TypeError (the caller turns its fields to text first)."""
    rb = remark.encode() if remark else b""
    out = bytearray(BINARY_HEAD.pack(code, language, version, opaque, flag, len(rb)))
    out += rb
    out += b"\0\0\0\0"  # extLen, set below
    start = len(out)
    if ext_fields:
        for k, v in ext_fields.items():
            if k is None or v is None:
                continue
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"extFields {k!r}: {v!r} is not text")
            kb = k.encode()
            vb = v.encode()
            out += len(kb).to_bytes(2, "big")
            out += kb
            out += len(vb).to_bytes(4, "big")
            out += vb
    _I32.pack_into(out, start - 4, len(out) - start)
    return bytes(out)


def encode_binary_frame(code: int, language: int, version: int, opaque: int, flag: int, remark: str | None,
                        ext_fields: dict[str, str] | None, body: bytes = b"") -> bytes:
    """A whole frame whose header is the ROCKETMQ binary one (:func:`encode_binary_header`), then ``body``."""
    return encode_frame(SERIALIZE_ROCKETMQ, py_encode_binary_header(code, language, version, opaque, flag, remark,
                                                                    ext_fields), body)


def decode_binary_header(buf: bytes | bytearray | memoryview
                         ) -> tuple[int, int, int, int, int, str | None, dict[str, str]]:
    """``(code, language, version, opaque, flag, remark, ext_fields)``; raises :class:`CodecError` when a
    length runs past the header (the whole header must be consumed exactly by its fields)."""
    if not isinstance(buf, bytes):
        buf = bytes(buf)
    end = len(buf)
    if end < BINARY_HEAD_SIZE + 4:
        raise CodecError(f"binary header of {end} bytes is shorter than its {BINARY_HEAD_SIZE + 4} fixed bytes",
                         "header", 0)
    code, language, version, opaque, flag, rlen = BINARY_HEAD.unpack_from(buf, 0)
    pos = BINARY_HEAD_SIZE
    if rlen < 0 or pos + rlen + 4 > end:
        raise CodecError(f"remark length {rlen} runs past the header", "header", pos - 4)
    remark = buf[pos:pos + rlen].decode() if rlen else None
    pos += rlen
    (ext_len,) = _I32.unpack_from(buf, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != end:
        raise CodecError(f"extFields length {ext_len} does not end the header ({end - pos} bytes left)",
                         "header", pos - 4)
    ext: dict[str, str] = {}
    i16 = _I16.unpack_from
    i32 = _I32.unpack_from
    while pos < end:
        if end - pos < 6:
            raise CodecError("truncated extFields entry", "header", pos)
        (klen,) = i16(buf, pos)
        kend = pos + 2 + klen
        if klen < 0 or kend + 4 > end:
            raise CodecError(f"extFields key length {klen} runs past the header", "header", pos)
        (vlen,) = i32(buf, kend)
        vend = kend + 4 + vlen
        if vlen < 0 or vend > end:
            raise CodecError(f"extFields value length {vlen} runs past the header", "header", kend)
        ext[buf[pos + 2:kend].decode()] = buf[kend + 4:vend].decode()
        pos = vend
    return code, language, version, opaque, flag, remark, ext


def encode_batch(entries: list[tuple[int, bytes, bytes]]) -> bytes:
    """``entries`` of ``(flag, body, properties_bytes)`` in RocketMQ's batch layout (MAGIC and CRC 0)."""
    parts = []
    for entry in entries:
        if not isinstance(entry, tuple) or len(entry) != 3:
            raise TypeError("a batch entry must be a (flag, body, properties) tuple")
        flag, body, props = entry
        parts.append(BATCH_ENTRY_HEAD.pack(BATCH_ENTRY_FIXED + len(body) + len(props), 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(_I16.pack(len(props)))
        parts.append(props)
    return b"".join(parts)


def batch_entries(buf: bytes | memoryview, start: int = 0) -> Iterator[tuple[int, int, int, int, int, int]]:
    """The entries of a batch body from byte ``start``: ``(entry_start, flag, body_at, body_len, props_at,
    props_len)`` each, walked by BODYLEN and PROPLEN as RocketMQ does. Raises :class:`CodecError` naming the
    position of an entry that does not fit."""
    pos, end = start, len(buf)
    while pos < end:
        if end - pos < BATCH_ENTRY_FIXED:
            raise CodecError("truncated batch entry head", "batch", pos)
        _size, _magic, _crc, flag, blen = BATCH_ENTRY_HEAD.unpack_from(buf, pos)
        body_at = pos + BATCH_ENTRY_HEAD.size
        if blen < 0 or body_at + blen + 2 > end:
            raise CodecError(f"bad batch entry: body length {blen} runs past the batch", "batch", pos)
        (plen,) = _I16.unpack_from(buf, body_at + blen)
        props_at = body_at + blen + 2
        if plen < 0 or props_at + plen > end:
            raise CodecError(f"bad batch entry: properties length {plen} runs past the batch", "batch", pos)
        yield pos, flag, body_at, blen, props_at, plen
        pos = props_at + plen


def decode_batch(buf: bytes | memoryview, max_entries: int = 1 << 20) -> list[tuple[int, bytes, bytes]]:
    """Inverse of :func:`encode_batch`: ``(flag, body, properties_bytes)`` per entry. Raises :class:`CodecError`
    naming the position of a bad entry, or past ``max_entries`` entries."""
    out = []
    mv = memoryview(buf)
    for pos, flag, body_at, blen, props_at, plen in batch_entries(mv):
        out.append((flag, bytes(mv[body_at:body_at + blen]), bytes(mv[props_at:props_at + plen])))
        if len(out) > max_entries:
            raise CodecError(f"batch holds more than {max_entries} messages", "batch", pos)
    return out


T = TypeVar("T")


def decode_frame(data: bytes, max_frame_bytes: int, factory: Callable[..., T], languages: tuple[str, ...],
                 other: str) -> T | None:
    """The command of ``data`` when it is exactly one whole frame with a ROCKETMQ binary header (a request as it
    usually arrives): ``factory(code, opaque, flag, ext_fields, body, remark or "", language, version,
    SERIALIZE_ROCKETMQ)``, with ``language`` the name ``languages[ordinal]`` (``other`` past its end). None for
    anything else (part of a frame, more than one, a JSON header), and for a frame over ``max_frame_bytes``, with
    impossible lengths, or whose header does not decode: the caller's general decoder answers those, and says
    why."""
    if not isinstance(data, bytes) or len(data) < FRAME_HEAD_SIZE:
        return None
    length, word = FRAME_HEAD.unpack_from(data, 0)
    hlen = word & HEADER_LENGTH_MASK
    if (length + 4 != len(data) or length + 4 > max_frame_bytes or word >> 24 != SERIALIZE_ROCKETMQ or length < 4
            or hlen > length - 4):
        return None
    try:
        code, lang, version, opaque, flag, remark, ext = py_decode_binary_header(data[FRAME_HEAD_SIZE:8 + hlen])
    except (CodecError, UnicodeDecodeError):
        return None
    return factory(code, opaque, flag, ext, data[8 + hlen:], remark or "",
                   languages[lang] if lang < len(languages) else other, version, SERIALIZE_ROCKETMQ)


def encode_send_ok(opaque: int, language: int, version: int, host: bytes, port: int, phy: int, queue_id: int,
                   queue_offset: int, region: str, trace_on: str) -> bytes:
    """The answer to a stored send (SUCCESS, the response flag, no remark, no body) as the broker writes it:
    ``msgId`` (the offset message id of ``host:port`` and ``phy``), ``queueId``, ``queueOffset``, ``MSG_REGION``,
    ``TRACE_ON``, in that order."""
    if len(host) != 4:  # the offset message id packs 4 bytes (and would pad or cut others)
        raise ValueError("host must be 4 bytes")
    # message_id.encode_offset_msg_id's layout, written here: that module needs socket, which the sans-I/O protocol
    # package (this module's importer) must not import
    msg_id = (host + struct.pack(">iq", port, phy)).hex().upper()
    return py_encode_binary_frame(0, language, version, opaque, FLAG_RESPONSE, None, {
        "msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(queue_offset), "MSG_REGION": region,
        "TRACE_ON": trace_on})


# the pure functions stay reachable for the native-vs-pure equality tests
py_decode_frame, py_encode_send_ok = decode_frame, encode_send_ok
py_encode_binary_header, py_decode_binary_header, py_decode_batch, py_encode_batch = (
    encode_binary_header, decode_binary_header, decode_batch, encode_batch)
py_encode_binary_frame = encode_binary_frame
if NATIVE is not None:
    encode_binary_frame = NATIVE.encode_binary_frame
    encode_batch = NATIVE.encode_batch
    encode_binary_header = NATIVE.encode_binary_header
    decode_binary_header = NATIVE.decode_binary_header
    decode_frame = NATIVE.decode_frame
    encode_send_ok = NATIVE.encode_send_ok
    decode_batch = NATIVE.decode_batch
