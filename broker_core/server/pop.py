"""Receive/ack consumption (POP style): what the REST API and stateless clients use.

POP_MESSAGE hands out up to N messages of a topic to a group and makes them invisible for
``invisibleTime`` ms; each comes with a receipt handle. ACK_MESSAGE with that handle finishes the
message; CHANGE_MESSAGE_INVISIBLETIME moves its deadline (and returns a new handle). A message not acked
before its deadline is handed out again with its reconsume count raised; past ``maxReconsumeTimes`` it
goes to ``%DLQ%<group>`` instead. An empty receive waits up to ``pollTime`` ms for a message (long
polling; the wait counts toward ``maxHeldPullsPerConnection``).

State and invariants:
1. Per (group, topic, queue): ``next`` is the next offset never handed out; ``inflight`` maps an offset to
   its deadline, reconsume count and current handle serial. The committed group offset is the smallest
   offset not yet acked (or ``next``), written to ``consumerOffset.json`` with the other offsets.
2. A receipt handle is ``topic|queue|offset|serial|deadline``; it is valid only while that offset is in
   flight with the same serial and before its deadline, so a stale or forged handle gets a clear error.
3. The state survives restarts (:mod:`broker_core.server.pop_state`, which states the crash behaviour): every
   change is journaled before its answer, so after a restart an acked message is never handed out again, a
   message handed out and not acked comes back at its deadline, and reconsume counts go on toward the DLQ.
   Only a queue the journal never saw starts from the committed offset.
4. A group holds at most ``popInflightMessageThreshold`` messages in flight (as RocketMQ's
   ``isPopShouldStop``): past it a receive hands out only messages whose invisible time ran out, and an
   empty one is answered at once (PULL_NOT_FOUND, with a remark saying why).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Union

from broker_core.codec.message import PROPERTY_UNIQ_KEY, MessageRecord, decode_record
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.fields import BadRequest, int_field, str_field
from broker_core.protocol.filter import EXPRESSION_TAG, Subscription, SubscriptionParseError, parse_subscription
from broker_core.protocol.validation import dlq_topic, group_error
from broker_core.remoting.server import Connection, Handler
from broker_core.server.consume import trace_delivered
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
    from broker_core.server.controller import BrokerController

MAX_INVISIBLE_MS = 12 * 3600 * 1000

Response = Union[RemotingCommand, Awaitable[RemotingCommand]]  # noqa: UP007 - a runtime alias

__all__ = ["HandleError", "InFlight", "PopProcessor", "PopQueue", "PopService"]


def now_ms() -> int:
    return int(time.time() * 1000)


class PopService:
    def __init__(self, ctl: BrokerController) -> None:
        self.ctl = ctl
        self.state = PopState(ctl.config.config_dir, ctl.config.flush.sync_flush)
        self.queues = self.state.queues

    def load(self) -> None:
        """Restore the in-flight state (the controller calls this at start, before serving)."""
        self.state.load()

    def _queue(self, group: str, topic: str, queue_id: int) -> PopQueue:
        key = (group, topic, queue_id)
        pq = self.queues.get(key)
        if pq is None:
            store = self.ctl.store
            committed = self.ctl.offsets.query(group, topic, queue_id)
            start = committed if committed >= 0 else store.get_min_offset_in_queue(topic, queue_id)
            pq = self.queues[key] = PopQueue(max(start, store.get_min_offset_in_queue(topic, queue_id)))
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

    def pop(self, group: str, topic: str, max_nums: int, invisible_ms: int, sub: Subscription,
            max_reconsume: int, fifo: bool = False) -> tuple[list[bytes], list[dict[str, object]]]:
        """Hand out up to ``max_nums`` messages: expired in-flight ones first, then new ones (while the group
        is under ``popInflightMessageThreshold``) that ``sub`` selects (by tag hash in the store, or by SQL92 on
        each record here: a record it does not select is passed over, never put in flight).

        ``fifo`` (RocketMQ 5 FIFO groups, over gRPC): a queue with a message in flight whose invisible time has
        not run out hands out nothing, so a queue's messages (and so each message group's, hashed to one
        queue) are received in order, the next only once the earlier ones are acked or dead-lettered."""
        hashes = sub.tag_hashes
        store = self.ctl.store
        state = self.state
        cfg = self.ctl.topics.get(topic)
        now = now_ms()
        threshold = self.ctl.config.pop_inflight_message_threshold
        records: list[bytes] = []
        meta: list[dict[str, object]] = []
        for queue_id in range(cfg.read_queue_nums if cfg else 0):
            if len(records) >= max_nums:
                break
            key = (group, topic, queue_id)
            pq = self._queue(group, topic, queue_id)
            if fifo and any(fl.deadline_ms > now for fl in pq.inflight.values()):
                continue
            handed: list[int] = []
            gone: list[int] = []
            for offset, fl in sorted(pq.inflight.items()):  # deadlines passed: deliver again (or dead-letter)
                if len(meta) >= max_nums:
                    break
                if fl.deadline_ms > now:
                    continue
                res = store.get_message(topic, queue_id, offset, 1, None, decode=False)
                if res.status is not GetStatus.FOUND or res.queue_offsets[0] != offset:
                    gone.append(offset)  # removed by retention
                    continue
                if fl.reconsume + 1 > max_reconsume:
                    self._dead_letter(group, topic, res.chunks[0], fl.reconsume + 1, max_reconsume)
                    gone.append(offset)
                    continue
                fl.reconsume += 1
                fl.serial = state.next_serial()
                fl.deadline_ms = now + invisible_ms
                handed.append(offset)
                records.append(res.chunks[0])
                meta.append({"handle": self.handle(topic, queue_id, offset, fl.serial, fl.deadline_ms),
                             "reconsumeTimes": fl.reconsume})
            while len(meta) < max_nums:
                room = min(max_nums - len(meta), threshold - state.inflight_by_group[group])
                if room <= 0:
                    break
                res = store.get_message(topic, queue_id, pq.next, room, hashes, decode=False)
                if res.status is GetStatus.OFFSET_TOO_SMALL:
                    pq.next = res.next_begin_offset
                    continue
                if res.status is not GetStatus.FOUND:
                    if res.status is GetStatus.NO_MATCHED_MESSAGE:
                        pq.next = res.next_begin_offset
                        continue
                    break
                if sub.is_sql92:
                    picked = matching_records(res.chunks, res.queue_offsets, sub)
                    records.extend(record for _, record in picked)
                    offsets = [offset for offset, _ in picked]
                else:
                    records.extend(res.chunks)
                    offsets = res.queue_offsets
                for offset in offsets:
                    fl = InFlight(now + invisible_ms, 0, state.next_serial())
                    state.add(key, pq, offset, fl)
                    handed.append(offset)
                    meta.append({"handle": self.handle(topic, queue_id, offset, fl.serial, fl.deadline_ms),
                                 "reconsumeTimes": 0})
                pq.next = res.next_begin_offset
            state.finish(key, pq, gone)
            if handed:
                state.hand_out(key, pq, handed, max_reconsume)
            self._commit(key, pq)
        return records, meta

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

    def _lookup(self, group: str, handle: str) -> tuple[QueueKey, PopQueue, int, InFlight]:
        topic, queue_id, offset, serial = self.parse_handle(handle)
        key = (group, topic, queue_id)
        pq = self.queues.get(key)
        fl = pq.inflight.get(offset) if pq else None
        if pq is None or fl is None or fl.serial != serial:
            raise HandleError("receipt handle is unknown or was already used (acked, or delivered again)")
        if fl.deadline_ms < now_ms():
            raise HandleError("receipt handle expired: the invisible time ran out")
        return key, pq, offset, fl

    def ack(self, group: str, handle: str) -> None:
        key, pq, offset, _ = self._lookup(group, handle)
        self.state.finish(key, pq, [offset])
        self._commit(key, pq)

    def change_invisible(self, group: str, handle: str, invisible_ms: int) -> str:
        key, pq, offset, fl = self._lookup(group, handle)
        fl.deadline_ms = now_ms() + invisible_ms
        fl.serial = self.state.next_serial()
        self.state.hand_out(key, pq, [offset], self.state.max_reconsume.get(group, self.ctl.config.max_reconsume_times))
        return self.handle(key[1], key[2], offset, fl.serial, fl.deadline_ms)


class HandleError(ValueError):
    pass


class PopProcessor:
    """POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME over a :class:`PopService`."""

    def __init__(self, ctl: BrokerController, service: PopService) -> None:
        self.ctl = ctl
        self.service = service

    def handlers(self) -> dict[int, Handler]:
        ctl, service = self.ctl, self.service

        def _group(h: dict[str, object]) -> str:
            group = str_field(h, "consumerGroup")
            err = group_error(group)
            if err:
                raise BadRequest(err)
            return group

        async def synced(resp: RemotingCommand) -> RemotingCommand:
            await asyncio.get_running_loop().run_in_executor(None, service.state.sync)
            return resp

        def durable(resp: RemotingCommand) -> Response:
            """With SYNC_FLUSH the journal is fsynced before the answer (pop_state's crash behaviour)."""
            return synced(resp) if service.state.sync_each else resp

        def pop(cmd: RemotingCommand, conn: Connection) -> Response:
            h = cmd.header
            group = _group(h)
            topic = str_field(h, "topic")
            if ctl.topics.get(topic) is None:
                return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
            max_nums = max(1, min(int_field(h, "maxMsgNums", 32), 256))
            invisible = int_field(h, "invisibleTime", 30_000)
            if not 1000 <= invisible <= MAX_INVISIBLE_MS:
                raise BadRequest(f"invisibleTime must be 1000..{MAX_INVISIBLE_MS} ms, got {invisible}")
            poll_ms = max(0, min(int_field(h, "pollTime", 0), int(ctl.config.remoting.long_polling_max_s * 1000)))
            kind = str(h.get("expressionType") or EXPRESSION_TAG)
            if kind != EXPRESSION_TAG and not ctl.config.enable_property_filter:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"The broker does not support consumer to filter message by {kind}")
            try:
                sub = parse_subscription(topic, str(h.get("expression", "*")), kind)
            except SubscriptionParseError as exc:
                return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
            max_reconsume = int_field(h, "maxReconsumeTimes", ctl.groups.get_or_create(group).retry_max_times)

            def attempt() -> RemotingCommand | None:
                records, meta = service.pop(group, topic, max_nums, invisible, sub, max_reconsume)
                if records:
                    ctl.stats.get_count += len(meta)
                    if ctl.tracer.enabled:
                        trace_delivered(ctl, b"".join(records), group)
                    return cmd.response(ResponseCode.SUCCESS, "", {"messages": json.dumps(meta)}, b"".join(records))
                return None

            first = attempt()
            if first is not None:
                return durable(first)
            inflight = service.inflight(group)
            if inflight >= ctl.config.pop_inflight_message_threshold:
                return durable(cmd.response(ResponseCode.PULL_NOT_FOUND, (
                    f"group {group} has {inflight} messages received and not acked "
                    f"(popInflightMessageThreshold {ctl.config.pop_inflight_message_threshold}): ack some or wait "
                    "for their invisible time")))
            if poll_ms == 0 or ctl.hold is None or not ctl.hold.reserve(conn):
                return durable(cmd.response(ResponseCode.PULL_NOT_FOUND, "no message to receive"))

            async def long_poll() -> RemotingCommand:
                deadline = time.monotonic() + poll_ms / 1000
                cfg = ctl.topics.get(topic)
                keys = [(topic, q) for q in range(cfg.read_queue_nums if cfg else 0)]
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return cmd.response(ResponseCode.PULL_NOT_FOUND, "no message to receive")
                    await ctl.hold.wait_any(keys, min(left, 1.0))  # type: ignore[union-attr]  # the caller checked ctl.hold
                    resp = attempt()  # also catches in-flight messages whose invisible time ran out
                    if resp is not None:
                        return await synced(resp)

            return ctl.hold.held(conn, long_poll())

        def ack(cmd: RemotingCommand, conn: Connection) -> Response:
            try:
                service.ack(_group(cmd.header), str_field(cmd.header, "receiptHandle"))
            except HandleError as exc:
                return cmd.response(ResponseCode.NO_MESSAGE, str(exc))
            return durable(cmd.response(ResponseCode.SUCCESS))

        def change(cmd: RemotingCommand, conn: Connection) -> Response:
            invisible = int_field(cmd.header, "invisibleTime")
            if not 1000 <= invisible <= MAX_INVISIBLE_MS:
                raise BadRequest(f"invisibleTime must be 1000..{MAX_INVISIBLE_MS} ms, got {invisible}")
            try:
                new = service.change_invisible(_group(cmd.header), str_field(cmd.header, "receiptHandle"), invisible)
            except HandleError as exc:
                return cmd.response(ResponseCode.NO_MESSAGE, str(exc))
            return durable(cmd.response(ResponseCode.SUCCESS, "", {"receiptHandle": new}))

        return {RequestCode.POP_MESSAGE: pop, RequestCode.ACK_MESSAGE: ack,
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME: change}
