"""Transaction messages (the seeds give only the flags; this follows RocketMQ 4.x's design).

Protocol:
1. The producer sends a *half message*: a normal send with property ``TRAN_MSG=true`` and its producer
   group in ``PGROUP``. The broker stores it in ``RMQ_SYS_TRANS_HALF_TOPIC`` (queue 0) with the real topic
   and queue in ``REAL_TOPIC``/``REAL_QID``, so no consumer of the real topic can see it. The reply's
   ``queueOffset`` (the half queue offset) is the transaction id.
2. The producer runs its local transaction and sends END_TRANSACTION (RocketMQ's header: ``commitOrRollback``
   8 commit, 12 rollback, 0 unknown; ``commitLogOffset`` of the half message, decoded by clients from the
   send response's offset message id; ``tranStateTableOffset`` its half queue offset).
3. COMMIT re-puts the message to its real topic (same unique id); both outcomes write an *op record* to
   ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` whose body is the half offset, which marks the half message resolved.
   Ending an already-resolved transaction is a no-op.
4. Every ``transactionCheckInterval`` the broker walks unresolved half messages older than
   ``transactionTimeOut`` and sends CHECK_TRANSACTION_STATE (oneway, JSON; header ``tranStateTableOffset,
   commitLogOffset, msgId, transactionId, offsetMsgId``; the half message as body) to a live producer of the
   message's group, which answers with END_TRANSACTION (``fromTransactionCheck=true``). After ``transactionCheckMax``
   checks without an answer the half message is rolled back (logged). A check that finds no producer of the
   group connected counts too (as RocketMQ's check counter, kept in the half message, counts every pass), so
   a half message whose producer group is gone is rolled back after the same limit instead of being held
   forever.

Crash behaviour: resolution state is rebuilt at start from the op topic; the check progress (first
unresolved half offset) is a consumer offset of group ``CID_RMQ_SYS_TRANS``. A commit whose op record
was not yet written when the broker died is committed again on the next END_TRANSACTION or check, so
the real message may appear twice (at least once, never lost).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from broker_core.codec.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    TRANSACTION_TYPE_MASK,
)
from broker_core.codec.message import (
    TRANSACTION_COMMIT_TYPE as SYSFLAG_COMMIT,
)
from broker_core.codec.message_id import UniqueIdGenerator
from broker_core.codec.names import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANSACTION_CHECK_GROUP
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.fields import BadRequest, int_field
from broker_core.protocol.headers import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from broker_core.remoting.server import Connection, Handler
from broker_core.server.retry import ensure_topic
from broker_core.store import GetStatus, MessageInner

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

PROPERTY_TRANSACTION_ID = "__transactionId__"  # TransactionalMessageUtil.TRANSACTION_ID: the half's unique id

log = logging.getLogger(__name__)

HALF_TOPIC = TRANS_HALF_TOPIC
OP_TOPIC = TRANS_OP_HALF_TOPIC
CHECK_GROUP = TRANSACTION_CHECK_GROUP


class TransactionService:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.store = ctl.store
        self.done: set[int] = set()
        self.check_times: dict[int, int] = {}
        self._lock = threading.Lock()
        self.ids = UniqueIdGenerator(ctl.config.broker_ip)

    def load(self) -> None:
        offset = 0
        while True:
            res = self.store.get_message(OP_TOPIC, 0, offset, 256)
            if res.status is not GetStatus.FOUND:
                break
            self.done.update(int(m.body) for m in res.messages)
            offset = res.next_begin_offset

    def prepare(self, msg: MessageInner) -> None:
        """Turn a half message into a record of the half topic (in place)."""
        props = msg.properties
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        props.setdefault(PROPERTY_UNIQ_KEY, self.ids.next_id())
        props[PROPERTY_TRANSACTION_ID] = props[PROPERTY_UNIQ_KEY]  # TransactionalMessageBridge.parseHalfMessageInner
        msg.topic = HALF_TOPIC
        msg.topic_bytes = HALF_TOPIC.encode()
        msg.queue_id = 0
        # as RocketMQ's parseHalfMessageInner: the half record itself is a plain message of the half topic
        # (a PREPARED sysFlag would keep it out of the ConsumeQueue)
        msg.sys_flag &= ~TRANSACTION_TYPE_MASK
        msg.replace_properties(props)
        for topic in (HALF_TOPIC, OP_TOPIC):
            ensure_topic(self.ctl, topic)

    def end(self, half_offset: int, commit: bool) -> str:
        """Resolve one half message; returns what happened (idempotent)."""
        with self._lock:
            if half_offset in self.done:
                return "already resolved"
            self.store.reput.do_reput()  # the half message may be appended but not yet dispatched
            res = self.store.get_message(HALF_TOPIC, 0, half_offset, 1)
            if res.status is not GetStatus.FOUND or res.queue_offsets[0] != half_offset:
                raise BadRequest(f"no half message at offset {half_offset}")
            rec = res.messages[0]
            if commit:
                props = dict(rec.properties)
                topic = props.pop(PROPERTY_REAL_TOPIC)
                queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0"))
                props.pop(PROPERTY_TRANSACTION_PREPARED, None)
                sys_flag = (rec.sys_flag & ~TRANSACTION_TYPE_MASK) | SYSFLAG_COMMIT
                r = self.store.put_messages([MessageInner(topic, rec.body, queue_id, properties=props, flag=rec.flag,
                                                          sys_flag=sys_flag, born_timestamp=rec.born_timestamp)])[0]
                if not r.ok:
                    raise RuntimeError(f"commit of half message {half_offset} failed: {r.status.name}")
            r = self.store.put_messages([MessageInner(OP_TOPIC, str(half_offset).encode(), 0,
                                                      properties={"OP": "commit" if commit else "rollback"})])[0]
            if not r.ok:
                raise RuntimeError(f"op record of half message {half_offset} failed: {r.status.name}")
            self.done.add(half_offset)
            self.check_times.pop(half_offset, None)
            self.ctl.tracer.emit([self.ctl.tracer.event(
                "transaction-commit" if commit else "transaction-rollback", rec.uniq_key or rec.offset_msg_id,
                rec.properties.get(PROPERTY_REAL_TOPIC, rec.topic), keys=rec.keys,
                group=rec.properties.get(PROPERTY_PRODUCER_GROUP, ""))])
            self._advance()
            return "committed" if commit else "rolled back"

    def _advance(self) -> None:
        progress = max(self.ctl.offsets.query(CHECK_GROUP, HALF_TOPIC, 0), 0)
        while progress in self.done:
            progress += 1
        self.ctl.offsets.commit(CHECK_GROUP, HALF_TOPIC, 0, progress)

    def check(self) -> int:
        """Ask producers about unresolved half messages older than the timeout. Returns checks sent."""
        cfg = self.ctl.config.transaction
        now = self.store.clock.now_ms()
        offset = max(self.ctl.offsets.query(CHECK_GROUP, HALF_TOPIC, 0), 0)
        sent = 0
        while True:
            res = self.store.get_message(HALF_TOPIC, 0, offset, 64)
            if res.status is not GetStatus.FOUND:
                break
            for qoff, rec in zip(res.queue_offsets, res.messages, strict=True):
                if qoff in self.done or now - rec.store_timestamp < cfg.transaction_timeout_ms:
                    continue
                times = self.check_times.get(qoff, 0)
                group = rec.properties.get(PROPERTY_PRODUCER_GROUP, "")
                if times >= cfg.transaction_check_max:
                    log.warning("half message %d of %s (producer group %s) was checked %d times without an answer: "
                                "rolled back", qoff, rec.properties.get(PROPERTY_REAL_TOPIC), group, times)
                    self.end(qoff, commit=False)
                    continue
                producers = list(self.ctl.consumers.producers.get(group, {}).values())
                self.check_times[qoff] = times + 1
                if not producers:
                    log.info("half message %d: no producer of group %s is connected (check %d of %d)", qoff, group,
                             times + 1, cfg.transaction_check_max)
                    continue
                raw = self.store.get_message_bytes(rec.commit_log_offset, rec.store_size) or b""
                uniq = rec.uniq_key or rec.offset_msg_id
                producers[qoff % len(producers)].send(RemotingCommand.request(
                    RequestCode.CHECK_TRANSACTION_STATE, {
                        "tranStateTableOffset": qoff, "commitLogOffset": rec.commit_log_offset, "msgId": uniq,
                        "transactionId": uniq, "offsetMsgId": rec.offset_msg_id}, raw, oneway=True))
                sent += 1
            offset = res.next_begin_offset
        return sent


class EndTransactionProcessor:
    """END_TRANSACTION over a :class:`TransactionService`."""

    def __init__(self, ctl: Broker, service: TransactionService) -> None:
        self.ctl = ctl
        self.service = service

    def handlers(self) -> dict[int, Handler]:
        ctl, service = self.ctl, self.service

        def end(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
            """END_TRANSACTION (Java sends it oneway): the half message is found by ``commitLogOffset``."""
            h = cmd.header
            state = int_field(h, "commitOrRollback")
            if state == TRANSACTION_NOT_TYPE:
                return cmd.response(ResponseCode.SUCCESS, "left for the check-back")
            if state not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
                raise BadRequest(f"commitOrRollback must be 8 (commit), 12 (rollback) or 0 (unknown), got {state}")
            rec = ctl.store.look_message_by_offset(int_field(h, "commitLogOffset"))
            if rec is None or rec.topic != HALF_TOPIC:
                return cmd.response(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
            if rec.properties.get(PROPERTY_PRODUCER_GROUP, str(h.get("producerGroup", ""))) != h.get("producerGroup"):
                return cmd.response(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
            outcome = service.end(rec.queue_offset, state == TRANSACTION_COMMIT_TYPE)
            return cmd.response(ResponseCode.SUCCESS, outcome)

        return {RequestCode.END_TRANSACTION: end}
