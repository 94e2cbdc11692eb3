"""The message as handed to the store for a put (upstream ``MessageExtBrokerInner``).

Topic and properties are held encoded (as they arrive on the wire), and also as ``tail``, the record's
last two fields with their length prefixes, so the put path copies them in one move; TAGS, KEYS and UNIQ_KEY are also
kept as attributes so the put path can hand them to the dispatcher without parsing properties again.
"""

from __future__ import annotations

from broker_core.codec.message import (
    KEY_SEPARATOR,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    ZERO_HOST,
    decode_properties,
    encode_properties,
    encode_tail,
    host_to_bytes,
)


class MessageInner:
    __slots__ = (
        "body",
        "born_host",
        "born_port",
        "born_timestamp",
        "delay_level",
        "delay_ms",
        "flag",
        "keys",
        "limits_error",
        "prepared_transaction_offset",
        "properties_bytes",
        "queue_id",
        "reconsume_times",
        "sys_flag",
        "tags",
        "tail",
        "topic",
        "topic_bytes",
        "uniq_key",
    )

    def __init__(
        self,
        topic: str,
        body: bytes,
        queue_id: int = 0,
        *,
        tags: str | None = None,
        keys: str | list[str] | None = None,
        uniq_key: str | None = None,
        properties: dict[str, str] | None = None,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | None = None,
        born_port: int = 0,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
    ) -> None:
        props = dict(properties) if properties else {}
        if tags is not None:
            props[PROPERTY_TAGS] = tags
        if keys:
            props[PROPERTY_KEYS] = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
        if uniq_key is not None:
            props[PROPERTY_UNIQ_KEY] = uniq_key
        self.topic = topic
        self.topic_bytes = topic.encode()
        self.queue_id = queue_id
        self.body = body
        self.flag = flag
        self.delay_ms = 0  # set when the store moves the message to the schedule topic
        self._encoded(props)
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = host_to_bytes(born_host) if born_host else ZERO_HOST
        self.born_port = born_port
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset

    @classmethod
    def from_encoded(cls, topic: str, body: bytes, queue_id: int, properties_bytes: bytes,
                     properties: dict[str, str], *, flag: int = 0, sys_flag: int = 0, born_timestamp: int = 0,
                     born_host: bytes = ZERO_HOST, born_port: int = 0, reconsume_times: int = 0) -> MessageInner:
        """From wire fields: ``properties_bytes`` is stored as received (``properties`` is its decoded form,
        used for TAGS, KEYS and UNIQ_KEY), skipping a re-encode."""
        self = cls.__new__(cls)
        self.topic = topic
        self.topic_bytes = topic.encode()
        self.queue_id = queue_id
        self.body = body
        self.flag = flag
        self.properties_bytes = properties_bytes
        tlen, plen = len(self.topic_bytes), len(properties_bytes)
        if not 0 < tlen <= MAX_TOPIC_BYTES or plen > MAX_PROPERTIES_BYTES or not 0 <= queue_id < 1 << 31:
            self.limits_error = True
            self.tail = b""
        else:
            self.limits_error = False
            self.tail = encode_tail(self.topic_bytes, properties_bytes)
        self.tags = properties.get(PROPERTY_TAGS)
        self.keys = properties.get(PROPERTY_KEYS)
        self.uniq_key = properties.get(PROPERTY_UNIQ_KEY)
        self.delay_level = _level(properties.get(PROPERTY_DELAY_TIME_LEVEL))
        self.delay_ms = 0
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.born_port = born_port
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = 0
        return self

    @property
    def properties(self) -> dict[str, str]:
        """A decoded copy of the properties (changes go through :meth:`set_property`)."""
        return decode_properties(self.properties_bytes)

    def set_property(self, name: str, value: str | None) -> None:
        props = self.properties
        if value is None:
            props.pop(name, None)
        else:
            props[name] = value
        self._encoded(props)

    def replace_properties(self, props: dict[str, str]) -> None:
        self._encoded(props)

    def _encoded(self, props: dict[str, str]) -> None:
        self.properties_bytes = encode_properties(props)
        tlen, plen = len(self.topic_bytes), len(self.properties_bytes)
        if not 0 < tlen <= MAX_TOPIC_BYTES or plen > MAX_PROPERTIES_BYTES or not 0 <= self.queue_id < 1 << 31:
            self.limits_error = True  # the store's check says which limit
            self.tail = b""
        else:
            self.limits_error = False
            self.tail = encode_tail(self.topic_bytes, self.properties_bytes)
        self.tags = props.get(PROPERTY_TAGS)
        self.keys = props.get(PROPERTY_KEYS)
        self.uniq_key = props.get(PROPERTY_UNIQ_KEY)
        self.delay_level = _level(props.get(PROPERTY_DELAY_TIME_LEVEL))


def _level(raw: str | None) -> int:
    if not raw:
        return 0
    try:
        return max(0, int(raw))
    except ValueError:
        return 0
