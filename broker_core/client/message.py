"""SDK data types: Message, MessageExt, MessageQueue, SendResult, statuses."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from broker_core.codec.message import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    MessageRecord,
)


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] | None = None
    flag: int = 0

    def all_properties(self) -> dict[str, str]:
        props = dict(self.properties or {})
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


@dataclass
class MessageExt:
    """A consumed message."""

    topic: str
    body: bytes
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    reconsume_times: int
    broker_name: str
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(PROPERTY_KEYS, "").split(KEY_SEPARATOR) if k]

    @classmethod
    def from_record(cls, rec: MessageRecord, broker_name: str) -> MessageExt:
        return cls(rec.topic, rec.body, rec.properties.get(PROPERTY_UNIQ_KEY) or rec.offset_msg_id,
                   rec.offset_msg_id, rec.queue_id, rec.queue_offset, rec.commit_log_offset, rec.born_timestamp,
                   rec.store_timestamp, rec.born_host, rec.store_host, rec.reconsume_times, broker_name,
                   rec.properties, rec.sys_flag)


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


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ClientError(RuntimeError):
    """A request the broker or name server refused; ``code`` is the ResponseCode."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(f"[{code}] {message}")
