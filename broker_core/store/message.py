"""The message as handed to the store for a put (upstream ``MessageExtBrokerInner``)."""

from __future__ import annotations

from broker_core.codec.message import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    ZERO_HOST,
    encode_properties,
    host_to_bytes,
)


class MessageInner:
    """A message to store. ``properties`` carries TAGS, KEYS, UNIQ_KEY and user properties.

    ``topic_bytes`` and ``properties_bytes`` are encoded once, on first use."""

    __slots__ = (
        "_properties_bytes",
        "_topic_bytes",
        "body",
        "born_host",
        "born_port",
        "born_timestamp",
        "flag",
        "prepared_transaction_offset",
        "properties",
        "queue_id",
        "reconsume_times",
        "sys_flag",
        "topic",
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
        self.queue_id = queue_id
        self.body = body
        self.flag = flag
        self.properties = props
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = host_to_bytes(born_host) if born_host else ZERO_HOST
        self.born_port = born_port
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self._topic_bytes: bytes | None = None
        self._properties_bytes: bytes | None = None

    @property
    def topic_bytes(self) -> bytes:
        if self._topic_bytes is None:
            self._topic_bytes = self.topic.encode()
        return self._topic_bytes

    @property
    def properties_bytes(self) -> bytes:
        if self._properties_bytes is None:
            self._properties_bytes = encode_properties(self.properties)
        return self._properties_bytes

    def set_property(self, name: str, value: str) -> None:
        self.properties[name] = value
        self._properties_bytes = None

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)
