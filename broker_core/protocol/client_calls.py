"""Bodies of the requests a broker forwards to one client over the client's own connection (RocketMQ's
``Broker2Client`` / ``ClientRemotingProcessor``), sans-I/O, in fastjson's forms (``broker_core.codec.fastjson``):

=====================================  =========================================================================
request (code)                         body
=====================================  =========================================================================
307 GET_CONSUMER_RUNNING_INFO          reply ``ConsumerRunningInfo``: ``jstack``, ``mqTable`` {<MQ>: ProcessQueueInfo},
                                       ``properties`` (strings), ``statusTable`` {topic: ConsumeStatus},
                                       ``subscriptionSet`` [SubscriptionData]
309 CONSUME_MESSAGE_DIRECTLY           request: one CommitLog record; reply ``ConsumeMessageDirectlyResult``
                                       ``{autoCommit, consumeResult, order, remark, spentTimeMills}``
221 GET_CONSUMER_STATUS_FROM_CLIENT    reply ``GetConsumerStatusBody`` ``{consumerTable, messageQueueTable}``
=====================================  =========================================================================

fastjson writes fields in name order and omits nulls; maps keyed by ``MessageQueue`` carry the queue as an object
in key position, sorted as Java's ``TreeMap`` sorts them (topic, brokerName, queueId).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from broker_core.codec.fastjson import FastjsonPairs, dumps_fastjson, items, loads_fastjson

# ConsumerRunningInfo.properties keys beyond the consumer's own fields
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"

MQ = tuple[str, str, int]  # (topic, brokerName, queueId)


class CMResult(enum.Enum):
    """RocketMQ's ``CMResult``: what a listener answered a direct consumption."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


def _mq_key(mq: MQ) -> dict[str, Any]:
    return {"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}


def _mq_of(key: Any) -> MQ:
    d = dict(key) if isinstance(key, tuple) else key
    return str(d["topic"]), str(d["brokerName"]), int(d["queueId"])


@dataclass
class ConsumeMessageDirectlyResult:
    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None  # a CMResult name
    remark: str | None = None
    spent_time_ms: int = 0

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"autoCommit": self.auto_commit}
        if self.consume_result is not None:
            doc["consumeResult"] = self.consume_result
        doc["order"] = self.order
        if self.remark is not None:
            doc["remark"] = self.remark
        doc["spentTimeMills"] = self.spent_time_ms
        return dumps_fastjson(doc).encode()

    @classmethod
    def decode(cls, body: bytes) -> ConsumeMessageDirectlyResult:
        doc = loads_fastjson(body)
        if not isinstance(doc, dict):
            raise ValueError("ConsumeMessageDirectlyResult must be a JSON object")
        result = doc.get("consumeResult")
        remark = doc.get("remark")
        return cls(bool(doc.get("order", False)), bool(doc.get("autoCommit", True)),
                   None if result is None else str(result), None if remark is None else str(remark),
                   int(doc.get("spentTimeMills") or 0))

    def as_dict(self) -> dict[str, Any]:
        return {"order": self.order, "autoCommit": self.auto_commit, "consumeResult": self.consume_result,
                "remark": self.remark, "spentTimeMills": self.spent_time_ms}


# ProcessQueueInfo's fields in fastjson's order, with their defaults
PROCESS_QUEUE_FIELDS: dict[str, Any] = {
    "cachedMsgCount": 0, "cachedMsgMaxOffset": 0, "cachedMsgMinOffset": 0, "cachedMsgSizeInMiB": 0,
    "commitOffset": 0, "droped": False, "lastConsumeTimestamp": 0, "lastLockTimestamp": 0, "lastPullTimestamp": 0,
    "locked": False, "transactionMsgCount": 0, "transactionMsgMaxOffset": 0, "transactionMsgMinOffset": 0,
    "tryUnlockTimes": 0}
# ConsumeStatus's fields in fastjson's order (doubles, and one long)
CONSUME_STATUS_FIELDS: dict[str, Any] = {
    "consumeFailedMsgs": 0, "consumeFailedTPS": 0.0, "consumeOKTPS": 0.0, "consumeRT": 0.0, "pullRT": 0.0,
    "pullTPS": 0.0}


@dataclass
class ConsumerRunningInfo:
    properties: dict[str, str] = field(default_factory=dict)
    subscriptions: list[dict[str, Any]] = field(default_factory=list)  # SubscriptionData objects
    mq_table: dict[MQ, dict[str, Any]] = field(default_factory=dict)  # mq -> ProcessQueueInfo
    status_table: dict[str, dict[str, Any]] = field(default_factory=dict)  # topic -> ConsumeStatus
    jstack: str | None = None

    def encode(self) -> bytes:
        doc: dict[str, Any] = {}
        if self.jstack is not None:
            doc["jstack"] = self.jstack
        doc["mqTable"] = FastjsonPairs(
            (_mq_key(mq), {k: self.mq_table[mq].get(k, d) for k, d in PROCESS_QUEUE_FIELDS.items()})
            for mq in sorted(self.mq_table))
        doc["properties"] = {k: str(v) for k, v in sorted(self.properties.items())}
        doc["statusTable"] = {t: {k: float(s.get(k, d)) if isinstance(d, float) else int(s.get(k, d))
                                  for k, d in CONSUME_STATUS_FIELDS.items()}
                              for t, s in sorted(self.status_table.items())}
        doc["subscriptionSet"] = sorted(self.subscriptions, key=lambda s: (str(s.get("topic")),
                                                                            str(s.get("subString"))))
        return dumps_fastjson(doc).encode()

    @classmethod
    def decode(cls, body: bytes) -> ConsumerRunningInfo:
        doc = loads_fastjson(body)
        if not isinstance(doc, dict):
            raise ValueError("ConsumerRunningInfo must be a JSON object")
        mq_table = {_mq_of(k): dict(v) for k, v in items(doc.get("mqTable") or {})}
        status = {str(k): dict(v) for k, v in items(doc.get("statusTable") or {})}
        props = {str(k): str(v) for k, v in items(doc.get("properties") or {})}
        subs = [dict(s) for s in doc.get("subscriptionSet") or [] if isinstance(s, dict)]
        jstack = doc.get("jstack")
        return cls(props, subs, mq_table, status, None if jstack is None else str(jstack))

    def as_dict(self) -> dict[str, Any]:
        """A plain JSON view (queues as a list, for consoles and REST)."""
        return {"properties": dict(self.properties), "subscriptions": list(self.subscriptions),
                "queues": [{"topic": t, "brokerName": b, "queueId": q, **self.mq_table[(t, b, q)]}
                           for (t, b, q) in sorted(self.mq_table)],
                "statusTable": dict(self.status_table), "jstack": self.jstack}


def encode_consumer_status_body(message_queue_table: dict[MQ, int] | None = None,
                                consumer_table: dict[str, dict[MQ, int]] | None = None) -> bytes:
    """``GetConsumerStatusBody``: ``{"consumerTable":{clientId:{<MQ>:offset}},"messageQueueTable":{<MQ>:offset}}``."""
    def table(t: dict[MQ, int]) -> FastjsonPairs:
        return FastjsonPairs((_mq_key(mq), int(o)) for mq, o in sorted(t.items()))

    return dumps_fastjson({"consumerTable": {c: table(t) for c, t in sorted((consumer_table or {}).items())},
                           "messageQueueTable": table(message_queue_table or {})}).encode()


def decode_consumer_status_body(body: bytes) -> tuple[dict[MQ, int], dict[str, dict[MQ, int]]]:
    """``(messageQueueTable, consumerTable)`` of a ``GetConsumerStatusBody``."""
    doc = loads_fastjson(body)
    if not isinstance(doc, dict):
        raise ValueError("GetConsumerStatusBody must be a JSON object")
    mqs = {_mq_of(k): int(v) for k, v in items(doc.get("messageQueueTable") or {})}
    consumers = {str(c): {_mq_of(k): int(v) for k, v in items(t or {})}
                 for c, t in items(doc.get("consumerTable") or {})}
    return mqs, consumers
