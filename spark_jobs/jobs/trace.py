"""Message trace: a message's lifecycle from its CommitLog records and the broker's trace events.

``run_trace(spark, segments, msg_id=None, key=None, begin_ms=None, end_ms=None, progress=None, job_group=None,
output_dir=None) -> TraceResult``. One pass finds every record that holds one of the wanted ids or keys (raw
``find`` first, then the codec's decode and an exact check): the message itself, its ``%RETRY%<group>`` and
``%DLQ%<group>`` copies (same unique id), delayed copies, messages resent from the DLQ (``ORIGIN_MESSAGE_ID``)
and the ``RMQ_SYS_TRACE_TOPIC`` events keyed by the id (see ``broker_core/server/trace.py`` for their JSON).
A ``resent`` event links to the new message; the trace follows the link (another pass for the new id, up to
``follow`` links).

Timeline steps (ordered by time, then lifecycle order, then link depth): ``produced`` (born time, from the
record), ``stored``, ``delayed``, ``delivered-after-delay``, ``delivered`` (per group, with the attempt =
reconsume times + 1), ``consumed`` / ``reconsume-later`` (with the listener's cost), ``retry`` (delay level and
``delayMs`` until the next delivery), ``dead-lettered``, ``resent`` (``newMsgId``), transaction commit/rollback.
Without trace events (``traceTopicEnable`` off) the steps come from the records alone. Records that Java and C++
clients with message trace on write into the same topic (``TraceDataEncoder``, :mod:`broker_core.codec.trace_data`)
merge in as ``client-sent``, ``client-consume-start``, ``client-consumed`` and ``client-transaction-end`` steps
(``source`` = ``client``). Each step has ``msgId``, ``depth`` (0 for the asked message, 1 for a resent copy ...),
``source`` (``trace``, ``client`` or ``commitlog``) and, for record steps, the record's coordinates.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_core.codec import CodecError
from broker_core.codec.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_ORIGIN_MESSAGE_ID, MessageRecord
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.codec.names import DLQ_GROUP_TOPIC_PREFIX as DLQ_PREFIX
from broker_core.codec.names import PROPERTY_DLQ_ORIGIN_TOPIC, PROPERTY_DLQ_REASON, SCHEDULE_TOPIC, TRACE_TOPIC
from broker_core.codec.names import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from broker_core.codec.trace_data import is_trace_data
from spark_jobs.output import jsonable, write_jsonl
from spark_jobs.runner import ProgressCallback, codecs_of, run_splits
from spark_jobs.segments import (
    DEFAULT_SPLIT_BYTES,
    Segment,
    Split,
    plan_splits,
    segments_from_manifest,
    segments_of,
)
from spark_jobs.split_io import record_at
from spark_jobs.transforms.client_trace import client_events, pair_client_events
from spark_jobs.transforms.filters import Compiled, SearchSpec
from spark_jobs.transforms.scan import scan_split

LIFECYCLE = ["produced", "client-sent", "stored", "delayed", "delivered-after-delay", "delivered",
             "client-consume-start", "client-consumed", "consumed", "reconsume-later", "retry", "dead-lettered",
             "resent", "client-transaction-end", "transaction-commit", "transaction-rollback"]
_RANK = {t: i for i, t in enumerate(LIFECYCLE)}


@dataclass
class TraceResult:
    msg_id: str | None
    key: str | None
    ids: list[str]  # the message id and every id followed through resends
    records: list[dict[str, Any]]  # the message's CommitLog records (original, retry, DLQ, delayed, resent)
    events: list[dict[str, Any]]  # raw trace events (JSON of RMQ_SYS_TRACE_TOPIC records)
    timeline: list[dict[str, Any]]
    groups: dict[str, dict[str, Any]]
    scanned: int = 0
    bytes_scanned: int = 0
    passes: int = 0
    torn: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    outputs: dict[str, str] = field(default_factory=dict)
    codecs: list[str] = field(default_factory=list)  # the codec the splits were decoded with where they ran

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["records"] = [jsonable(r) for r in self.records]
        return d


class TraceMatcher:
    """Exact check for a trace pass (picklable): the record carries one of ``ids`` (unique key, offset id,
    origin id, or a KEYS value of a trace event) or, in key mode, one of ``keys``."""

    def __init__(self, ids: frozenset[str], keys: frozenset[str]) -> None:
        self.ids, self.keys = ids, keys

    def __call__(self, rec: MessageRecord) -> bool:
        ids = self.ids
        if rec.uniq_key in ids or rec.properties.get(PROPERTY_ORIGIN_MESSAGE_ID) in ids:
            return True
        rkeys = rec.keys
        if rec.topic == TRACE_TOPIC or is_trace_data(rec.body):  # client records may be in a msgTraceTopicName
            return any(k in ids or k in self.keys for k in rkeys)
        if self.keys and any(k in self.keys for k in rkeys):
            return True
        return bool(ids) and rec.offset_msg_id in ids


class _TraceFn:
    def __init__(self, spec: SearchSpec, ids: frozenset[str], keys: frozenset[str]) -> None:
        self.spec, self.ids, self.keys = spec, ids, keys

    def __call__(self, split: Split):  # type: ignore[no-untyped-def]  # returns a pyspark partition iterator (no stubs)
        compiled = Compiled(self.spec)
        needles = tuple(x.encode() for x in (*self.ids, *self.keys))
        matcher = TraceMatcher(self.ids, self.keys)
        return scan_split(split, compiled, accept=matcher, any_of=needles)


def _record_at_offset_id(segments: list[Segment], msg_id: str) -> dict[str, Any] | None:
    """The record an offset message id points at, read on the driver (no scan needed)."""
    try:
        _, _, phy = decode_offset_msg_id(msg_id)
    except CodecError:
        return None
    for seg in segments:
        if seg.file_from_offset <= phy < seg.file_from_offset + seg.bound:
            try:
                rec = record_at(seg, phy - seg.file_from_offset)
            except (CodecError, ValueError, IndexError, struct.error):
                return None
            if rec.commit_log_offset == phy and rec.offset_msg_id == msg_id:
                return {"uniq_key": rec.uniq_key}
    return None


def run_trace(spark: Any, segments: list[Segment] | dict[str, Any] | str, msg_id: str | None = None,
              key: str | None = None, begin_ms: int | None = None, end_ms: int | None = None,
              progress: ProgressCallback | None = None, job_group: str | None = None, *,
              output_dir: str | None = None, follow: int = 3, split_bytes: int = DEFAULT_SPLIT_BYTES) -> TraceResult:
    """Trace a message by id (unique key or offset message id) or by key."""
    t0 = time.perf_counter()
    if not msg_id and not key:
        raise ValueError("give msg_id or key")
    if not isinstance(segments, list):
        segments = segments_from_manifest(segments)
    ids: set[str] = set()
    if msg_id:
        ids.add(msg_id)
        hit = _record_at_offset_id(segments, msg_id)
        if hit and hit["uniq_key"]:
            ids.add(hit["uniq_key"])
    keys = frozenset([key]) if key else frozenset()
    spec = SearchSpec(begin_ms=begin_ms, end_ms=end_ms)
    splits = plan_splits(segments, split_bytes)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    done: set[str] = set()
    wanted: set[str] = set(ids)
    scanned = nbytes = passes = 0
    torn: list[dict[str, Any]] = []
    codecs: set[str] = set()
    depth_of: dict[str, int] = {i: 0 for i in ids}
    for depth in range(follow + 1):
        todo = frozenset(wanted - done)
        if not todo and (depth > 0 or not keys):
            break
        stats, found, torn = run_splits(spark, splits, _TraceFn(spec, todo, keys if depth == 0 else frozenset()),
                                        progress=progress, job_group=job_group, description="broker_core trace")
        passes += 1
        codecs.update(codecs_of(stats))
        scanned += sum(s.scanned for s in stats.values())
        nbytes += sum(s.bytes for s in stats.values())
        done |= todo
        for r in found:
            rows[(r["segment"], r["pos"])] = r
        # ids found by key, and the ids of messages resent from a dead letter
        for r in found:
            if (r["topic"] != TRACE_TOPIC and r["uniq_key"] and r["uniq_key"] not in depth_of
                    and not is_trace_data(bytes(r["body"]))):
                origin = r["properties"].get(PROPERTY_ORIGIN_MESSAGE_ID)
                depth_of[r["uniq_key"]] = depth_of.get(origin, depth) + 1 if origin in depth_of else depth
                wanted.add(r["uniq_key"])
            if r["topic"] == TRACE_TOPIC:
                ev = _event(r)
                new = ev.get("extra", {}).get("newMsgId") if ev else None
                if ev and new and new not in depth_of:
                    depth_of[new] = depth_of.get(ev["msgId"], depth) + 1
                    wanted.add(new)
        if not (wanted - done):
            break
    records = sorted((r for r in rows.values() if r["topic"] != TRACE_TOPIC and not is_trace_data(bytes(r["body"]))),
                     key=lambda r: r["phy_offset"])
    # a client's trace message (keyed by the traced id) in a topic the broker traces, as the C++ 2.x client's
    # rmq_sys_TRACE_DATA_<region>, has the broker's own events too: they are not steps of the traced message
    trace_msgs = {r["uniq_key"] for r in rows.values() if r["topic"] != TRACE_TOPIC and is_trace_data(bytes(r["body"]))}
    events = [e for e in (_event(r) for r in rows.values() if r["topic"] == TRACE_TOPIC)
              if e and e.get("msgId") not in trace_msgs]
    events += pair_client_events([e for r in rows.values() for e in client_events(r, set(depth_of))])
    timeline = build_timeline(records, events, depth_of)
    result = TraceResult(msg_id, key, sorted(depth_of, key=lambda i: (depth_of[i], i)), records, events, timeline,
                         summarize_groups(timeline), scanned, nbytes, passes, torn, codecs=sorted(codecs))
    result.elapsed_s = round(time.perf_counter() - t0, 3)
    if output_dir:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "trace.json").write_text(json.dumps(result.to_dict(), indent=1, default=str))
        result.outputs = {"trace": str(out / "trace.json"),
                          "records": write_jsonl(records, out / "records.jsonl")}
        with open(out / "timeline.jsonl", "w", encoding="utf-8") as f:
            for step in timeline:
                f.write(json.dumps(step, default=str) + "\n")
        result.outputs["timeline"] = str(out / "timeline.jsonl")
    return result


def _event(row: dict[str, Any]) -> dict[str, Any] | None:
    if is_trace_data(bytes(row["body"])):
        return None  # a client's records: client_events()
    try:
        ev = json.loads(row["body"])
    except ValueError:
        return None
    if not isinstance(ev, dict) or "type" not in ev:
        return None
    ev["_coords"] = {"segment": row["segment"], "pos": row["pos"], "phy_offset": row["phy_offset"]}
    return ev


def _coords(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r[k] for k in ("segment", "pos", "phy_offset", "topic", "queue_id", "queue_offset", "offset_msg_id",
                              "store_size")}


def _record_steps(r: dict[str, Any], depth: int) -> list[dict[str, Any]]:
    topic, props = r["topic"], r["properties"]
    base = {"msgId": r["uniq_key"] or r["offset_msg_id"], "depth": depth, "source": "commitlog",
            "reconsumeTimes": r["reconsume_times"], "record": _coords(r), "costMs": 0, "group": "", "extra": {}}
    real = props.get("REAL_TOPIC", "")
    if topic == SCHEDULE_TOPIC and real.startswith(RETRY_PREFIX):  # sent back: waits its delay level first
        return [{**base, "type": "retry", "timestamp": r["store_timestamp"], "group": real[len(RETRY_PREFIX):],
                 "topic": props.get("RETRY_TOPIC", real),
                 "extra": {"delayLevel": int(props.get(PROPERTY_DELAY_TIME_LEVEL, 0) or 0)}}]
    if topic.startswith(RETRY_PREFIX):  # the delay is over: the copy consumers of the group pull
        return [{**base, "type": "delivered-after-delay", "timestamp": r["store_timestamp"],
                 "group": topic[len(RETRY_PREFIX):], "topic": props.get("RETRY_TOPIC", topic)}]
    if topic.startswith(DLQ_PREFIX):
        return [{**base, "type": "dead-lettered", "timestamp": r["store_timestamp"], "group": topic[len(DLQ_PREFIX):],
                 "topic": props.get(PROPERTY_DLQ_ORIGIN_TOPIC, topic),
                  "status": props.get(PROPERTY_DLQ_REASON, "")}]
    if topic == SCHEDULE_TOPIC:
        return [{**base, "type": "delayed", "timestamp": r["store_timestamp"], "topic": real}]
    steps = [{**base, "type": "stored", "timestamp": r["store_timestamp"], "topic": topic}]
    if r["reconsume_times"] == 0 and depth == 0:
        steps.insert(0, {**base, "type": "produced", "timestamp": r["born_timestamp"], "topic": topic,
                         "extra": {"bornHost": r["born_host"]}})
    return steps


def _match_group(type_: str, group: str) -> str:
    return group if type_ in ("retry", "dead-lettered") else ""


def build_timeline(records: list[dict[str, Any]], events: list[dict[str, Any]],
                   depth_of: dict[str, int]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    traced = {(e["msgId"], e["type"]) for e in events}
    by_kind: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        depth = depth_of.get(r["uniq_key"] or "", depth_of.get(r["offset_msg_id"], 0))
        for st in _record_steps(r, depth):
            if st["type"] == "produced" or (st["msgId"], st["type"]) not in traced:
                steps.append(st)
            else:
                by_kind.setdefault((st["msgId"], st["type"], _match_group(st["type"], st["group"])),
                                   []).append(st["record"])
    for e in events:
        mid = e["msgId"]
        step = {"type": e["type"], "timestamp": e["timestamp"], "msgId": mid, "depth": depth_of.get(mid, 0),
                "source": e.get("source", "trace"), "topic": e.get("topic", ""), "group": e.get("group", ""),
                "reconsumeTimes": e.get("reconsumeTimes", 0), "costMs": e.get("costMs", 0),
                "status": e.get("status", ""), "extra": e.get("extra", {}), "broker": e.get("broker", ""),
                "record": None, "event": e.get("_coords")}
        pool = by_kind.get((mid, e["type"], _match_group(e["type"], e.get("group", ""))))
        if pool:
            step["record"] = pool.pop(0)
        steps.append(step)
    steps.sort(key=lambda s: (s["timestamp"], s["depth"], _RANK.get(s["type"], len(_RANK))))
    # attempts, and how long each retry waited before the next delivery to its group
    attempts: dict[tuple[str, str], int] = {}
    pending_retry: dict[tuple[str, str], dict[str, Any]] = {}
    for s in steps:
        g = (s["msgId"], s["group"])
        if s["type"] == "delivered":
            attempts[g] = attempts.get(g, 0) + 1
            s["attempt"] = attempts[g]
            waiting = pending_retry.pop(g, None)
            if waiting is not None:
                waiting["delayMs"] = s["timestamp"] - waiting["timestamp"]
        elif s["type"] in ("consumed", "reconsume-later"):
            s["attempt"] = attempts.get(g, 0)
        elif s["type"] == "retry":
            pending_retry[g] = s
            s["delayLevel"] = s.get("extra", {}).get("delayLevel")
    return steps


def summarize_groups(timeline: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per consumer group, the asked message's deliveries, outcomes, retries, dead letter and resends (the
    resent copies' own steps are in the timeline with ``depth`` >= 1)."""
    out: dict[str, dict[str, Any]] = {}
    for s in timeline:
        if not s["group"] or s["depth"]:
            continue
        g = out.setdefault(s["group"], {"delivered": 0, "consumed": 0, "reconsumeLater": 0, "retries": [],
                                        "deadLettered": False, "deadLetteredAt": None, "resent": [],
                                        "clientConsumed": 0, "clientFailed": 0, "clientCostMs": []})
        t = s["type"]
        if t == "client-consumed":  # what the consumer's own trace says (Java/C++ clients with trace on)
            g["clientConsumed" if s["extra"].get("success") else "clientFailed"] += 1
            g["clientCostMs"].append(s["costMs"])
        elif t == "delivered":
            g["delivered"] += 1
        elif t == "consumed":
            g["consumed"] += 1
        elif t == "reconsume-later":
            g["reconsumeLater"] += 1
        elif t == "retry":
            g["retries"].append({"at": s["timestamp"], "delayLevel": s.get("delayLevel"),
                                 "delayMs": s.get("delayMs"), "reconsumeTimes": s["reconsumeTimes"]})
        elif t == "dead-lettered":
            g["deadLettered"] = True
            g["deadLetteredAt"] = s["timestamp"]
        elif t == "resent":
            g["resent"].append(s.get("extra", {}).get("newMsgId"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m spark_jobs.jobs.trace",
        description="Trace a message's lifecycle (produced, stored, delivered/consumed/retried per group, "
                    "dead-lettered, resent) from a broker segment snapshot. Spark settings come from SPARK_MASTER "
                    "(default local[*]) and SPARK_CONF_* (see spark_jobs/session.py).")
    ap.add_argument("--snapshot", required=True, action="append",
                    help="snapshot directory (holding manifest.json) or manifest file; repeat for several brokers "
                         "(a manifest with brokerAddr and readToken is read over the network where its files are "
                         "not visible)")
    ap.add_argument("--msg-id", help="unique key or offset message id")
    ap.add_argument("--key", help="a KEYS value")
    ap.add_argument("--begin-ms", type=int)
    ap.add_argument("--end-ms", type=int)
    ap.add_argument("--follow", type=int, default=3, help="resend links to follow")
    ap.add_argument("--out", required=True, help="output directory: trace.json, timeline.jsonl, records.jsonl")
    args = ap.parse_args(argv)
    if not args.msg_id and not args.key:
        ap.error("give --msg-id or --key")
    from spark_jobs.session import build_session

    spark = build_session("broker_core-trace")
    try:
        result = run_trace(spark, segments_of(args.snapshot), args.msg_id, args.key, args.begin_ms, args.end_ms,
                           output_dir=args.out, follow=args.follow)
    finally:
        spark.stop()
    print(json.dumps({"steps": len(result.timeline), "ids": result.ids, "outputs": result.outputs,
                      "codecs": result.codecs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
