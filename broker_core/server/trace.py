"""Message trace events (``traceTopicEnable``): the broker records each message's lifecycle as messages of
``RMQ_SYS_TRACE_TOPIC``, for the trace pages to build timelines from.

Each event is a JSON object: ``type``, ``msgId``, ``topic``, ``group``, ``keys``, ``timestamp`` (ms),
``costMs``, ``broker``, ``queueId``, ``queueOffset``, ``reconsumeTimes``, ``status`` and ``extra``. Types:
``stored``, ``delayed``, ``delivered-after-delay``, ``delivered`` (handed to a group by a pull or a
receive), ``consumed`` / ``reconsume-later`` (reported by the SDK with the listener's cost), ``retry``,
``dead-lettered``, ``resent`` (``extra.newMsgId`` links to the new message), ``transaction-commit``,
``transaction-rollback``. Every event record carries the message id (and the message's keys) in KEYS, so
``query_message(RMQ_SYS_TRACE_TOPIC, msgId)`` finds a message's whole trace through the index. With the option on,
the topic exists from start-up, as in RocketMQ, so Java and C++ clients with message trace on write their own
records (``TraceDataEncoder``, :mod:`broker_core.codec.trace_data`) into it; the trace job merges both.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from broker_core.codec.names import TRACE_TOPIC, TRANS_OP_HALF_TOPIC
from broker_core.server.state import PERM_READ, PERM_WRITE, TopicConfig
from broker_core.store import MessageInner

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

_UNTRACED = frozenset({TRACE_TOPIC, TRANS_OP_HALF_TOPIC})
CPP_TRACE_TOPIC_PREFIX = "rmq_sys_TRACE_DATA_"  # the Apache C++ 2.x client's trace topics, one per region


class Tracer:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.enabled = ctl.config.trace_topic_enable
        self._ready = False
        # as RocketMQ's TopicConfigManager with traceTopicEnable: msgTraceTopicName exists from start-up (1 read and
        # 1 write queue, read-write), so clients with message trace on can send their records at once; this
        # broker's own events always go to RMQ_SYS_TRACE_TOPIC
        self._untraced = _UNTRACED | {ctl.config.msg_trace_topic_name}
        for topic in {TRACE_TOPIC, ctl.config.msg_trace_topic_name} if self.enabled else ():
            if topic and ctl.topics.get(topic) is None:
                ctl.topics.upsert(TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE))

    def event(self, type_: str, msg_id: str, topic: str, *, group: str = "", keys: list[str] | None = None,
              cost_ms: float = 0, queue_id: int = -1, queue_offset: int = -1, reconsume_times: int = 0,
              status: str = "", timestamp: int | None = None, **extra: Any) -> dict[str, Any]:
        return {"type": type_, "msgId": msg_id, "topic": topic, "group": group, "keys": keys or [],
                "timestamp": timestamp or self.ctl.store.clock.now_ms(), "costMs": round(cost_ms, 3),
                "broker": self.ctl.config.broker_name, "queueId": queue_id, "queueOffset": queue_offset,
                "reconsumeTimes": reconsume_times, "status": status, "extra": extra}

    def emit(self, events: list[dict[str, Any]]) -> None:
        # no events about trace records themselves (the clients' trace topics and this broker's own)
        untraced = self._untraced
        events = [e for e in events if e["msgId"] and e["topic"] not in untraced
                  and not e["topic"].startswith(CPP_TRACE_TOPIC_PREFIX)]
        if not self.enabled or not events:
            return
        if not self._ready:
            from broker_core.server.retry import ensure_topic

            ensure_topic(self.ctl, TRACE_TOPIC)
            self._ready = True
        self.ctl.store.put_messages([
            MessageInner(TRACE_TOPIC, json.dumps(e, separators=(",", ":")).encode(), 0,
                         keys=[e["msgId"], *[k for k in e["keys"] if k and " " not in k]], tags=e["type"])
            for e in events])
