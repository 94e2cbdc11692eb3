"""Delay levels (upstream ``ScheduleMessageService``, INVENTORY §21).

A message put with property ``DELAY=<level>`` (1..N of ``messageDelayLevel``) is stored in topic
``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, with its real topic and queue in ``REAL_TOPIC``/``REAL_QID``;
its ConsumeQueue unit's tag field holds the deliver time (store time + the level's delay). Consumers never
see it there. :meth:`ScheduleMessageService.deliver_due` re-puts every due message to its real topic (the
same unique id, ``DELAY`` removed, ``SCHEDULE_ORIGIN=<level>:<offset>`` added) and advances that level's
progress, persisted in ``config/delayOffset.json``.

Invariants:
1. Within a level, deliver times never decrease with the queue offset (one delay, increasing store
   times), so a pass stops at the first unit not yet due.
2. ``deliver_due`` is serialised by a lock: concurrent callers (the broker's own tick, Celery beat) never
   deliver the same unit twice.
3. Progress is persisted after a pass that moved, at most every ``flushDelayOffsetInterval`` (10 s), and at
   shutdown. After a crash the progress may lag what was delivered by that much; the first pass after start
   looks each candidate up by unique key in its real topic and skips the ones already delivered
   (``SCHEDULE_ORIGIN`` matches), so a restart neither loses nor duplicates a delayed message.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker_core.codec.config_file import read_config_file, write_config_file
from broker_core.codec.consume_queue import BLANK_UNIT_SIZE
from broker_core.codec.fastjson import dumps_fastjson, items
from broker_core.codec.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_KEY,
)
from broker_core.codec.message_id import UniqueIdGenerator
from broker_core.codec.names import PROPERTY_SCHEDULE_ORIGIN, SCHEDULE_TOPIC
from broker_core.store.message import MessageInner

if TYPE_CHECKING:
    from pathlib import Path

    from broker_core.config import TimerConfig
    from broker_core.store.ports import StoreParts

log = logging.getLogger(__name__)


_PASS_LIMIT = 10_000  # units examined per level per pass


@dataclass
class DeliveryReport:
    delivered: int = 0
    skipped_duplicates: int = 0
    oldest_overdue_ms: int = 0
    per_level: dict[int, int] = field(default_factory=dict)
    # (msg id, topic, keys, delivery time ms) of each delivered message
    delivered_messages: list[tuple[str, str, list[str], int]] = field(default_factory=list)


class ScheduleMessageService:
    def __init__(self, store: StoreParts, config: TimerConfig, config_dir: Path, broker_ip: str) -> None:
        self.store = store
        self.config = config
        self.levels_ms = config.delay_levels_ms
        self.path = config_dir / "delayOffset.json"
        self.offsets: dict[int, int] = {}
        self._lock = threading.Lock()
        self._recovering = True
        self._dirty = False
        self._persisted_at = 0.0  # time.monotonic() of the last write of delayOffset.json
        self.ids = UniqueIdGenerator(broker_ip)

    def load(self) -> None:
        """Read ``delayOffset.json`` (RocketMQ's ``{"offsetTable":{1:0,3:12}}``: level -> next queue offset;
        quoted keys from earlier versions read too), falling back to its ``.bak``."""
        raw = read_config_file(self.path)
        if raw is not None:
            self.offsets = {int(k): int(v) for k, v in items(raw.get("offsetTable", {}))}

    def persist(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            text = dumps_fastjson({"offsetTable": dict(sorted(self.offsets.items()))}, pretty=True)
            self._dirty = False
            self._persisted_at = time.monotonic()
        write_config_file(self.path, text)

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    def delay_ms(self, level: int) -> int:
        return self.levels_ms[min(level, self.max_level) - 1]

    # ------------------------------------------------------------------ put side
    def transform(self, msg: MessageInner) -> None:
        """If ``msg`` asks for a delay level, move it to the schedule topic (in place)."""
        props = msg.properties
        raw = props.get(PROPERTY_DELAY_TIME_LEVEL)
        if raw is None or msg.topic == SCHEDULE_TOPIC:
            return
        try:
            level = int(raw)
        except ValueError:
            return
        if level <= 0:
            return
        level = min(level, self.max_level)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        props.setdefault(PROPERTY_UNIQ_KEY, self.ids.next_id())
        msg.topic = SCHEDULE_TOPIC
        msg.topic_bytes = SCHEDULE_TOPIC.encode()
        msg.queue_id = level - 1
        msg.delay_ms = self.delay_ms(level)
        msg.replace_properties(props)

    # ------------------------------------------------------------------ delivery
    def deliver_due(self, now_ms: int | None = None) -> DeliveryReport:
        now = self.store.clock.now_ms() if now_ms is None else now_ms
        report = DeliveryReport()
        self.store.reput.do_reput()  # the schedule queues must show everything appended so far
        with self._lock:
            recovering = self._recovering
            for level in range(1, self.max_level + 1):
                n = self._deliver_level(level, now, report, recovering)
                if n:
                    report.per_level[level] = n
            self._recovering = False
        # progress is written at most every flushDelayOffsetInterval (and at shutdown); after a crash the first
        # pass re-reads the lagging window in recovery mode, which skips what was already delivered
        due = time.monotonic() - self._persisted_at >= self.config.flush_delay_offset_interval_ms / 1000
        if (report.delivered or report.skipped_duplicates or self._dirty) and due:
            self.persist()
        return report

    def _deliver_level(self, level: int, now: int, report: DeliveryReport, recovering: bool) -> int:
        store = self.store
        cq = store.consume_queue_table.get((SCHEDULE_TOPIC, level - 1))
        if cq is None:
            return 0
        offset = max(self.offsets.get(level, 0), cq.get_min_offset_in_queue())
        end = cq.get_max_offset_in_queue()
        delivered = 0
        while offset < end and delivered < _PASS_LIMIT:
            unit = cq.get_unit(offset)
            if unit is None:
                break
            phy, size, deliver_at = unit
            if size == BLANK_UNIT_SIZE:
                offset += 1
                continue
            if deliver_at > now:
                break
            rec = store.look_message_by_offset(phy)
            if rec is None:  # removed by retention: nothing to deliver
                offset += 1
                continue
            origin = f"{level}:{offset}"
            real_topic = rec.properties.get(PROPERTY_REAL_TOPIC, "")
            if recovering and self._already_delivered(real_topic, rec.uniq_key, origin):
                report.skipped_duplicates += 1
                offset += 1
                continue
            props = dict(rec.properties)
            props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
            props.pop(PROPERTY_REAL_TOPIC, None)
            qid = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0"))
            props[PROPERTY_SCHEDULE_ORIGIN] = origin
            msg = MessageInner(real_topic, rec.body, qid, properties=props, flag=rec.flag, sys_flag=rec.sys_flag,
                               born_timestamp=rec.born_timestamp, reconsume_times=rec.reconsume_times)
            result = store.put_delivered(msg)
            if not result.ok:
                log.warning("delayed message %s to %s not delivered yet: %s", rec.uniq_key, real_topic, result)
                break
            report.oldest_overdue_ms = max(report.oldest_overdue_ms, now - deliver_at)
            report.delivered += 1
            report.delivered_messages.append((rec.uniq_key or "", real_topic, rec.keys, result.store_timestamp))
            delivered += 1
            offset += 1
        if offset != self.offsets.get(level, 0):
            self.offsets[level] = offset
            self._dirty = True
        return delivered

    def _already_delivered(self, topic: str, uniq_key: str | None, origin: str) -> bool:
        if not uniq_key:
            return False
        self.store.dispatch()
        return any(m.properties.get(PROPERTY_SCHEDULE_ORIGIN) == origin
                   for m in self.store.query_message(topic, uniq_key, max_num=64).messages)

    def backlog(self, now_ms: int | None = None) -> dict[int, dict[str, int]]:
        """Per level: messages waiting and the next due time (ms, 0 when none)."""
        now = self.store.clock.now_ms() if now_ms is None else now_ms
        out = {}
        for level in range(1, self.max_level + 1):
            cq = self.store.consume_queue_table.get((SCHEDULE_TOPIC, level - 1))
            if cq is None:
                continue
            offset = max(self.offsets.get(level, 0), cq.get_min_offset_in_queue())
            end = cq.get_max_offset_in_queue()
            unit = cq.get_unit(offset) if offset < end else None
            out[level] = {"waiting": end - offset, "nextDueTimestamp": unit[2] if unit else 0,
                          "overdueMs": max(0, now - unit[2]) if unit else 0, "delayMs": self.delay_ms(level)}
        return out
