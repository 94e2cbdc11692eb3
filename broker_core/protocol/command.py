"""RemotingCommand and the incremental frame decoder (sans-I/O).

A command is a code, an opaque request id, flags, a JSON header (string keys, JSON values) and a body.
:class:`FrameDecoder` turns a byte stream into commands; malformed input raises :class:`ProtocolError`,
after which the connection must be closed (framing is lost).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from broker_core.codec.wire import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    FRAME_VERSION,
    encode_frame,
)

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_HEADER_BYTES = 64 * 1024


class ProtocolError(ValueError):
    """Bytes that break framing (bad version, oversized frame, header that is not a JSON object)."""


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flags: int = 0
    header: dict[str, Any] = field(default_factory=dict)
    body: bytes = b""

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flags & FLAG_ONEWAY)

    @property
    def remark(self) -> str:
        return str(self.header.get("remark", ""))

    def encode(self) -> bytes:
        header = json.dumps(self.header, separators=(",", ":")).encode() if self.header else b""
        return encode_frame(self.code, self.opaque, self.flags, header, self.body)

    @classmethod
    def request(cls, code: int, header: dict[str, Any] | None = None, body: bytes = b"", *,
                oneway: bool = False) -> RemotingCommand:
        return cls(int(code), 0, FLAG_ONEWAY if oneway else 0, header or {}, body)

    def response(self, code: int, remark: str = "", header: dict[str, Any] | None = None,
                 body: bytes = b"") -> RemotingCommand:
        h = dict(header or {})
        if remark:
            h["remark"] = remark
        return RemotingCommand(int(code), self.opaque, FLAG_RESPONSE, h, body)


class FrameDecoder:
    """Accumulates bytes and yields complete commands."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.max_header_bytes = max_header_bytes
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        self._buf += data
        out = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= FRAME_HEADER_SIZE:
            length, version, flags, code, opaque, hlen = FRAME_HEADER.unpack_from(buf, pos)
            if version != FRAME_VERSION:
                raise ProtocolError(f"unsupported frame version {version}")
            if length > self.max_frame_bytes:
                raise ProtocolError(f"frame of {length} bytes exceeds the limit of {self.max_frame_bytes}")
            if length < 12 or hlen > length - 12 or hlen > self.max_header_bytes:
                raise ProtocolError(f"bad frame lengths: frame {length}, header {hlen}")
            end = pos + 4 + length
            if len(buf) < end:
                break
            hstart = pos + FRAME_HEADER_SIZE
            header: dict[str, Any] = {}
            if hlen:
                try:
                    header = json.loads(bytes(buf[hstart:hstart + hlen]))
                except (UnicodeDecodeError, ValueError) as exc:
                    raise ProtocolError(f"frame header is not JSON: {exc}") from None
                if not isinstance(header, dict):
                    raise ProtocolError("frame header is not a JSON object")
            out.append(RemotingCommand(code, opaque, flags, header, bytes(buf[hstart + hlen:end])))
            pos = end
        if pos:
            del buf[:pos]
        return out
