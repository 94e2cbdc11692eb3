"""A store directory exactly as Apache RocketMQ 4.9 leaves it after a clean shutdown, written from the
reference (``rocketmq-remoting.md`` §6, §7) with ``struct`` and ``zlib`` only. It deliberately shares no code
with ``broker_core`` (not the codec, not the hash, not the JSON writer), so a test that serves it checks our
store against the format rather than against itself.

Files written (RocketMQ's defaults unless the caller passes smaller sizes, as a ``broker.conf`` may):

- ``commitlog/<20-digit offset>``: records of §7.1 (IPv4 hosts, BODYCRC = crc32 & 0x7FFFFFFF), sparse to
  the segment size.
- ``consumequeue/<topic>/<queueId>/<20-digit>``: 20-byte units (offset i64, size i32, tagsCode i64).
- ``index/<yyyyMMddHHmmssSSS>``: header, slots and entries of §7.3 with ``abs(String.hashCode)``.
- ``checkpoint`` (§7.4), ``lock``, and ``config/*.json`` in fastjson's pretty form (tabs, bare integer keys).
"""

from __future__ import annotations

import datetime as dt
import socket
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = 0xDAA320A7 - (1 << 32)  # -626843481 as Java's int
COMMITLOG_SIZE = 1024 * 1024 * 1024
CQ_SIZE = 300_000 * 20
HASH_SLOTS = 5_000_000
INDEX_NUM = 20_000_000


def java_hash(s: str) -> int:
    """``String.hashCode()``, one UTF-16 unit at a time as Java does it."""
    units = struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be"))
    h = 0
    for u in units:
        h = (31 * h + u) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def props_text(props: dict[str, str]) -> bytes:
    """``MessageDecoder.messageProperties2String``: ``name\\x01value\\x02`` for each property."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode("utf-8")


@dataclass
class Msg:
    topic: str
    queue_id: int
    body: bytes
    tags: str = ""
    keys: str = ""
    uniq: str = ""
    user: dict[str, str] = field(default_factory=dict)
    born_ms: int = 1_700_000_000_000
    store_ms: int = 1_700_000_000_005
    # filled in by the writer
    queue_offset: int = 0
    phy: int = 0
    size: int = 0

    def props(self) -> dict[str, str]:
        p: dict[str, str] = {}
        if self.keys:
            p["KEYS"] = self.keys
        if self.tags:
            p["TAGS"] = self.tags
        p.update(self.user)
        if self.uniq:
            p["UNIQ_KEY"] = self.uniq
        p["WAIT"] = "true"
        return p


def record(m: Msg, store_ip: str, store_port: int) -> bytes:
    """One CommitLog record (§7.1) for an IPv4 store host."""
    topic = m.topic.encode("utf-8")
    props = props_text(m.props())
    total = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + len(m.body) + 1 + len(topic) + 2 \
        + len(props)
    assert total == 91 + len(m.body) + len(topic) + len(props)
    born_host = socket.inet_aton("10.0.0.5") + struct.pack(">i", 53211)
    store_host = socket.inet_aton(store_ip) + struct.pack(">i", store_port)
    out = struct.pack(">iiiiiqqiq", total, MAGIC, zlib.crc32(m.body) & 0x7FFFFFFF, m.queue_id, 0,
                      m.queue_offset, m.phy, 0, m.born_ms)
    out += born_host + struct.pack(">q", m.store_ms) + store_host
    out += struct.pack(">iqi", 0, 0, len(m.body)) + m.body
    out += struct.pack(">b", len(topic)) + topic + struct.pack(">h", len(props)) + props
    assert len(out) == total
    return out


def offset_msg_id(store_ip: str, store_port: int, phy: int) -> str:
    """§6.1: store host ip (4) + port (4) + physical offset (8), upper-case hex."""
    return (socket.inet_aton(store_ip) + struct.pack(">iq", store_port, phy)).hex().upper()


def _sparse(path: Path, data: bytes, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
        fh.truncate(size)


def _index_file(msgs: list[Msg], slots: int, index_num: int) -> bytes:
    begin_ts, begin_phy = msgs[0].store_ms, msgs[0].phy
    slot_table = [0] * slots
    entries: list[bytes] = []
    used = 0
    count = 1
    for m in msgs:
        keys = [m.uniq] + [k for k in m.keys.split(" ") if k]
        for k in keys:
            h = abs(java_hash(f"{m.topic}#{k}"))
            if h < 0 or h == 1 << 31:
                h = 0
            slot = h % slots
            prev = slot_table[slot]
            if prev == 0:
                used += 1
            entries.append(struct.pack(">iqii", h, m.phy, (m.store_ms - begin_ts) // 1000, prev))
            slot_table[slot] = count
            count += 1
    assert count < index_num
    header = struct.pack(">qqqqii", begin_ts, msgs[-1].store_ms, begin_phy, msgs[-1].phy, used, count)
    body = struct.pack(f">{slots}i", *slot_table)
    return header + body + b"\0" * 20 + b"".join(entries)  # entry 0 is never used


TOPICS_JSON = """{
\t"dataVersion":{
\t\t"counter":%(counter)d,
\t\t"timestamp":1700000000000
\t},
\t"topicConfigTable":{%(topics)s
\t}
}"""


def write_store(root: Path, msgs: list[Msg], *, store_ip: str, store_port: int,
                queues: dict[str, int], offsets: dict[str, dict[int, int]],
                commitlog_size: int = COMMITLOG_SIZE, cq_size: int = CQ_SIZE,
                hash_slots: int = HASH_SLOTS, index_num: int = INDEX_NUM) -> list[Msg]:
    """Write ``msgs`` in order as RocketMQ 4.9 would have; returns them with offsets filled in.
    ``queues``: topic -> queue count (topics.json); ``offsets``: ``topic@group`` -> queueId -> offset."""
    log = bytearray()
    next_qoff: dict[tuple[str, int], int] = {}
    for m in msgs:
        m.queue_offset = next_qoff.get((m.topic, m.queue_id), 0)
        next_qoff[(m.topic, m.queue_id)] = m.queue_offset + 1
        m.phy = len(log)
        raw = record(m, store_ip, store_port)
        m.size = len(raw)
        log += raw
    assert len(log) + 8 <= commitlog_size
    _sparse(root / "commitlog" / f"{0:020d}", bytes(log), commitlog_size)
    units: dict[tuple[str, int], bytearray] = {}
    for m in msgs:
        tags_code = java_hash(m.tags) if m.tags else 0
        units.setdefault((m.topic, m.queue_id), bytearray()).extend(struct.pack(">qiq", m.phy, m.size, tags_code))
    for (topic, qid), data in units.items():
        _sparse(root / "consumequeue" / topic / str(qid) / f"{0:020d}", bytes(data), cq_size)
    last_ms = msgs[-1].store_ms
    name = dt.datetime.fromtimestamp(msgs[0].store_ms / 1000).strftime("%Y%m%d%H%M%S") + \
        f"{msgs[0].store_ms % 1000:03d}"
    _sparse(root / "index" / name, _index_file(msgs, hash_slots, index_num), 40 + hash_slots * 4 + index_num * 20)
    with open(root / "checkpoint", "wb") as fh:
        fh.write(struct.pack(">qqq", last_ms, last_ms, last_ms).ljust(4096, b"\0"))
    (root / "lock").write_bytes(b"")
    cfg = root / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    topic_entries = ",".join(
        f'\n\t\t"{t}":{{\n\t\t\t"order":false,\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":{n},\n'
        f'\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"{t}",\n\t\t\t"topicSysFlag":0,\n'
        f'\t\t\t"writeQueueNums":{n}\n\t\t}}' for t, n in queues.items())
    (cfg / "topics.json").write_text(TOPICS_JSON % {"counter": len(queues), "topics": topic_entries})
    (cfg / "topics.json.bak").write_text(TOPICS_JSON % {"counter": 0, "topics": ""})
    offset_entries = ",".join(
        f'\n\t\t"{k}":{{' + ",".join(f"{q}:{o}" for q, o in v.items()) + "\n\t\t}" for k, v in offsets.items())
    (cfg / "consumerOffset.json").write_text('{\n\t"offsetTable":{' + offset_entries + "\n\t}\n}")
    groups = sorted({k.split("@", 1)[1] for k in offsets})
    group_entries = ",".join(
        f'\n\t\t"{g}":{{\n\t\t\t"brokerId":0,\n\t\t\t"consumeBroadcastEnable":true,\n\t\t\t"consumeEnable":true,\n'
        f'\t\t\t"consumeFromMinEnable":true,\n\t\t\t"groupName":"{g}",\n'
        f'\t\t\t"notifyConsumerIdsChangedEnable":true,\n\t\t\t"retryMaxTimes":16,\n\t\t\t"retryQueueNums":1,\n'
        f'\t\t\t"whichBrokerWhenConsumeSlowly":1\n\t\t}}' for g in groups)
    (cfg / "subscriptionGroup.json").write_text(
        '{\n\t"dataVersion":{\n\t\t"counter":1,\n\t\t"timestamp":1700000000000\n\t},\n'
        '\t"subscriptionGroupTable":{' + group_entries + "\n\t}\n}")
    (cfg / "delayOffset.json").write_text('{\n\t"offsetTable":{1:0,2:0\n\t}\n}')
    (cfg / "consumerFilter.json").write_text('{\n\t"filterDataByTopic":{}\n}')
    return msgs
