"""The fault suite, against real broker processes (``python -m broker_core``) with tiny store files:

- SIGKILL loops during SYNC_FLUSH produce (4 KiB CommitLog segments, so rounds cross many segment rolls): no
  acknowledged message is lost, and none is duplicated in its ConsumeQueue;
- an injected fsync failure (``BROKER_CORE_FAULT_FSYNC_EIO_AFTER``, the store's test hook): the send that hit it
  and every later one are refused with an error the client sees, and nothing past it is counted as flushed;
- a corrupted record in a middle segment: the later segments are quarantined with a report, nothing deleted;
- a deleted and a corrupted IndexFile, and deleted ConsumeQueue files: rebuilt at start; key lookups and
  consumption over the wire are complete.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import AdminClient, PullConsumer
from broker_core.client.message import MessageQueue
from broker_core.codec.checkpoint import decode_checkpoint
from broker_core.codec.message import encode_properties
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.blocking import BlockingClient
from broker_core.store import GetStatus, MessageStore
from broker_core.store.durability import FAULT_ENV
from tests.conftest import ROOT, small_config
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "Faults"
SEG = 4096
CQ_FILE = 20 * 10
TINY = {"BROKER_CORE_MAPED_FILE_SIZE_COMMIT_LOG": str(SEG), "BROKER_CORE_MAPED_FILE_SIZE_CONSUME_QUEUE": str(CQ_FILE),
        "BROKER_CORE_MAX_INDEX_NUM": "100", "BROKER_CORE_MAX_HASH_SLOT_NUM": "32",
        "BROKER_CORE_FLUSH_INTERVAL_CONSUME_QUEUE": "50", "BROKER_CORE_REGISTER_NAME_SERVER_PERIOD": "1000"}


class Broker:
    """One broker process on a store directory; restartable, killable."""

    def __init__(self, store_dir: Path, env: dict[str, str], namesrv: str | None = None) -> None:
        self.store_dir, self.env, self.namesrv = store_dir, env, namesrv
        self.proc: subprocess.Popen[bytes] | None = None
        self.addr = ""
        self.log = store_dir.parent / "broker.log"

    def start(self, **extra_env: str) -> Broker:
        args = [sys.executable, "-m", "broker_core", "--store-dir", str(self.store_dir), "--listen", "127.0.0.1:0"]
        if self.namesrv:
            args += ["--namesrv", self.namesrv]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **TINY, **self.env, **extra_env}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        assert line.startswith("READY port="), (line, self.log.read_text()[-3000:])
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.addr = f"127.0.0.1:{line.strip().split('=', 1)[1]}"
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0, self.log.read_text()[-3000:]


def _send(client: BlockingClient, addr: str, n: int, queue_id: int, tag: str = "") -> RemotingCommand:
    props = encode_properties({"KEYS": f"key-{tag}{n}", "UNIQ_KEY": f"UNIQ{tag}{n:08d}", "WAIT": "true"}).decode()
    return client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, {
        "producerGroup": "faults", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": queue_id, "sysFlag": 0, "bornTimestamp": 0, "flag": 0, "properties": props, "reconsumeTimes": 0,
        "unitMode": "false"}, b"body-%s%08d-" % (tag.encode(), n) + b"x" * (n % 97)), timeout=10.0)


def _create_topic(addr: str, queues: int = 4) -> None:
    resp = BlockingClient().invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": TOPIC, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def _runtime(addr: str) -> dict[str, str]:
    from broker_core.codec.fastjson import loads_fastjson

    resp = BlockingClient().invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert resp.code == ResponseCode.SUCCESS
    return {str(k): str(v) for k, v in loads_fastjson(resp.body)["table"].items()}


def _open(store_dir: Path) -> MessageStore:
    cfg = small_config(store_dir, mapped_file_size_commit_log_bytes=SEG, mapped_file_size_consume_queue_bytes=CQ_FILE,
                       max_index_num=100, max_hash_slot_num=32)
    return MessageStore(cfg, background=False).start()


def _queue_bodies(store: MessageStore, qid: int) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        res = store.get_message(TOPIC, qid, offset, 32)
        if res.status is not GetStatus.FOUND:
            return out
        assert res.queue_offsets == list(range(offset, offset + len(res.queue_offsets)))
        out.extend(m.body.split(b"-x")[0].rstrip(b"x-") for m in res.messages)
        offset = res.next_begin_offset


def _body_id(n: int, tag: str = "") -> bytes:
    return b"body-%s%08d" % (tag.encode(), n)


# ---------------------------------------------------------------------------------------------- SIGKILL loop
def test_sigkill_loop_during_sync_flush_produce_loses_and_duplicates_nothing(tmp_path):
    broker = Broker(tmp_path / "store", {"BROKER_CORE_FLUSH_DISK_TYPE": "SYNC_FLUSH"})
    acked: dict[int, tuple[int, int]] = {}  # n -> (queue id, queue offset)
    lock = threading.Lock()
    counter = iter(range(10**9))
    rounds, per_round, senders = 6, 150, 4
    for rnd in range(rounds):
        broker.start()
        if rnd == 0:
            _create_topic(broker.addr)
        enough = threading.Event()

        def sender(addr: str, target: int, enough: threading.Event) -> None:
            client = BlockingClient()
            while True:
                with lock:
                    n = next(counter)
                try:
                    resp = _send(client, addr, n, n % 4)
                except (ConnectionError, TimeoutError, OSError):
                    return  # the broker is gone: this send's outcome is unknown (not acknowledged)
                if resp.code == ResponseCode.SUCCESS:
                    with lock:
                        acked[n] = (n % 4, int(resp.header["queueOffset"]))
                        if len(acked) >= target:
                            enough.set()

        threads = [threading.Thread(target=sender, args=(broker.addr, per_round * (rnd + 1), enough), daemon=True)
                   for _ in range(senders)]
        for t in threads:
            t.start()
        assert enough.wait(60), "senders made no progress"
        broker.kill()  # while the senders are mid-flight
        for t in threads:
            t.join(30)
        assert (broker.store_dir / "abort").exists()
    segments = len(list((broker.store_dir / "commitlog").iterdir()))
    assert segments >= rounds * 4, segments  # every round rolled several 4 KiB segments
    broker.start()  # one more abnormal recovery, by the broker itself, then a clean stop
    assert _runtime(broker.addr)["last_exit_ok"] == "false"
    broker.stop()
    store = _open(broker.store_dir)
    try:
        assert store.last_exit_ok
        by_queue = {qid: _queue_bodies(store, qid) for qid in range(4)}
        for qid, bodies in by_queue.items():
            assert len(bodies) == len(set(bodies)), f"a message twice in queue {qid}"
        for n, (qid, qoff) in acked.items():
            assert by_queue[qid][qoff] == _body_id(n), f"acknowledged message {n} lost or moved"
        for n in list(acked)[:: max(1, len(acked) // 40)]:
            assert [m.body[:13] for m in store.query_message(TOPIC, f"key-{n}").messages] == [_body_id(n)]
    finally:
        store.shutdown()


# ---------------------------------------------------------------------------------------------- fsync failure
def test_an_fsync_failure_refuses_writes_and_counts_nothing_as_flushed(tmp_path):
    broker = Broker(tmp_path / "store", {"BROKER_CORE_FLUSH_DISK_TYPE": "SYNC_FLUSH"})
    broker.start(**{FAULT_ENV: "25"})
    _create_topic(broker.addr, 1)
    client = BlockingClient()
    acked = []
    failed = None
    for n in range(200):
        resp = _send(client, broker.addr, n, 0)
        if resp.code != ResponseCode.SUCCESS:
            failed = (n, resp)
            break
        acked.append(n)
    assert failed is not None and len(acked) >= 10
    n_failed, resp = failed
    assert resp.code == ResponseCode.SYSTEM_ERROR, (resp.code, resp.remark)
    assert "fsync of the CommitLog failed" in resp.remark and "refuses writes" in resp.remark
    failed_phy = decode_offset_msg_id(resp.header["msgId"])[2]  # appended, not durable, not acknowledged
    for n in range(n_failed + 1, n_failed + 4):  # every later write is refused before anything is written
        later = _send(client, broker.addr, n, 0)
        assert later.code == ResponseCode.SYSTEM_ERROR and "fsync" in later.remark
        assert "msgId" not in later.header
    info = _runtime(broker.addr)
    assert "fsync of the CommitLog failed" in info["flush_failed"]
    assert int(info["commit_log_flushed_offset"]) <= failed_phy
    broker.stop()  # a clean stop after a failed flush keeps `abort` and leaves the checkpoint as it was
    assert (broker.store_dir / "abort").exists()
    physic_ts = decode_checkpoint((broker.store_dir / "checkpoint").read_bytes())[0]
    broker.start()  # without the fault: recovers as after a crash and takes writes again
    try:
        info = _runtime(broker.addr)
        assert info["last_exit_ok"] == "false" and info["flush_failed"] == ""
        assert _send(client, broker.addr, 10_000, 0).code == ResponseCode.SUCCESS
    finally:
        broker.stop()
    store = _open(broker.store_dir)
    try:
        failed_rec = store.look_message_by_offset(failed_phy)
        assert failed_rec is not None and failed_rec.body.startswith(_body_id(n_failed))
        assert physic_ts < failed_rec.store_timestamp or physic_ts <= _store_ts(store, acked[-1])
        bodies = _queue_bodies(store, 0)
        assert [b for b in bodies if b in {_body_id(n) for n in acked}] == [_body_id(n) for n in acked]
    finally:
        store.shutdown()


def _store_ts(store: MessageStore, n: int) -> int:
    (rec,) = store.query_message(TOPIC, f"key-{n}").messages
    return rec.store_timestamp


# ---------------------------------------------------------------------------------------------- quarantine
def test_a_corrupt_middle_record_quarantines_the_later_segments_with_a_report(tmp_path):
    broker = Broker(tmp_path / "store", {})
    broker.start()
    _create_topic(broker.addr)
    client = BlockingClient()
    phys = {}
    for n in range(200):
        resp = _send(client, broker.addr, n, n % 4)
        assert resp.code == ResponseCode.SUCCESS
        phys[n] = decode_offset_msg_id(resp.header["msgId"])[2]
    broker.stop()
    segs = sorted((broker.store_dir / "commitlog").iterdir())
    assert len(segs) >= 8
    victim_seg = segs[-3]  # a middle segment, inside the range a clean restart verifies
    start = int(victim_seg.name)
    victim = sorted(n for n, p in phys.items() if start <= p < start + SEG)[1]
    with open(victim_seg, "r+b") as fh:
        fh.seek(phys[victim] - start + 100)  # inside the body: the CRC no longer matches
        fh.write(b"\x00\xff\x00\xff")
    later = {p.name: p.read_bytes() for p in segs[-2:]}
    broker.start()
    try:
        info = _runtime(broker.addr)
        folder = Path(info["quarantined"])
        assert folder.parent == broker.store_dir / "quarantine"
        report = (folder / "REPORT.txt").read_text()
        assert f"offset {phys[victim]}" in report and "Nothing was deleted" in report
        for name, raw in later.items():
            assert (folder / name).read_bytes() == raw
            assert not (broker.store_dir / "commitlog" / name).exists()
        assert (folder / victim_seg.name).exists()
        assert "CommitLog damaged" in broker.log.read_text()  # the ERROR line
        assert int(info["commit_log_max_offset"]) == phys[victim]
        resp = _send(client, broker.addr, 1000, 0)
        assert resp.code == ResponseCode.SUCCESS
        assert decode_offset_msg_id(resp.header["msgId"])[2] == phys[victim]
    finally:
        broker.stop()


# ---------------------------------------------------------------------------------------------- derived files
@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.close()


def test_deleted_and_corrupt_index_and_consume_queue_files_are_rebuilt(tmp_path, cluster):
    broker = Broker(tmp_path / "store", {}, cluster.namesrv)
    broker.start()
    _create_topic(broker.addr)
    client = BlockingClient()
    total = 160
    for n in range(total):
        assert _send(client, broker.addr, n, n % 4).code == ResponseCode.SUCCESS
    broker.stop()
    index = sorted((broker.store_dir / "index").iterdir())
    assert len(index) >= 4
    index[-1].unlink()  # the newest IndexFile deleted
    raw = bytearray(index[1].read_bytes())
    raw[:40] = b"\xff" * 40  # another one's header corrupted
    index[1].write_bytes(bytes(raw))
    cq = broker.store_dir / "consumequeue" / TOPIC
    q0, q1 = sorted((cq / "0").iterdir()), sorted((cq / "1").iterdir())
    assert len(q0) >= 3 and len(q1) >= 3
    q0[1].unlink()  # a middle ConsumeQueue file
    q1[-1].unlink()  # the last one of another queue
    broker.start()
    try:
        with AdminClient(cluster.namesrv) as admin:
            wait_until(lambda: bool(admin.topic_route(TOPIC).get("brokerDatas")), timeout=30, what="the route")
            for n in range(total):
                found, _ = admin.query_message(TOPIC, f"key-{n}")
                assert [m.body[:13] for m in found] == [_body_id(n)], n
        consumer = PullConsumer("faults-check", cluster.namesrv).start()
        try:
            name = _runtime(broker.addr)["brokerName"]
            for qid in range(4):
                mq = MessageQueue(TOPIC, name, qid)
                got, offset = [], 0
                while True:
                    res = consumer.pull(mq, offset, 32)
                    if not res.messages:
                        break
                    got.extend(m.body[:13] for m in res.messages)
                    offset = res.next_begin_offset
                assert got == [_body_id(n) for n in range(qid, total, 4)], qid
        finally:
            consumer.shutdown()
        assert "rebuilding" in broker.log.read_text()
    finally:
        broker.stop()
