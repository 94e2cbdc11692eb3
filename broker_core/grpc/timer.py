"""Arbitrary-time delivery (RocketMQ 5's timer messages: ``delivery_timestamp`` over gRPC; the properties
``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` over remoting, :meth:`TimerService.accept`). One
timer per broker, owned by the controller.

The 18 delay levels of :mod:`broker_core.store.schedule` cannot say "at 12:00:03.250", so a timed message is
held as RocketMQ 5's timer store holds it: stored in the system topic ``rmq_sys_wheel_timer`` (queue 0) with
its real topic and queue in ``REAL_TOPIC``/``REAL_QID`` and its time in ``TIMER_DELIVER_MS``, where no
consumer sees it; at that time it is put again to its real topic (same unique id, ``TIMER_DELIVER_MS`` kept so
the consumer sees the delivery time) and an op record (body: the timer queue offset) marks it delivered in
``rmq_sys_timer_op``. Everything goes through ``MessageStore``'s public API, on the broker's event loop.

Invariants:
1. A message is put to its real topic only when the store clock reads at least its delivery time: never early.
2. The pending set is a min-heap of (delivery ms, timer queue offset); the progress (consumer offset of group
   ``CID_RMQ_SYS_TIMER`` on the timer queue) is the smallest offset not yet delivered, so a restart scans only
   from there.
3. An offset is delivered at most once per process: it leaves the heap before its put.

Crash behaviour: the pending set is rebuilt at start from the timer queue (from the progress) minus the op
records; a message whose real put was written but whose op record was not is delivered again after a restart
(at least once, never lost, as the transaction op records). Due messages found at start go out at once.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from typing import TYPE_CHECKING

from broker_core.codec.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from broker_core.codec.names import (
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    TIMER_PROPERTIES,
)
from broker_core.protocol.fields import BadRequest
from broker_core.remoting.loops import within
from broker_core.server.retry import ensure_topic
from broker_core.store import GetStatus, MessageInner

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_OP_TOPIC = "rmq_sys_timer_op"
TIMER_GROUP = "CID_RMQ_SYS_TIMER"
MAX_SLEEP_S = 1.0


class TimerService:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.store = ctl.store
        self.pending: list[tuple[int, int]] = []
        self.delivered: set[int] = set()
        self._wake = asyncio.Event()

    def load(self) -> None:
        """Rebuild the pending heap from the timer queue and the op records (invariant 2)."""
        progress = max(self.ctl.offsets.query(TIMER_GROUP, TIMER_TOPIC, 0), 0)
        offset = 0
        while True:
            res = self.store.get_message(TIMER_OP_TOPIC, 0, offset, 256)
            if res.status is not GetStatus.FOUND:
                break
            self.delivered.update(o for o in (int(m.body) for m in res.messages) if o >= progress)
            offset = res.next_begin_offset
        offset = progress
        while True:
            res = self.store.get_message(TIMER_TOPIC, 0, offset, 256)
            if res.status is GetStatus.OFFSET_TOO_SMALL:
                offset = res.next_begin_offset
                continue
            if res.status is not GetStatus.FOUND:
                break
            for qoff, rec in zip(res.queue_offsets, res.messages, strict=True):
                if qoff not in self.delivered:
                    heapq.heappush(self.pending, (int(rec.properties.get(PROPERTY_TIMER_DELIVER_MS, "0")), qoff))
            offset = res.next_begin_offset
        if self.pending:
            log.info("timer: %d messages wait for their delivery time", len(self.pending))

    def accept(self, msg: MessageInner) -> int:
        """A remoting send's timer properties, as RocketMQ 5's ``HookUtils.transformTimerMessage``: the delivery
        time is now + ``TIMER_DELAY_SEC`` s, else now + ``TIMER_DELAY_MS`` ms, else ``TIMER_DELIVER_MS``. A time
        to come turns ``msg`` into a timer record (:meth:`hold`; the caller reports the stored offset to
        :meth:`held`) and is returned; a time past leaves a plain message (0). A delay level wins: the timer
        properties are dropped (``checkIfTimerMessage``). BadRequest (MESSAGE_ILLEGAL to the client, with
        RocketMQ's remark): not a number, or later than ``timerMaxDelaySec`` from now. Never rounded down to a
        precision, as RocketMQ's wheel does: never delivered early."""
        props = msg.properties
        if not any(k in props for k in TIMER_PROPERTIES):
            return 0
        if msg.delay_level > 0:
            for k in TIMER_PROPERTIES:
                props.pop(k, None)
            msg.replace_properties(props)
            return 0
        now = self.store.clock.now_ms()
        try:
            if PROPERTY_TIMER_DELAY_SEC in props:
                deliver_ms = now + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
            elif PROPERTY_TIMER_DELAY_MS in props:
                deliver_ms = now + int(props[PROPERTY_TIMER_DELAY_MS])
            else:
                deliver_ms = int(props[PROPERTY_TIMER_DELIVER_MS])
        except ValueError:
            raise BadRequest(self.illegal_remark()) from None
        if deliver_ms <= now:
            return 0
        if deliver_ms - now > self.ctl.config.timer.timer_max_delay_sec * 1000:
            raise BadRequest(self.illegal_remark())
        self.hold(msg, deliver_ms)
        return deliver_ms

    def illegal_remark(self) -> str:
        """SendMessageProcessor's remark for WHEEL_TIMER_MSG_ILLEGAL."""
        return ("timer message illegal, the delay time should not be bigger than the max delay "
                f"{self.ctl.config.timer.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be "
                "bigger than the current time")

    def hold(self, msg: MessageInner, deliver_ms: int) -> None:
        """Turn ``msg`` into a timer record (in place) before it is put."""
        props = msg.properties
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
        msg.topic = TIMER_TOPIC
        msg.topic_bytes = TIMER_TOPIC.encode()
        msg.queue_id = 0
        msg.replace_properties(props)
        for topic in (TIMER_TOPIC, TIMER_OP_TOPIC):
            ensure_topic(self.ctl, topic)

    def held(self, deliver_ms: int, queue_offset: int) -> None:
        """A timer record was stored at ``queue_offset``: wait for its time."""
        heapq.heappush(self.pending, (deliver_ms, queue_offset))
        self._wake.set()

    def deliver_due(self) -> int:
        """Put every message whose time has come to its real topic (invariants 1 and 3). Returns how many."""
        now = self.store.clock.now_ms()
        moved = 0
        while self.pending and self.pending[0][0] <= now:
            _, qoff = heapq.heappop(self.pending)
            res = self.store.get_message(TIMER_TOPIC, 0, qoff, 1)
            if res.status is not GetStatus.FOUND or res.queue_offsets[0] != qoff:
                log.warning("timer message at offset %d is gone from the store (%s)", qoff, res.status.name)
                self._done(qoff)
                continue
            rec = res.messages[0]
            props = dict(rec.properties)
            topic = props.pop(PROPERTY_REAL_TOPIC, "")
            queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0"))
            r = self.store.put_messages([MessageInner(topic, rec.body, queue_id, properties=props, flag=rec.flag,
                                                      sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp,
                                                      born_host=rec.born_host.rpartition(":")[0],
                                                      born_port=int(rec.born_host.rpartition(":")[2] or 0))])[0]
            if not r.ok:  # e.g. disk full: try again on the next tick
                log.warning("timer delivery of offset %d to %s failed: %s", qoff, topic, r.status.name)
                heapq.heappush(self.pending, (now + 1000, qoff))
                break
            self._done(qoff)
            moved += 1
        return moved

    def _done(self, qoff: int) -> None:
        self.store.put_messages([MessageInner(TIMER_OP_TOPIC, str(qoff).encode(), 0)])
        self.delivered.add(qoff)
        progress = max(self.ctl.offsets.query(TIMER_GROUP, TIMER_TOPIC, 0), 0)
        while progress in self.delivered:
            self.delivered.discard(progress)
            progress += 1
        self.ctl.offsets.commit(TIMER_GROUP, TIMER_TOPIC, 0, progress)

    async def run(self) -> None:
        """The broker's timer loop: sleeps until the next delivery time (at most a second), or a new earlier one."""
        while True:
            try:
                if not self.ctl.ha.is_slave:  # a slave's timer records are copies: its master delivers them
                    self.deliver_due()
            except (OSError, ValueError):
                log.exception("timer delivery failed")
            delay = MAX_SLEEP_S
            if self.pending:
                delay = min(delay, max(0.0, (self.pending[0][0] - self.store.clock.now_ms()) / 1000))
            self._wake.clear()
            try:
                await within(self._wake.wait(), delay)
            except TimeoutError:
                pass
