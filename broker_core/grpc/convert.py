"""Between RocketMQ 5's protobuf ``Message`` and the broker's records, as the RocketMQ 5 proxy maps them.

gRPC -> record (a send):

| gRPC ``Message``                       | record                                                       |
|----------------------------------------|--------------------------------------------------------------|
| ``system_properties.message_id``       | property ``UNIQ_KEY`` (what 4.x clients show as the msg id)  |
| ``tag`` / ``keys``                     | ``TAGS`` / ``KEYS`` (space-joined)                           |
| ``message_group``                      | ``__SHARDINGKEY`` (the proxy's name; FIFO queue by its hash) |
| ``delivery_timestamp``                 | ``TIMER_DELIVER_MS`` (ms; the timer holds it until then)     |
| ``born_timestamp`` / ``born_host``     | BORNTIMESTAMP / BORNHOST                                     |
| ``user_properties``                    | properties as they are                                       |
| ``body`` (GZIP encoding)               | body gunzipped (records hold the plain body)                 |

record -> gRPC (a delivery): the reverse, with ``body_encoding`` IDENTITY (a 4.x client's zlib-compressed body
is inflated first: gRPC's GZIP is not zlib), ``body_digest`` MD5 in upper-case hex as the proxy sends it
(every client checks MD5 alike; clients print a CRC32 differently: Node in decimal, Java and Go unpadded), the
message type guessed from the properties, ``delivery_attempt`` = reconsume times + 1, and the receipt handle, queue,
offset, store time and host, invisible duration.
"""

from __future__ import annotations

import gzip
import hashlib
import socket
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from broker_core.codec.message import (
    COMPRESSED_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    MessageRecord,
)
from broker_core.grpc.stubs import pb

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"  # upstream MessageConst.PROPERTY_SHARDING_KEY (FIFO message group)
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # upstream MessageConst (RocketMQ 5 timer messages)
# properties the broker or the 4.x protocol owns: not shown to RocketMQ 5 clients as user properties
SYSTEM_PROPERTY_NAMES = frozenset({
    PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_KEY, PROPERTY_SHARDING_KEY, PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_CLUSTER, PROPERTY_TRANSACTION_PREPARED, "PGROUP", "REAL_TOPIC", "REAL_QID", "WAIT", "MIN_OFFSET",
    "MAX_OFFSET", "CONSUME_START_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "MSG_REGION", "TRACE_ON"})

# MessageConst.STRING_HASH_SET: the proxy delivers every other property as a user property (so a FIFO message's
# ``__SHARDINGKEY`` and a transaction message's ``__transactionId__`` are seen, as with Apache's proxy)
HIDDEN_ON_DELIVERY = frozenset({
    "1ST_POP_TIME", "ARRIVE_TIME", "BORN_TIMESTAMP", "BUYER_ID", "CLUSTER", "CONSUME_START_TIME", "CORRECTION_FLAG",
    "CORRELATION_ID", "DELAY", "DLQ_ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INNER_MULTI_QUEUE_OFFSET", "INSTANCE_ID", "KEYS", "MAX_OFFSET", "MAX_RECONSUME_TIMES", "MIN_OFFSET", "MQ2_FLAG",
    "MSG_REGION", "MSG_TYPE", "ORIGIN_MESSAGE_ID", "PGROUP", "POP_CK", "POP_CK_OFFSET", "PUSH_REPLY_TIME",
    "REAL_QID", "REAL_TOPIC", "RECONSUME_TIME", "REPLY_TO_CLIENT", "RETRY_TOPIC", "TAGS", "TIMER_DELAY_LEVEL",
    "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_DEL_UNIQKEY", "TIMER_DEQUEUE_MS",
    "TIMER_ENQUEUE_MS", "TIMER_OUT_MS", "TIMER_ROLL_TIMES", "TRACE_ON", "TRANSFER_FLAG", "TRAN_MSG",
    "TRAN_PREPARED_QUEUE_OFFSET", "TTL", "UNIQ_KEY", "WAIT", "__BORNHOST", "__CRC32#"})


def millis(ts: Any) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def set_millis(ts: Any, ms: int) -> None:
    ts.seconds, ts.nanos = divmod(ms, 1000)
    ts.nanos *= 1_000_000


def duration_ms(d: Any, default_ms: int) -> int:
    ms = int(d.seconds) * 1000 + int(d.nanos) // 1_000_000
    return ms if ms > 0 else default_ms


def message_type(props: Mapping[str, str]) -> int:
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if PROPERTY_SHARDING_KEY in props:
        return pb.FIFO
    if PROPERTY_TIMER_DELIVER_MS in props or PROPERTY_DELAY_TIME_LEVEL in props:
        return pb.DELAY
    return pb.NORMAL


def record_properties(msg: Any) -> dict[str, str]:
    """The properties a send of ``msg`` (a ``pb.Message``) stores (ValueError: a clash the client must fix)."""
    sp = msg.system_properties
    props = dict(msg.user_properties)
    clash = SYSTEM_PROPERTY_NAMES.intersection(props)
    if clash:
        raise ValueError(f"user property {sorted(clash)[0]} is a system property name")
    if sp.tag:
        props[PROPERTY_TAGS] = sp.tag
    keys = [k for k in sp.keys if k]
    if keys:
        props[PROPERTY_KEYS] = " ".join(keys)
    props[PROPERTY_UNIQ_KEY] = sp.message_id
    if sp.HasField("message_group") and sp.message_group:
        props[PROPERTY_SHARDING_KEY] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        props[PROPERTY_TIMER_DELIVER_MS] = str(millis(sp.delivery_timestamp))
    return props


def body_of(msg: Any) -> bytes:
    body = bytes(msg.body)
    if msg.system_properties.body_encoding == pb.GZIP:
        return gzip.decompress(body)
    return body


def born_host(msg: Any, peer: str) -> str:
    """The send's born host: the client's own ``born_host`` when it is an IPv4 address, else the peer's."""
    host = str(msg.system_properties.born_host)
    try:
        socket.inet_aton(host)
        return host
    except OSError:
        return peer


def to_pb(rec: MessageRecord, topic: str, *, receipt_handle: str = "", invisible_ms: int = 0,
          attempt: int | None = None, queue_id: int | None = None, queue_offset: int | None = None) -> object:
    """A stored record as the ``pb.Message`` a RocketMQ 5 client receives (``topic``: the name it asked for,
    e.g. the real topic of a retry or half record)."""
    props = rec.properties
    body = rec.body
    if rec.sys_flag & COMPRESSED_FLAG:
        body = zlib.decompress(body)
    out = pb.Message()
    out.topic.name = topic
    out.body = body
    for k, v in props.items():
        if k not in HIDDEN_ON_DELIVERY:
            out.user_properties[k] = v
    sp = out.system_properties
    tags = props.get(PROPERTY_TAGS)
    if tags:
        sp.tag = tags
    sp.keys.extend(rec.keys)
    sp.message_id = rec.uniq_key or rec.offset_msg_id
    sp.body_digest.type = pb.MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = pb.IDENTITY
    sp.message_type = message_type(props)
    set_millis(sp.born_timestamp, rec.born_timestamp)
    sp.born_host = rec.born_host.rpartition(":")[0]
    set_millis(sp.store_timestamp, rec.store_timestamp)
    sp.store_host = rec.store_host
    if PROPERTY_TIMER_DELIVER_MS in props:
        try:
            set_millis(sp.delivery_timestamp, int(props[PROPERTY_TIMER_DELIVER_MS]))
        except ValueError:
            pass
    if PROPERTY_SHARDING_KEY in props:
        sp.message_group = props[PROPERTY_SHARDING_KEY]
    if receipt_handle:
        sp.receipt_handle = receipt_handle
        sp.invisible_duration.seconds, rest = divmod(invisible_ms, 1000)
        sp.invisible_duration.nanos = rest * 1_000_000
    sp.queue_id = rec.queue_id if queue_id is None else queue_id
    sp.queue_offset = rec.queue_offset if queue_offset is None else queue_offset
    sp.delivery_attempt = rec.reconsume_times + 1 if attempt is None else attempt
    return out


def no_route_message(topic: str) -> str:
    """The proxy's TOPIC_NOT_FOUND text: its MQClientException's message (``TopicRouteService``, FAQUrl attached)."""
    return (f"CODE: 17  DESC: No topic route info in name server for the topic: {topic}\n"
            "For more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ")


def status(code: int, message: str = "") -> object:
    return pb.Status(code=code, message=message or pb.Code.Name(code))


def worst(codes: Iterable[int]) -> int:
    """The top-level code of a multi-entry answer: the one code when all agree, else MULTIPLE_RESULTS."""
    distinct = set(codes)
    if len(distinct) == 1:
        return distinct.pop()
    return pb.MULTIPLE_RESULTS if distinct else pb.OK
