"""SDK data types: Message, MessageExt, MessageQueue, SendResult, statuses."""

from __future__ import annotations

import enum
import socket
from dataclasses import dataclass

from broker_core.codec.message import (
    KEY_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    decode_properties,
)
from broker_core.codec.message_id import encode_offset_msg_id
from broker_core.codec.records import decode_pulled
from broker_core.errors import ClientError  # noqa: F401 (re-exported: broker_core.client.ClientError)
from broker_core.protocol import RemotingCommand, ResponseCode


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] | None = None
    flag: int = 0
    delay_level: int = 0  # 1..18 of the broker's messageDelayLevel (1s 5s 10s 30s 1m ... 2h); 0 = now

    def all_properties(self) -> dict[str, str]:
        props = dict(self.properties or {})
        if self.delay_level:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = self.keys if isinstance(self.keys, str) else KEY_SEPARATOR.join(self.keys)
        return props


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"


class MessageExt:
    """A consumed message. Hosts, the offset message id and the properties are decoded on first use: a pull hands
    over each message's properties as the stored bytes (``name\x01value\x02`` pairs), turned into the
    :attr:`properties` dict when something first asks (tags, keys, the message id, a filter), so a consumer that
    only reads bodies never decodes them. Properties that are not UTF-8 raise UnicodeDecodeError on that first
    use."""

    __slots__ = ("_born", "_props", "_store", "body", "born_timestamp", "broker_name", "commit_log_offset",
                 "queue_id", "queue_offset", "receipt_handle", "reconsume_times", "store_timestamp", "sys_flag",
                 "topic")
    # The C decoder (codec/_native_c/records.c decode_pulled) fills these slots directly instead of calling
    # __init__: the 13 arguments in order (the properties, raw bytes, into _props), then receipt_handle = None.
    # Keep both in step (tests/unit/client/test_message_native.py compares them).
    __native_slots__ = ("topic", "body", "queue_id", "queue_offset", "commit_log_offset", "born_timestamp",
                        "store_timestamp", "_born", "_store", "reconsume_times", "broker_name", "_props",
                        "sys_flag", "receipt_handle")

    def __init__(self, topic: str, body: bytes, queue_id: int, queue_offset: int, commit_log_offset: int,
                 born_timestamp: int, store_timestamp: int, born: tuple[bytes, int], store: tuple[bytes, int],
                 reconsume_times: int, broker_name: str, properties: dict[str, str] | bytes,
                 sys_flag: int = 0) -> None:
        self.topic = topic
        self.body = body
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.born_timestamp = born_timestamp
        self.store_timestamp = store_timestamp
        self._born = born
        self._store = store
        self.reconsume_times = reconsume_times
        self.broker_name = broker_name
        self._props: dict[str, str] | bytes = properties  # raw bytes until first use
        self.sys_flag = sys_flag
        self.receipt_handle: str | None = None  # set for messages received by a SimpleConsumer

    @property
    def properties(self) -> dict[str, str]:
        props = self._props
        if isinstance(props, dict):
            return props
        decoded = self._props = decode_properties(props) if props else {}
        return decoded

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        self._props = value

    @property
    def offset_msg_id(self) -> str:
        return encode_offset_msg_id(self._store[0], self._store[1], self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        return self.properties.get(PROPERTY_UNIQ_KEY) or self.offset_msg_id

    @property
    def born_host(self) -> str:
        return f"{socket.inet_ntoa(self._born[0])}:{self._born[1]}"

    @property
    def store_host(self) -> str:
        return f"{socket.inet_ntoa(self._store[0])}:{self._store[1]}"

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(PROPERTY_KEYS, "").split(KEY_SEPARATOR) if k]

    def __repr__(self) -> str:
        return (f"MessageExt(topic={self.topic!r}, queue={self.broker_name}#{self.queue_id}, "
                f"offset={self.queue_offset}, msg_id={self.msg_id}, body={self.body[:32]!r})")


def decode_message_exts(buf: bytes, broker_name: str) -> list[MessageExt]:
    """Records as the broker sends them (back to back) to MessageExt. Raises CodecError on a bad record."""
    return decode_pulled(buf, "pull", MessageExt, broker_name)


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    message_queue: MessageQueue | None = None


# Response codes as plain ints (no enum construction or comparison per send): the ones that make a result, by status.
SEND_STATUS = {int(ResponseCode.SUCCESS): SendStatus.SEND_OK,
               int(ResponseCode.FLUSH_DISK_TIMEOUT): SendStatus.FLUSH_DISK_TIMEOUT,
               int(ResponseCode.FLUSH_SLAVE_TIMEOUT): SendStatus.FLUSH_SLAVE_TIMEOUT,
               int(ResponseCode.SLAVE_NOT_AVAILABLE): SendStatus.SLAVE_NOT_AVAILABLE}


def send_result(resp: RemotingCommand, mq: MessageQueue, msg_id: str) -> SendResult:
    """A send's answer as RocketMQ's client gives it: ``msg_id`` is the unique id the producer assigned (a batch:
    the ids joined by commas), ``offset_msg_id`` the broker's ``msgId``, the offset message id."""
    status = SEND_STATUS.get(resp.code, SendStatus.SLAVE_NOT_AVAILABLE)
    h = resp.header
    return SendResult(status, msg_id, str(h.get("msgId", "")), int(h.get("queueId", mq.queue_id)),
                      int(h.get("queueOffset", -1)), mq)


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


# ClientError is defined in broker_core.errors (imported above) with the rest of the hierarchy.
