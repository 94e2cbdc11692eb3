"""RemotingCommand and the incremental frame decoder (sans-I/O), exactly as RocketMQ 4.x remoting.

A command is a code, an opaque request id, flags, a remark, ``extFields`` (here ``header``: a string to string
map), the sender's language and version, and a body. It travels in one of the two header serializations
(``JSON`` or ``ROCKETMQ`` binary, see ``broker_core.codec.wire``); a response uses the request's type.

Invariants:
1. ``header`` holds strings only once decoded: JSON numbers and booleans become their text the way fastjson
   does (``1`` -> ``"1"``, ``true`` -> ``"true"``), nulls are absent. Handlers may *set* ints and bools; they
   are written as text, so every reader (Go decodes ``map[string]string``) gets strings.
2. :class:`FrameDecoder` raises :class:`ProtocolError` for bytes that break framing (oversized frame, header
   length past the frame, unknown serialize type, header that does not parse); the connection must then be
   closed, since framing is lost.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker_core.codec.errors import CodecError
from broker_core.codec.wire import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FRAME_HEAD,
    FRAME_HEAD_SIZE,
    HEADER_LENGTH_MASK,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    decode_binary_header,
    decode_frame,
    encode_binary_frame,
    encode_binary_header,
    encode_frame,
)
from broker_core.errors import ProtocolError

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength, counting the length word
# An incomplete frame whose body is over this has its body received in place (FrameDecoder.body): one bytes object
# of the body's size, filled by the following reads, instead of a growing buffer and a copy at the end. A body over
# it is also written apart from its frame's head (RemotingCommand.encode_parts), not copied into a frame.
LARGE_BODY_BYTES = 64 * 1024
_LENGTH = struct.Struct(">I")

# LanguageCode, by ordinal (the binary header carries the ordinal, JSON the name).
LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
             "RUST")
LANGUAGE_ORDINAL = {name: i for i, name in enumerate(LANGUAGES)}
_OTHER = LANGUAGE_ORDINAL["OTHER"]
LANGUAGE = "PYTHON"
# MQVersion ordinals (the index of a constant of RocketMQ's ``MQVersion.Version``) that change behaviour.
V3_0_7_SNAPSHOT = 28  # clients from here on get RESET_CONSUMER_CLIENT_OFFSET
V3_4_9 = 121  # send headers' maxReconsumeTimes is honoured from here on
V4_9_4 = 401  # the name server sends standard JSON route bodies from here on
V4_9_8 = 409
# The version we announce: 4.9.8. Brokers use it to pick features (route JSON, reset offsets).
CURRENT_VERSION = V4_9_8

_SERIALIZE_NAMES = {SERIALIZE_JSON: "JSON", SERIALIZE_ROCKETMQ: "ROCKETMQ"}
_I16_MIN, _I16_MAX = -(1 << 15), (1 << 15) - 1


def _text(value: Any) -> str | None:
    """fastjson's scalar-to-String conversion for an ``extFields`` value."""
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def stringify_fields(fields: dict[str, Any]) -> dict[str, str]:
    """``fields`` with every value as text (ints in decimal, booleans ``true``/``false``) and nulls dropped."""
    out: dict[str, str] = {}
    for k, v in fields.items():
        t = type(v)
        if t is str:
            out[k] = v
        elif t is int:
            out[k] = str(v)
        elif t is bool:
            out[k] = "true" if v else "false"
        elif v is not None:
            text = _text(v)
            if text is not None:
                out[str(k)] = text
    return out


def _as_text(fields: dict[str, Any]) -> dict[str, str]:
    """``fields`` itself when every value is already text (a header built as text, or decoded), else
    :func:`stringify_fields` of it: for encoding, which only reads it."""
    for v in fields.values():
        if type(v) is not str:
            return stringify_fields(fields)
    return fields


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flags: int = 0
    header: dict[str, Any] = field(default_factory=dict)  # extFields
    body: bytes = b""
    remark: str = ""  # empty is written as absent (null), as RocketMQ does
    language: str = LANGUAGE
    version: int = CURRENT_VERSION
    serialize_type: int = SERIALIZE_JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flags & FLAG_ONEWAY)

    def encode_header(self) -> tuple[int, bytes]:
        """``(serialize_type, header bytes)``. A code or version that does not fit the binary header's i16
        (RocketMQ 5's 200050-range codes) is sent as JSON, which carries full ints."""
        ext = _as_text(self.header) if self.header else None
        if (self.serialize_type == SERIALIZE_ROCKETMQ and _I16_MIN <= self.code <= _I16_MAX
                and _I16_MIN <= self.version <= _I16_MAX):
            return SERIALIZE_ROCKETMQ, encode_binary_header(
                self.code, LANGUAGE_ORDINAL.get(self.language, LANGUAGE_ORDINAL["OTHER"]), self.version,
                self.opaque, self.flags, self.remark, ext)
        obj: dict[str, Any] = {"code": self.code}
        if ext:
            obj["extFields"] = ext
        obj["flag"] = self.flags
        obj["language"] = self.language
        obj["opaque"] = self.opaque
        if self.remark:
            obj["remark"] = self.remark
        obj["serializeTypeCurrentRPC"] = "JSON"
        obj["version"] = self.version
        return SERIALIZE_JSON, json.dumps(obj, separators=(",", ":")).encode()

    def encode(self) -> bytes:
        if (self.serialize_type == SERIALIZE_ROCKETMQ and _I16_MIN <= self.code <= _I16_MAX
                and _I16_MIN <= self.version <= _I16_MAX):  # the common case: one C call, one allocation
            language = LANGUAGE_ORDINAL.get(self.language, _OTHER)
            try:  # a header already all text (what decoding and the SDK's senders make) goes as it is
                return encode_binary_frame(self.code, language, self.version, self.opaque, self.flags, self.remark,
                                           self.header or None, self.body)
            except TypeError:  # a value that is not text yet (an int, a bool): written as fastjson writes it
                return encode_binary_frame(self.code, language, self.version, self.opaque, self.flags, self.remark,
                                           stringify_fields(self.header), self.body)
        st, header = self.encode_header()
        return encode_frame(st, header, self.body)

    def encode_parts(self) -> list[bytes]:
        """The frame :meth:`encode` makes, as its parts: ``[head and header, body]`` when the body is large (over
        :data:`LARGE_BODY_BYTES`; a writer sends them with one gather write, the body not copied into a frame),
        else ``[frame]``. ``b"".join(parts) == encode()``."""
        body = self.body
        if len(body) <= LARGE_BODY_BYTES:
            return [self.encode()]
        self.body = b""
        try:
            head = self.encode()
        finally:
            self.body = body
        (length,) = _LENGTH.unpack_from(head, 0)
        return [_LENGTH.pack(length + len(body)) + head[4:], body]

    @classmethod
    def request(cls, code: int, header: dict[str, Any] | None = None, body: bytes = b"", *,
                oneway: bool = False) -> RemotingCommand:
        return cls(int(code), 0, FLAG_ONEWAY if oneway else 0, header or {}, body)

    def response(self, code: int, remark: str | None = "", header: dict[str, Any] | None = None,
                 body: bytes = b"") -> RemotingCommand:
        """The reply to this request: same opaque and serialize type, the response bit, never the oneway bit."""
        return RemotingCommand(int(code), self.opaque, FLAG_RESPONSE, header or {}, body, remark or "",
                               LANGUAGE, CURRENT_VERSION, self.serialize_type)


def decode_command(serialize_type: int, header: bytes | bytearray | memoryview, body: bytes) -> RemotingCommand:
    """A command from its header bytes and body; :class:`ProtocolError` if the header does not parse."""
    if serialize_type == SERIALIZE_JSON:
        try:
            obj = json.loads(header.tobytes() if isinstance(header, memoryview) else header)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ProtocolError(f"JSON command header does not parse: {exc}") from None
        if not isinstance(obj, dict):
            raise ProtocolError("JSON command header is not an object")
        try:
            code = int(obj["code"])
            ext = obj.get("extFields") or {}
            if not isinstance(ext, dict):
                raise ProtocolError("extFields is not an object")
            remark = obj.get("remark")
            return RemotingCommand(code, int(obj.get("opaque") or 0), int(obj.get("flag") or 0),
                                   stringify_fields(ext), body, "" if remark is None else str(remark),
                                   str(obj.get("language") or "OTHER"), int(obj.get("version") or 0),
                                   SERIALIZE_JSON)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"bad JSON command header field: {exc!r}") from None
    if serialize_type == SERIALIZE_ROCKETMQ:
        try:
            code, lang, version, opaque, flag, remark, ext = decode_binary_header(header)
        except (CodecError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"binary command header does not parse: {exc}") from None
        language = LANGUAGES[lang] if lang < len(LANGUAGES) else "OTHER"
        return RemotingCommand(code, opaque, flag, ext, body, remark or "", language, version, SERIALIZE_ROCKETMQ)
    raise ProtocolError(f"unknown serialize type {serialize_type}")


def check_frame_head(length: int, word: int, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> tuple[int, int]:
    """``(serialize_type, header_length)`` of a frame whose two head words are ``length`` and ``word``;
    :class:`ProtocolError` when the frame is over ``max_frame_bytes`` or its lengths or type are impossible."""
    if length + 4 > max_frame_bytes:
        raise ProtocolError(f"frame of {length + 4} bytes exceeds the limit of {max_frame_bytes}")
    st, hlen = word >> 24, word & HEADER_LENGTH_MASK
    if st not in _SERIALIZE_NAMES:
        raise ProtocolError(f"unknown serialize type {st} in the header word 0x{word:08x}")
    if length < 4 or hlen > length - 4:
        raise ProtocolError(f"bad frame lengths: frame {length}, header {hlen}")
    return st, hlen


class FrameDecoder:
    """Accumulates bytes and yields complete commands (``LengthFieldBasedFrameDecoder(max, 0, 4, 0, 4)``).

    Given a ``receiver``, an incomplete large frame (a body over :data:`LARGE_BODY_BYTES`, its head and header in)
    goes into :attr:`body`, a ``BytesReceiver`` of the body's size (remoting/receive.py): :meth:`feed` copies what
    arrives into it, or an event loop reads straight into ``body.into()`` and reports the count to :meth:`received`
    (asyncio.BufferedProtocol; :meth:`open_body` starts it from the loop's read buffer). Either way the body is
    copied once, not grown in a buffer and copied out, and the command is the same. The frame's head is checked
    (size limit, lengths, serialize type) before anything of its size is allocated; its header is parsed once the
    body is complete, as for any frame."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 receiver: Callable[[int, memoryview], Any] | None = None) -> None:
        """``receiver``: ``(size, prefix) -> BytesReceiver`` (remoting/receive.py; this layer does no I/O and takes
        it from its caller) turns on receiving large bodies in place; without it every frame is buffered."""
        self.max_frame_bytes = max_frame_bytes
        self.receiver = receiver
        self._buf = bytearray()
        self.body: Any = None  # the BytesReceiver of the large frame's body being received, else None
        self._head: tuple[int, bytes] = (0, b"")  # that frame's serialize type and header bytes

    @property
    def buffered(self) -> int:
        """Bytes held of frames not yet complete (0: the next byte starts a frame)."""
        body = self.body
        return len(self._buf) if body is None else FRAME_HEAD_SIZE + len(self._head[1]) + body.filled

    def feed(self, data: bytes) -> list[RemotingCommand]:
        if self.body is not None:
            n = self.body.fill(data)
            if self.body.filled < self.body.size:
                return []
            out = self._complete()
            return out + self.feed(data[n:]) if n < len(data) else out
        if not self._buf and len(data) >= FRAME_HEAD_SIZE:  # nothing held back: one whole frame needs no copy
            cmd = decode_frame(data, self.max_frame_bytes, RemotingCommand, LANGUAGES, "OTHER")
            if cmd is not None:  # the common request, in one codec call
                return [cmd]
            length, word = FRAME_HEAD.unpack_from(data, 0)
            if len(data) == 4 + length:
                st, hlen = check_frame_head(length, word, self.max_frame_bytes)
                end = FRAME_HEAD_SIZE + hlen
                return [decode_command(st, data[FRAME_HEAD_SIZE:end], data[end:])]
            if len(data) < 4 + length and self._start_body(data, length, word):
                return []
        self._buf += data
        out = []
        buf = self._buf
        pos = 0
        n = len(buf)
        while n - pos >= FRAME_HEAD_SIZE:
            length, word = FRAME_HEAD.unpack_from(buf, pos)
            st, hlen = check_frame_head(length, word, self.max_frame_bytes)
            end = pos + 4 + length
            if n < end:
                break
            hstart = pos + FRAME_HEAD_SIZE
            with memoryview(buf) as view:  # one copy of each part (a bytearray slice would copy twice)
                header, body = bytes(view[hstart:hstart + hlen]), bytes(view[hstart + hlen:end])
            out.append(decode_command(st, header, body))
            pos = end
        if pos:
            del buf[:pos]
        if len(buf) >= FRAME_HEAD_SIZE:
            length, word = FRAME_HEAD.unpack_from(buf, 0)
            with memoryview(buf) as view:
                started = self._start_body(view, length, word)
            if started:
                buf.clear()
        return out

    def open_body(self, data: bytes | bytearray | memoryview) -> bool:
        """With nothing held back, ``data`` (a read) starting a frame: when that frame is large and incomplete (its
        header in), its body is opened with the rest of ``data`` (True: nothing else to do with ``data``); else
        False, and ``data`` is to be fed. Lets a reader copy a large frame's start once, from its own read buffer;
        :class:`ProtocolError` for a bad frame head, as :meth:`feed`."""
        if self._buf or self.body is not None or len(data) < FRAME_HEAD_SIZE:
            return False
        length, word = FRAME_HEAD.unpack_from(data, 0)
        return len(data) < 4 + length and self._start_body(data, length, word)

    def received(self, n: int) -> list[RemotingCommand]:
        """``n`` bytes were read into ``body.into()``: the command, once the body is complete."""
        self.body.advance(n)
        return self._complete() if self.body.filled >= self.body.size else []

    def _start_body(self, frame: bytes | bytearray | memoryview, length: int, word: int) -> bool:
        """``frame`` starts an incomplete frame: when its header is in and its body is over LARGE_BODY_BYTES, the body
        goes into a receiver of its size (True; what of it is in ``frame`` copied once); else (False) it stays
        buffered."""
        st, hlen = check_frame_head(length, word, self.max_frame_bytes)
        have = len(frame)
        start = FRAME_HEAD_SIZE + hlen
        if self.receiver is None or length - 4 - hlen <= LARGE_BODY_BYTES or have < start:
            return False
        with memoryview(frame) as view:
            self.body = self.receiver(length - 4 - hlen, view[start:])
        self._head = (st, bytes(frame[FRAME_HEAD_SIZE:start]))
        return True

    def _complete(self) -> list[RemotingCommand]:
        body, (st, header) = self.body.take(), self._head
        self.body, self._head = None, (0, b"")
        return [decode_command(st, header, body)]
