"""Receive/ack consumption (POP): the state every receiver shares (remoting POP clients, gRPC, the REST API).

A pop hands out up to N messages of a topic to a group and makes them invisible for ``invisibleTime`` ms. An
ack finishes a message; a change of invisible time moves its deadline. A message not acked before its deadline
is handed out again with its reconsume count raised (in the record handed out, as RocketMQ's retry records
carry theirs); past ``maxReconsumeTimes`` it goes to ``%DLQ%<group>`` instead.

State and invariants:
1. Per (group, topic, queue): ``next`` is the next offset never handed out; ``inflight`` maps an offset to
   its deadline, reconsume count and the serial of its current delivery. The committed group offset is the
   smallest offset not yet acked (or ``next``), written to ``consumerOffset.json`` with the other offsets.
2. A delivery's serial is its ``popTime``: one per pop (every message of one answer shares it, as RocketMQ's
   checkpoint does), strictly growing and never behind the wall clock by more than a millisecond, so a
   handle names exactly one delivery of an offset. The deadline is ``popTime + invisibleTime``.
3. Two handle forms name a delivery: RocketMQ 5's ``extraInfo`` (remoting POP, :mod:`broker_core.protocol.pop`;
   ``popTime`` is the serial) and ``topic|queue|offset|serial|deadline`` (gRPC and REST). Either is valid only
   while that offset is in flight with that serial and before its deadline.
4. The state survives restarts (:mod:`broker_core.server.pop_state`, which states the crash behaviour): every
   change is journaled before its answer, so after a restart an acked message is never handed out again, a
   message handed out and not acked comes back at its deadline, and reconsume counts go on toward the DLQ.
   Only a queue the journal never saw starts from the committed offset (or, by ``initMode``, the queue's end).
5. A group holds at most ``popInflightMessageThreshold`` messages in flight (as RocketMQ's ``isPopShouldStop``):
   past it a pop hands out only messages whose invisible time ran out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker_core.codec.message import PROPERTY_UNIQ_KEY, MessageRecord, decode_record
from broker_core.codec.records import with_reconsume_times
from broker_core.protocol.fields import BadRequest
from broker_core.protocol.filter import Subscription
from broker_core.protocol.validation import dlq_topic
from broker_core.server.pop_state import InFlight, PopQueue, PopState, QueueKey
from broker_core.server.property_filter import matching_records
from broker_core.server.retry import (
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_DLQ_REASON,
    PROPERTY_DLQ_TIMESTAMP,
    ensure_topic,
    original_topic,
)
from broker_core.store import GetStatus, MessageInner

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

MAX_INVISIBLE_MS = 12 * 3600 * 1000
INIT_MODE_MIN, INIT_MODE_MAX = 0, 1  # RocketMQ's ConsumeInitMode: a new queue starts at its first or its end

__all__ = ["INIT_MODE_MAX", "INIT_MODE_MIN", "MAX_INVISIBLE_MS", "HandleError", "PopResult", "PopService"]


def now_ms() -> int:
    return int(time.time() * 1000)


class HandleError(ValueError):
    pass


@dataclass
class PopResult:
    """What one pop handed out: whole records (their runs in queue order) and, per record, its queue, offset,
    reconsume count and gRPC/REST handle; ``pop_time`` is the deliveries' serial (0 when nothing)."""
    records: list[bytes] = field(default_factory=list)
    meta: list[dict[str, object]] = field(default_factory=list)
    pop_time: int = 0


class PopService:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.state = PopState(ctl.config.config_dir, ctl.config.flush.sync_flush)
        self.queues = self.state.queues

    def load(self) -> None:
        """Restore the in-flight state (the controller calls this at start, before serving)."""
        self.state.load()

    def _queue(self, group: str, topic: str, queue_id: int, init_mode: int = INIT_MODE_MIN) -> PopQueue:
        key = (group, topic, queue_id)
        pq = self.queues.get(key)
        if pq is None:
            store = self.ctl.store
            committed = self.ctl.offsets.query(group, topic, queue_id)
            low = store.get_min_offset_in_queue(topic, queue_id)
            if committed >= 0:
                start = committed
            elif init_mode == INIT_MODE_MAX:
                start = store.get_max_offset_in_queue(topic, queue_id)
            else:
                start = low
            pq = self.queues[key] = PopQueue(max(start, low))
        return pq

    def _commit(self, key: QueueKey, pq: PopQueue) -> None:
        self.ctl.offsets.commit(key[0], key[1], key[2], pq.committable())

    def handle(self, topic: str, queue_id: int, offset: int, serial: int, deadline_ms: int) -> str:
        return f"{topic}|{queue_id}|{offset}|{serial}|{deadline_ms}"

    @staticmethod
    def parse_handle(handle: str) -> tuple[str, int, int, int]:
        try:
            topic, queue_id, offset, serial, _ = handle.split("|")
            return topic, int(queue_id), int(offset), int(serial)
        except ValueError:
            raise BadRequest(f"malformed receipt handle {handle!r}") from None

    def inflight(self, group: str) -> int:
        return self.state.inflight_by_group[group]

    def queue_ids(self, topic: str, queue_id: int = -1) -> list[int]:
        """The queues a pop of ``queue_id`` reads (-1: every readable queue of the topic)."""
        cfg = self.ctl.topics.get(topic)
        count = cfg.read_queue_nums if cfg else 0
        if queue_id >= 0:
            return [queue_id] if queue_id < count else []
        return list(range(count))

    def rest(self, group: str, topic: str, queue_id: int = -1) -> int:
        """Messages of the queues not handed out yet (the POP response's ``restNum``)."""
        store = self.ctl.store
        total = 0
        for q in self.queue_ids(topic, queue_id):
            pq = self.queues.get((group, topic, q))
            start = pq.next if pq else max(self.ctl.offsets.query(group, topic, q), 0)
            total += max(0, store.get_max_offset_in_queue(topic, q) - start)
        return total

    def has_message(self, group: str, topic: str, queue_id: int = -1) -> bool:
        """Whether a pop would find something now (NOTIFICATION's ``hasMsg``): a message never handed out, or
        one whose invisible time ran out."""
        now = now_ms()
        for q in self.queue_ids(topic, queue_id):
            pq = self.queues.get((group, topic, q))
            if pq is not None and any(fl.deadline_ms <= now for fl in pq.inflight.values()):
                return True
        return self.rest(group, topic, queue_id) > 0

    def pop(self, group: str, topic: str, max_nums: int, invisible_ms: int, sub: Subscription,
            max_reconsume: int, fifo: bool = False, queue_id: int = -1,
            init_mode: int = INIT_MODE_MIN) -> PopResult:
        """Hand out up to ``max_nums`` messages of ``queue_id`` (-1: all queues): expired in-flight ones first,
        then new ones (while the group is under ``popInflightMessageThreshold``) that ``sub`` selects (by tag
        hash in the store, or by SQL92 on each record here: a record it does not select is passed over, never
        put in flight).

        ``fifo`` (RocketMQ 5 FIFO groups over gRPC, order POP over remoting): a queue with a message in flight
        whose invisible time has not run out hands out nothing, so a queue's messages (and so each message
        group's, hashed to one queue) are received in order, the next only once the earlier ones are acked
        or dead-lettered."""
        hashes = sub.tag_hashes
        store = self.ctl.store
        state = self.state
        now = now_ms()
        threshold = self.ctl.config.pop_inflight_message_threshold
        out = PopResult()

        def pop_time() -> int:
            if not out.pop_time:
                out.pop_time = state.time_serial(now)
            return out.pop_time

        for qid in self.queue_ids(topic, queue_id):
            if len(out.meta) >= max_nums:
                break
            key = (group, topic, qid)
            pq = self._queue(group, topic, qid, init_mode)
            if fifo and any(fl.deadline_ms > now for fl in pq.inflight.values()):
                continue
            handed: list[int] = []
            gone: list[int] = []
            for offset, fl in sorted(pq.inflight.items()):  # deadlines passed: deliver again (or dead-letter)
                if len(out.meta) >= max_nums:
                    break
                if fl.deadline_ms > now:
                    continue
                res = store.get_message(topic, qid, offset, 1, None, decode=False)
                if res.status is not GetStatus.FOUND or res.queue_offsets[0] != offset:
                    gone.append(offset)  # removed by retention
                    continue
                if fl.reconsume + 1 > max_reconsume:
                    self._dead_letter(group, topic, res.chunks[0], fl.reconsume + 1, max_reconsume)
                    gone.append(offset)
                    continue
                fl.reconsume += 1
                fl.serial = pop_time()
                fl.deadline_ms = fl.serial + invisible_ms
                handed.append(offset)
                out.records.append(with_reconsume_times(res.chunks[0], fl.reconsume))
                self._meta(out, topic, qid, offset, fl)
            while len(out.meta) < max_nums:
                room = min(max_nums - len(out.meta), threshold - state.inflight_by_group[group])
                if room <= 0:
                    break
                res = store.get_message(topic, qid, pq.next, room, hashes, decode=False)
                if res.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.NO_MATCHED_MESSAGE):
                    pq.next = res.next_begin_offset
                    continue
                if res.status is not GetStatus.FOUND:
                    break
                if sub.is_sql92:
                    picked = matching_records(res.chunks, res.queue_offsets, sub)
                    out.records.extend(record for _, record in picked)
                    offsets = [offset for offset, _ in picked]
                else:
                    out.records.extend(res.chunks)
                    offsets = res.queue_offsets
                for offset in offsets:
                    serial = pop_time()
                    fl = InFlight(serial + invisible_ms, 0, serial)
                    state.add(key, pq, offset, fl)
                    handed.append(offset)
                    self._meta(out, topic, qid, offset, fl)
                pq.next = res.next_begin_offset
            state.finish(key, pq, gone)
            if handed:
                state.hand_out(key, pq, handed, max_reconsume)
            self._commit(key, pq)
        return out

    def _meta(self, out: PopResult, topic: str, queue_id: int, offset: int, fl: InFlight) -> None:
        out.meta.append({"handle": self.handle(topic, queue_id, offset, fl.serial, fl.deadline_ms),
                         "reconsumeTimes": fl.reconsume, "queueId": queue_id, "offset": offset})

    def peek(self, group: str, topic: str, queue_id: int, max_nums: int) -> tuple[list[bytes], int]:
        """PEEK_MESSAGE: up to ``max_nums`` messages from the group's committed offset of ``queue_id`` (-1: all
        queues), changing nothing; with the messages left after them (``restNum``)."""
        store = self.ctl.store
        records: list[bytes] = []
        rest = 0
        for q in self.queue_ids(topic, queue_id):
            pq = self.queues.get((group, topic, q))
            start = pq.committable() if pq else self.ctl.offsets.query(group, topic, q)
            start = max(start, store.get_min_offset_in_queue(topic, q))
            room = max_nums - len(records)
            if room > 0:
                res = store.get_message(topic, q, start, room, None, decode=False)
                if res.status is GetStatus.FOUND:
                    records.extend(res.chunks)
                    start = res.next_begin_offset
            rest += max(0, store.get_max_offset_in_queue(topic, q) - start)
        return records, rest

    def revive(self) -> int:
        """Dead-letter in-flight messages whose invisible time ran out and that have no retry left (the
        others are handed out again by the next receive). Runs every second on the broker."""
        now = now_ms()
        moved = 0
        for key, pq in list(self.queues.items()):
            group, topic, queue_id = key
            max_reconsume = self.state.max_reconsume.get(group, self.ctl.config.max_reconsume_times)
            for offset, fl in sorted(pq.inflight.items()):
                if fl.deadline_ms > now or fl.reconsume + 1 <= max_reconsume:
                    continue
                res = self.ctl.store.get_message(topic, queue_id, offset, 1, None, decode=False)
                if res.status is GetStatus.FOUND and res.queue_offsets[0] == offset:
                    self._dead_letter(group, topic, res.chunks[0], fl.reconsume + 1, max_reconsume)
                    moved += 1
                self.state.finish(key, pq, [offset])
                self._commit(key, pq)
        return moved

    def _dead_letter(self, group: str, topic: str, raw: bytes, times: int, max_reconsume: int) -> None:
        rec: MessageRecord = decode_record(raw, check_crc=False)
        props = dict(rec.properties)
        props.setdefault(PROPERTY_UNIQ_KEY, rec.offset_msg_id)
        props[PROPERTY_DLQ_ORIGIN_TOPIC] = original_topic(rec)
        props[PROPERTY_DLQ_REASON] = f"received {times} times without an ack (max {max_reconsume} retries)"
        props[PROPERTY_DLQ_TIMESTAMP] = str(self.ctl.store.clock.now_ms())
        dlq = dlq_topic(group)
        ensure_topic(self.ctl, dlq)
        self.ctl.store.put_messages([MessageInner(dlq, rec.body, 0, properties=props, flag=rec.flag,
                                                  reconsume_times=times - 1)])

    def _lookup(self, group: str, topic: str, queue_id: int, offset: int,
                serial: int) -> tuple[QueueKey, PopQueue, InFlight]:
        key = (group, topic, queue_id)
        pq = self.queues.get(key)
        fl = pq.inflight.get(offset) if pq else None
        if pq is None or fl is None or fl.serial != serial:
            raise HandleError("receipt handle is unknown or was already used (acked, or delivered again)")
        if fl.deadline_ms < now_ms():
            raise HandleError("receipt handle expired: the invisible time ran out")
        return key, pq, fl

    def ack_at(self, group: str, topic: str, queue_id: int, offset: int, serial: int) -> None:
        """Finish the delivery ``serial`` (its ``popTime``) of ``offset``; HandleError when it is not current."""
        key, pq, _ = self._lookup(group, topic, queue_id, offset, serial)
        self.state.finish(key, pq, [offset])
        self._commit(key, pq)

    def change_at(self, group: str, topic: str, queue_id: int, offset: int, serial: int, invisible_ms: int) -> InFlight:
        """Make the delivery ``serial`` of ``offset`` invisible for ``invisible_ms`` from now, as a new delivery
        (a new serial: the old handle no longer works). Its new state."""
        key, pq, fl = self._lookup(group, topic, queue_id, offset, serial)
        fl.serial = self.state.time_serial(now_ms())
        fl.deadline_ms = fl.serial + invisible_ms
        self.state.hand_out(key, pq, [offset], self.state.max_reconsume.get(group, self.ctl.config.max_reconsume_times))
        return fl

    def ack(self, group: str, handle: str) -> None:
        """Finish the delivery a gRPC/REST ``handle`` names. Raises HandleError if it expired or was used."""
        topic, queue_id, offset, serial = self.parse_handle(handle)
        self.ack_at(group, topic, queue_id, offset, serial)

    def change_invisible(self, group: str, handle: str, invisible_ms: int) -> str:
        topic, queue_id, offset, serial = self.parse_handle(handle)
        fl = self.change_at(group, topic, queue_id, offset, serial, invisible_ms)
        return self.handle(topic, queue_id, offset, fl.serial, fl.deadline_ms)
