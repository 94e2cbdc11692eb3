"""Retry, dead letters and resending them (INVENTORY §19-20, Appendix A).

- CONSUMER_SEND_MSG_BACK (clustering consumers, after a failed consumption): the message goes back as a new
  record of ``%RETRY%<group>`` with the same unique id, ``RECONSUMETIMES + 1``, the original topic in
  ``RETRY_TOPIC`` and delay level ``3 + reconsume times`` (10 s, 30 s, 1 m, ... 2 h with the default levels).
  Once it has been reconsumed ``maxReconsumeTimes`` times it goes to ``%DLQ%<group>`` instead, keeping its
  original topic, id, keys and properties; consumers never subscribe to DLQ topics.
- RESEND_DEAD_LETTERS (admin): re-produce dead letters to their original topic (or a chosen one) as new
  messages (new unique id, ``ORIGIN_MESSAGE_ID`` = the dead letter's id, reconsume count 0), whether or
  not any consumer is online; one result per message.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from broker_core.codec import CodecError
from broker_core.codec.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_KEY,
    MessageRecord,
)
from broker_core.codec.message_id import UniqueIdGenerator
from broker_core.codec.names import (
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_DLQ_REASON,
    PROPERTY_DLQ_TIMESTAMP,
    PROPERTY_RESEND_FROM_DLQ,
    PROPERTY_SCHEDULE_ORIGIN,
)
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.fields import BadRequest, int_field, str_field
from broker_core.protocol.validation import dlq_topic, group_error, retry_topic, topic_error
from broker_core.remoting.server import Connection, Handler
from broker_core.server.state import PERM_READ, PERM_WRITE, TopicConfig
from broker_core.store import MessageInner

if TYPE_CHECKING:
    from broker_core.server.ports import Broker


RETRY_BASE_LEVEL = 3


def ensure_topic(ctl: Broker, topic: str) -> None:
    if ctl.topics.get(topic) is None:
        ctl.topics.upsert(TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE))
        ctl.spawn(ctl.register_all())


def original_topic(rec: MessageRecord) -> str:
    return rec.properties.get(PROPERTY_RETRY_TOPIC) or rec.properties.get(PROPERTY_DLQ_ORIGIN_TOPIC) or rec.topic


class SendBackProcessor:
    """CONSUMER_SEND_MSG_BACK (retry and dead letters) and RESEND_DEAD_LETTERS."""

    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.ids = UniqueIdGenerator(ctl.config.broker_ip)

    def handlers(self) -> dict[int, Handler]:
        ctl, ids = self.ctl, self.ids
        store = ctl.store

        def send_back(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            h = cmd.header
            group = str_field(h, "group")
            err = group_error(group)
            if err:
                raise BadRequest(err)
            rec = store.look_message_by_offset(int_field(h, "offset"))
            if rec is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, "no message at that offset (removed by retention?)")
            max_times = int_field(h, "maxReconsumeTimes", int(rec.properties.get(PROPERTY_MAX_RECONSUME_TIMES, 0))
                                  or ctl.groups.get_or_create(group).retry_max_times)
            delay_level = int_field(h, "delayLevel", 0)
            props = dict(rec.properties)
            for name in (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID,
                         PROPERTY_SCHEDULE_ORIGIN):
                props.pop(name, None)
            origin = original_topic(rec)
            props.setdefault(PROPERTY_UNIQ_KEY, rec.offset_msg_id)
            props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, rec.offset_msg_id)
            if rec.reconsume_times >= max_times or delay_level < 0:
                topic = dlq_topic(group)
                props.pop(PROPERTY_RETRY_TOPIC, None)
                props[PROPERTY_DLQ_ORIGIN_TOPIC] = origin
                props[PROPERTY_DLQ_REASON] = f"consumed {rec.reconsume_times + 1} times without success (max " \
                                            f"{max_times} retries)"
                props[PROPERTY_DLQ_TIMESTAMP] = str(store.clock.now_ms())
                reconsume = rec.reconsume_times
            else:
                topic = retry_topic(group)
                props[PROPERTY_RETRY_TOPIC] = origin
                level = delay_level or RETRY_BASE_LEVEL + rec.reconsume_times
                props[PROPERTY_DELAY_TIME_LEVEL] = str(min(level, store.max_delay_level))
                reconsume = rec.reconsume_times + 1
            ensure_topic(ctl, topic)
            msg = MessageInner(topic, rec.body, 0, properties=props, flag=rec.flag, born_timestamp=rec.born_timestamp,
                               reconsume_times=reconsume)
            r = store.put_messages([msg])[0]
            if not r.ok:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"send back failed: {r.status.name} {r.error}")
            dead = topic == dlq_topic(group)
            ctl.tracer.emit([ctl.tracer.event(
                "dead-lettered" if dead else "retry", props[PROPERTY_UNIQ_KEY], origin, group=group, keys=rec.keys,
                reconsume_times=reconsume, status=props.get(PROPERTY_DLQ_REASON, "") if dead else "",
                **({} if dead else {"delayLevel": int(props[PROPERTY_DELAY_TIME_LEVEL])}))])
            return cmd.response(ResponseCode.SUCCESS, "", {"topic": topic, "reconsumeTimes": reconsume})

        def resend(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            h = cmd.header
            group = str_field(h, "group")
            target = h.get("topic")
            if target is not None and topic_error(target):
                raise BadRequest(str(topic_error(target)))
            try:
                wanted = [str(x) for x in json.loads(cmd.body or b"{}").get("offsetMsgIds", [])]
            except (ValueError, AttributeError) as exc:
                raise BadRequest(f"body must be JSON {{\"offsetMsgIds\": [...]}}: {exc}") from None
            results = []
            for offset_id in wanted:
                try:
                    rec = store.view_message_by_id(offset_id)
                except CodecError as exc:
                    results.append({"offsetMsgId": offset_id, "ok": False, "error": str(exc)})
                    continue
                if rec is None or rec.topic != dlq_topic(group):
                    results.append({"offsetMsgId": offset_id, "ok": False,
                                    "error": f"not a dead letter of group {group} on this broker"})
                    continue
                dest = str(target) if target else original_topic(rec)
                if ctl.topics.get(dest) is None:
                    results.append({"offsetMsgId": offset_id, "ok": False, "error": f"topic {dest} does not exist"})
                    continue
                props = {k: v for k, v in rec.properties.items()
                         if k not in (PROPERTY_DLQ_ORIGIN_TOPIC, PROPERTY_DLQ_REASON, PROPERTY_DLQ_TIMESTAMP,
                                      PROPERTY_RETRY_TOPIC, PROPERTY_DELAY_TIME_LEVEL)}
                props[PROPERTY_ORIGIN_MESSAGE_ID] = rec.uniq_key or rec.offset_msg_id
                props[PROPERTY_UNIQ_KEY] = ids.next_id()
                props[PROPERTY_RESEND_FROM_DLQ] = "true"
                cfg = ctl.topics.get(dest)
                queue_id = hash(props[PROPERTY_UNIQ_KEY]) % max(cfg.write_queue_nums, 1) if cfg else 0
                r = store.put_messages([MessageInner(dest, rec.body, queue_id, properties=props, flag=rec.flag)])[0]
                if r.ok:
                    ctl.tracer.emit([ctl.tracer.event("resent", rec.uniq_key or rec.offset_msg_id, original_topic(rec),
                                                      group=group, keys=rec.keys, newMsgId=props[PROPERTY_UNIQ_KEY],
                                                      toTopic=dest,
                                                      # the resend happened when the copy was stored: a clock
                                                      # read after the put could sort it after the copy's steps
                                                      timestamp=r.store_timestamp)])
                results.append({"offsetMsgId": offset_id, "ok": r.ok, "topic": dest,
                                "newMsgId": props[PROPERTY_UNIQ_KEY], "newOffsetMsgId": r.msg_id if r.ok else "",
                                "error": r.error or ("" if r.ok else r.status.name)})
            return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"results": results}).encode())

        return {RequestCode.CONSUMER_SEND_MSG_BACK: send_back, RequestCode.RESEND_DEAD_LETTERS: resend}
