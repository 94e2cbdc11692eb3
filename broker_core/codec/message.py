"""CommitLog message record: the 17-field layout of the seeds (INVENTORY §6.3), big-endian.

| #  | offset | size | field                       | notes                                      |
|----|--------|------|-----------------------------|--------------------------------------------|
| 1  | 0      | 4    | TOTALSIZE                   | whole record length                        |
| 2  | 4      | 4    | MAGICCODE                   | 0xDAA320A7 (blank filler: 0xCBD43194)      |
| 3  | 8      | 4    | BODYCRC                     | zlib CRC32 of the body                     |
| 4  | 12     | 4    | QUEUEID                     |                                            |
| 5  | 16     | 4    | FLAG                        | user flag                                  |
| 6  | 20     | 8    | QUEUEOFFSET                 | logical offset in topic-queue              |
| 7  | 28     | 8    | PHYSICALOFFSET              | global CommitLog byte offset               |
| 8  | 36     | 4    | SYSFLAG                     | compression and transaction bits           |
| 9  | 40     | 8    | BORNTIMESTAMP               | producer clock, ms                         |
| 10 | 48     | 8    | BORNHOST                    | IPv4 (4) + port (int 4)                    |
| 11 | 56     | 8    | STORETIMESTAMP              | broker clock, ms                           |
| 12 | 64     | 8    | STOREHOSTADDRESS            | IPv4 (4) + port (int 4)                    |
| 13 | 72     | 4    | RECONSUMETIMES              |                                            |
| 14 | 76     | 8    | PREPARED_TRANSACTION_OFFSET |                                            |
| 15 | 84     | 4+n  | BODY                        | int length (written even when 0) + bytes   |
| 16 | 88+n   | 1+t  | TOPIC                       | byte length + UTF-8 (so at most 127 bytes) |
| 17 | 89+n+t | 2+p  | PROPERTIES                  | short length + UTF-8 (at most 32767 bytes) |

Fixed overhead is 91 bytes: ``TOTALSIZE = 91 + n + t + p``.

The blank record that fills the end of a segment is ``int maxBlank, int BLANK_MAGIC_CODE`` followed by
``maxBlank - 8`` bytes of anything. Properties are ``name \\x01 value \\x02`` pairs (upstream format).
Only IPv4 hosts are encoded (the 8-byte host fields of the seeds' layout); other addresses store 0.0.0.0.
"""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass, field

from broker_core.codec.errors import CodecError
from broker_core.codec.message_id import encode_offset_msg_id
from broker_core.codec.names import (  # noqa: F401
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from broker_core.codec.native import NATIVE

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8

MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

# TOTALSIZE .. BODY length (fields 1-15 without the body bytes).
HEADER = struct.Struct(">iIIiiqqiq4siq4siiqi")
HEADER_SIZE = HEADER.size  # 88
FIXED_OVERHEAD = HEADER_SIZE + 1 + 2  # 91
BLANK = struct.Struct(">iI")
SIZE_MAGIC = _SIZE_MAGIC = struct.Struct(">iI")  # TOTALSIZE, MAGICCODE: enough to step over a record
LONG = struct.Struct(">q")
_SHORT = struct.Struct(">H")

# Indices of the fields HEADER.unpack_from returns (readers use these, never bare positions).
(F_TOTAL_SIZE, F_MAGIC, F_BODY_CRC, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_PHYSICAL_OFFSET, F_SYS_FLAG,
 F_BORN_TIMESTAMP, F_BORN_IP, F_BORN_PORT, F_STORE_TIMESTAMP, F_STORE_IP, F_STORE_PORT, F_RECONSUME_TIMES,
 F_PREPARED_OFFSET, F_BODY_LENGTH) = range(17)

OFFSET_QUEUE_OFFSET = 20
OFFSET_PHYSICAL_OFFSET = 28
OFFSET_STORE_TIMESTAMP = 56
OFFSET_RECONSUME_TIMES = 72
OFFSET_BODY_LENGTH = 84

# SYSFLAG bits (upstream MessageSysFlag).
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
TRANSACTION_TYPE_MASK = 0x3 << 2

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "
ZERO_HOST = b"\x00\x00\x00\x00"

# Property names live in codec/names.py; imported here too, where the record code and older importers find them.


def encode_properties(properties: dict[str, str] | None) -> bytes:
    """Encode a properties map as ``name\\x01value\\x02`` pairs (UTF-8)."""
    if not properties:
        return b""
    return "".join(f"{k}\x01{v}\x02" for k, v in properties.items()).encode()


def decode_properties(raw: bytes | str) -> dict[str, str]:
    """Decode a properties string. Pairs without a separator are ignored (upstream behaviour)."""
    text = raw.decode() if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    if not text:
        return {}
    out: dict[str, str] = {}
    for pair in text.split("\x02"):
        name, sep, value = pair.partition("\x01")
        if sep:
            out[name] = value
    return out


def host_to_bytes(host: str | None) -> bytes:
    """IPv4 text to 4 bytes; anything else (None, IPv6, names) becomes 0.0.0.0."""
    if not host:
        return ZERO_HOST
    try:
        return socket.inet_aton(host)
    except OSError:
        return ZERO_HOST


def record_size(body_len: int, topic_len: int, properties_len: int) -> int:
    """``calMsgLength``: TOTALSIZE of a record with these variable parts."""
    return FIXED_OVERHEAD + body_len + topic_len + properties_len


def encode_tail(topic: bytes, properties: bytes) -> bytes:
    """Fields 16 and 17 (topic and properties with their lengths), encoded once per message."""
    return bytes((len(topic),)) + topic + _SHORT.pack(len(properties)) + properties


def write_record_into(
    buf: memoryview | bytearray,
    pos: int,
    total: int,
    body_crc: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    tail: bytes,
) -> None:
    """Write one record at ``pos``. ``total`` must equal ``HEADER_SIZE + len(body) + len(tail)``."""
    blen = len(body)
    HEADER.pack_into(
        buf, pos, total, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset, physical_offset,
        sys_flag, born_timestamp, born_host, born_port, store_timestamp, store_host, store_port,
        reconsume_times, prepared_transaction_offset, blen,
    )
    start = pos + HEADER_SIZE
    buf[start:start + blen] = body
    start += blen
    buf[start:start + len(tail)] = tail


def write_blank_into(buf: memoryview | bytearray, pos: int, max_blank: int) -> None:
    """Write the end-of-segment blank header; the rest of the ``max_blank`` bytes is left as is."""
    BLANK.pack_into(buf, pos, max_blank, BLANK_MAGIC_CODE)


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """RocketMQ's ``UtilAll.crc32``: CRC-32 of the body with the top bit cleared (reference §7.1)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def crc_matches(stored: int, body: bytes | bytearray | memoryview) -> bool:
    """Whether ``stored`` is the body's CRC. Records written by this product before it matched RocketMQ
    kept all 32 bits; they are accepted too, so an older store still recovers whole."""
    c = zlib.crc32(body)
    return stored == (c & 0x7FFFFFFF) or stored == c


@dataclass(slots=True)
class MessageRecord:
    """A decoded CommitLog record (upstream ``MessageExt``)."""

    store_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROPERTY_KEYS, "")
        return [k for k in raw.split(KEY_SEPARATOR) if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        """The client-visible message id: the unique key if present, else the offset message id."""
        return self.uniq_key or self.offset_msg_id

    @property
    def offset_msg_id(self) -> str:
        ip, _, port = self.store_host.rpartition(":")
        return encode_offset_msg_id(socket.inet_aton(ip), int(port), self.commit_log_offset)


def _host(raw: bytes, port: int) -> str:
    return f"{socket.inet_ntoa(raw)}:{port}"


def encode_record(
    *,
    topic: str,
    body: bytes,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: str = "127.0.0.1:0",
    store_timestamp: int = 0,
    store_host: str = "127.0.0.1:0",
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    properties: dict[str, str] | None = None,
) -> bytes:
    """Encode a whole record to new bytes (tools, tests, golden files). The store writes in place."""
    topic_b = topic.encode()
    props_b = encode_properties(properties)
    if len(topic_b) > MAX_TOPIC_BYTES:
        raise CodecError(f"topic is {len(topic_b)} bytes, at most {MAX_TOPIC_BYTES}")
    if len(props_b) > MAX_PROPERTIES_BYTES:
        raise CodecError(f"properties are {len(props_b)} bytes, at most {MAX_PROPERTIES_BYTES}")
    bh, _, bp = born_host.rpartition(":")
    sh, _, sp = store_host.rpartition(":")
    tail = encode_tail(topic_b, props_b)
    total = HEADER_SIZE + len(body) + len(tail)
    out = bytearray(total)
    write_record_into(
        out, 0, total, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset, physical_offset, sys_flag,
        born_timestamp, host_to_bytes(bh), int(bp), store_timestamp, host_to_bytes(sh), int(sp),
        reconsume_times, prepared_transaction_offset, body, tail,
    )
    return bytes(out)


def decode_record(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    source: str | None = None,
    base_offset: int = 0,
    check_crc: bool = True,
) -> MessageRecord:
    """Decode the record at ``pos``. Raises :class:`CodecError` naming ``source`` and the position
    (``base_offset + pos``) when the bytes are truncated, have a bad magic, bad lengths or a bad CRC.
    A blank record is an error here: callers that walk segments use :func:`check_record`."""
    where = base_offset + pos
    end = len(buf)
    if pos + HEADER_SIZE > end:
        raise CodecError(f"truncated record header: {end - pos} bytes left, need {HEADER_SIZE}", source, where)
    (total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_ip, born_port,
     store_ts, store_ip, store_port, reconsume, prepared, blen) = HEADER.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        raise CodecError("blank record (end of segment), not a message", source, where)
    if magic != MESSAGE_MAGIC_CODE:
        raise CodecError(f"bad magic code 0x{magic:08X}", source, where)
    if total < FIXED_OVERHEAD or blen < 0 or HEADER_SIZE + blen + 3 > total:
        raise CodecError(f"inconsistent lengths: total {total}, body {blen}", source, where)
    if pos + total > end:
        raise CodecError(f"truncated record: {end - pos} bytes left, record is {total}", source, where)
    p = pos + HEADER_SIZE
    body = bytes(buf[p:p + blen])
    p += blen
    tlen = buf[p]
    topic_raw = bytes(buf[p + 1:p + 1 + tlen])
    p += 1 + tlen
    if p + 2 > pos + total:
        raise CodecError("inconsistent lengths: topic runs past the record", source, where)
    (plen,) = _SHORT.unpack_from(buf, p)
    if p + 2 + plen != pos + total:
        raise CodecError(f"inconsistent lengths: properties {plen} do not end the record", source, where)
    props_raw = bytes(buf[p + 2:p + 2 + plen])
    if check_crc and not crc_matches(crc, body):
        raise CodecError(f"body CRC mismatch: stored 0x{crc:08X}, computed 0x{body_crc(body):08X}", source, where)
    try:
        topic = topic_raw.decode()
        properties = decode_properties(props_raw)
    except UnicodeDecodeError as exc:
        raise CodecError(f"topic or properties are not UTF-8: {exc}", source, where) from None
    return MessageRecord(
        total, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, _host(born_ip, born_port),
        store_ts, _host(store_ip, store_port), reconsume, prepared, body, topic, properties,
    )


def peek_size_magic(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """TOTALSIZE and MAGICCODE at ``pos`` (the caller checks that 8 bytes are readable)."""
    return _SIZE_MAGIC.unpack_from(buf, pos)


@dataclass(slots=True)
class DispatchRequest:
    """What the dispatcher needs from one record (upstream ``DispatchRequest``).

    ``success`` False means a corrupt or incomplete record (``error`` says why); ``msg_size`` 0 with
    ``success`` True means the end-of-segment blank record."""

    success: bool
    msg_size: int
    topic: str = ""
    queue_id: int = 0
    commit_log_offset: int = 0
    tags: str | None = None
    store_timestamp: int = 0
    consume_queue_offset: int = 0
    keys: str | None = None
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] | None = None
    error: str = ""


def check_record(
    buf: bytes | bytearray | memoryview,
    pos: int,
    limit: int,
    check_crc: bool = True,
) -> DispatchRequest:
    """Upstream ``checkMessageAndReturnSize``: parse the record at ``pos`` without raising.

    Reads only below ``limit`` (the segment's published read position). Zero bytes where a record
    should start is reported as ``error="end of data"``."""
    if pos + 8 > limit:
        return DispatchRequest(False, 0, error="end of data")
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return DispatchRequest(True, 0)
    if magic != MESSAGE_MAGIC_CODE:
        if total == 0 and magic == 0:
            return DispatchRequest(False, 0, error="end of data")
        return DispatchRequest(False, 0, error=f"bad magic code 0x{magic:08X}")
    if total < FIXED_OVERHEAD or pos + total > limit:
        return DispatchRequest(False, 0, error=f"truncated record of size {total}")
    (_, _, crc, queue_id, _, queue_offset, phy, sys_flag, _, _, _, store_ts, _, _, _, prepared,
     blen) = HEADER.unpack_from(buf, pos)
    p = pos + HEADER_SIZE
    end = pos + total
    if blen < 0 or p + blen + 3 > end:
        return DispatchRequest(False, 0, error=f"inconsistent body length {blen}")
    if check_crc and not crc_matches(crc, buf[p:p + blen]):
        return DispatchRequest(False, 0, error="body CRC mismatch")
    p += blen
    tlen = buf[p]
    tp = p + 1
    p = tp + tlen
    if p + 2 > end:
        return DispatchRequest(False, 0, error="inconsistent topic length")
    (plen,) = _SHORT.unpack_from(buf, p)
    if p + 2 + plen != end:
        return DispatchRequest(False, 0, error="inconsistent properties length")
    try:
        topic = str(buf[tp:tp + tlen], "utf-8")
        properties = decode_properties(bytes(buf[p + 2:end])) if plen else {}
    except UnicodeDecodeError:
        return DispatchRequest(False, 0, error="topic or properties are not UTF-8")
    return DispatchRequest(
        True, total, topic, queue_id, phy, properties.get(PROPERTY_TAGS), store_ts, queue_offset,
        properties.get(PROPERTY_KEYS), properties.get(PROPERTY_UNIQ_KEY), sys_flag, prepared, properties,
    )


# the pure functions stay reachable for the native-vs-pure equality tests
py_encode_properties, py_decode_properties = encode_properties, decode_properties
if NATIVE is not None:
    encode_properties = NATIVE.encode_properties
    decode_properties = NATIVE.decode_properties
