"""Segment reads over the network (READ_SNAPSHOT_SEGMENT, ``spark_jobs.remote``) against a real broker process:
the networked source gives exactly the rows of the local-file source, never reads past a snapshot's bound, keeps
reading while retention deletes the segments, and is refused for a wrong token or a released snapshot; with ACL
on, an unsigned reader holding the snapshot's token is served while the admin operations still need a signature.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, Message, Producer
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from spark_jobs import split_io
from spark_jobs.jobs.search import run_search
from spark_jobs.remote import Remote, RemoteReadError, RemoteWindow, _connection
from spark_jobs.runner import InProcess
from spark_jobs.segments import segments_from_manifest
from spark_jobs.sources import read_split
from spark_jobs.transforms.filters import SearchSpec
from tests.integration.acl_cluster import AclCluster, call
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration

# 64 KiB segments, and retention by the admin operation alone: every hour a deleteWhen hour, nothing reserved
RETENTION = ("mapedFileSizeCommitLog=65536\ncleanResourceInterval=0\nfileReservedTime=0\n"
             "deleteCommitLogFilesInterval=0\ndeleteWhen=" + ";".join(f"{h:02d}" for h in range(24)) + "\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("spark-remote"))
    try:
        c.add_brokers_registered({"broker-n": RETENTION})
        yield c
    finally:
        c.close()


def _networked(manifest: dict[str, Any], addr: str) -> dict[str, Any]:
    return {**manifest, "brokerAddr": addr, "preferLocal": False}


def _fill(admin: AdminClient, producer: Producer, topic: str, n: int) -> list[str]:
    admin.create_topic(topic, 2, 2)
    return [producer.send(Message(topic, (f"{topic}-{i}:" + "z" * 700).encode(), keys=f"k{i}")).offset_msg_id
            for i in range(n)]


def test_networked_reads_give_the_local_rows_and_stop_at_the_bound(spark: Any, cluster: Cluster,
                                                                   admin: AdminClient, producer: Producer) -> None:
    ids = _fill(admin, producer, "Net", 400)  # ~300 KiB: several 64 KiB segments
    addr = cluster.brokers["broker-n"].addr
    manifest = admin.snapshot_segments(addr)
    try:
        assert len(manifest["segments"]) >= 4 and manifest["readToken"]
        for _ in range(30):  # written after the snapshot, into the active segment's inode: never to be read
            producer.send(Message("Net", b"after the snapshot", keys="after"))
        spec = SearchSpec(topics=["Net"], body_contains="Net-")
        local = run_search(spark, manifest, spec, split_bytes=20_000)
        networked = run_search(spark, _networked(manifest, addr), spec, split_bytes=20_000)
        in_worker = run_search(InProcess(), _networked(manifest, addr), spec, split_bytes=20_000)
        tail, split_io.TAIL_BYTES = split_io.TAIL_BYTES, 0  # windows end at the split: widened
        try:
            widened = run_search(InProcess(), _networked(manifest, addr), spec, split_bytes=20_000)
        finally:
            split_io.TAIL_BYTES = tail
        assert sorted(r["offset_msg_id"] for r in local.rows) == sorted(ids)
        for res in (networked, in_worker, widened):
            assert [(r["segment"], r["pos"], r["body"]) for r in res.rows] == [
                (r["segment"], r["pos"], r["body"]) for r in local.rows]
            assert (res.scanned, res.bytes_scanned, res.torn) == (local.scanned, local.bytes_scanned, local.torn)
            assert res.splits == local.splits > len(manifest["segments"])  # mid-segment splits synced, no re-read
        # the active segment, whole: what the broker sends ends at the bound although the file has grown
        active = manifest["segments"][-1]
        remote = Remote(addr, manifest["snapshotId"], manifest["readToken"], prefer_local=False)
        win = RemoteWindow(remote, active["fileName"], active["bound"], 0, active["bound"] + 1_000_000)
        try:
            assert win.hi == active["bound"]
            assert bytes(win.buf[:win.hi]) == Path(active["path"]).read_bytes()[:active["bound"]]
        finally:
            win.close()
        on_disk = Path(active["path"]).read_bytes()
        assert any(on_disk[active["bound"]:])  # the messages sent after the snapshot are in the linked inode
        conn = _connection(addr)  # asked for 100 bytes from 10 before the bound, the broker answers 10
        tail = memoryview(bytearray(10))
        conn.receive({conn.send(remote, active["fileName"], active["bound"] - 10, 100): tail})
        assert bytes(tail) == on_disk[active["bound"] - 10:active["bound"]]
    finally:
        admin.release_snapshot(addr, manifest["snapshotId"])


def test_retention_deleting_the_segments_mid_read_does_not_break_the_networked_read(
        cluster: Cluster, admin: AdminClient, producer: Producer) -> None:
    ids = _fill(admin, producer, "NetRetention", 300)
    addr = cluster.brokers["broker-n"].addr
    store = cluster.brokers["broker-n"].store_dir / "commitlog"
    manifest = admin.snapshot_segments(addr)
    try:
        segments = segments_from_manifest(_networked(manifest, addr))
        sealed = [s for s in manifest["segments"] if s["sealed"]]
        assert len(sealed) >= 3
        first_rows = read_split(_split_of(segments[0]))[1]  # one segment read, then retention runs
        producer.send(Message("NetRetention", b"x" * 70_000))  # rolls the active segment: all earlier ones expire
        deleted = admin.clean_expired_files(addr, force=True)
        assert deleted and not any((store / s["fileName"]).exists() for s in sealed), deleted
        rows = first_rows + [r for seg in segments[1:] for r in read_split(_split_of(seg))[1]]
        assert sorted(r["offset_msg_id"] for r in rows if r["topic"] == "NetRetention") == sorted(ids)
    finally:
        admin.release_snapshot(addr, manifest["snapshotId"])


def _split_of(seg: Any) -> Any:
    from spark_jobs.segments import Split

    return Split(0, seg.path, seg.file_from_offset, 0, seg.bound, seg.bound, seg.remote)


def test_a_wrong_token_and_a_released_snapshot_are_refused(cluster: Cluster, admin: AdminClient,
                                                           producer: Producer) -> None:
    _fill(admin, producer, "NetRefused", 20)
    addr = cluster.brokers["broker-n"].addr
    manifest = admin.snapshot_segments(addr)
    seg = manifest["segments"][-1]
    forged = Remote(addr, manifest["snapshotId"], "0" * 32, prefer_local=False)
    with pytest.raises(RemoteReadError, match="answered 16"):  # NO_PERMISSION
        RemoteWindow(forged, seg["fileName"], seg["bound"], 0, 100)
    good = Remote(addr, manifest["snapshotId"], manifest["readToken"], prefer_local=False)
    RemoteWindow(good, seg["fileName"], seg["bound"], 0, 100).close()
    assert admin.release_snapshot(addr, manifest["snapshotId"]) is True
    with pytest.raises(RemoteReadError, match="released or expired"):
        RemoteWindow(good, seg["fileName"], seg["bound"], 0, 100)


def test_a_connection_the_broker_closed_as_idle_is_replaced(tmp_path: Path) -> None:
    """Readers keep their connection between reads (a Celery worker's jobs, an executor's tasks); the broker
    closes one left idle past serverChannelMaxIdleTimeSeconds, and the next read asks again on a new one."""
    c = Cluster(tmp_path)
    try:
        c.add_brokers_registered({"broker-idle": "serverChannelMaxIdleTimeSeconds=1\n"})
        addr = c.brokers["broker-idle"].addr
        with AdminClient(c.namesrv) as admin, Producer("idle-remote-pg", c.namesrv) as producer:
            _fill(admin, producer, "NetIdle", 20)
            manifest = admin.snapshot_segments(addr)
        seg = manifest["segments"][-1]
        remote = Remote(addr, manifest["snapshotId"], manifest["readToken"], prefer_local=False)
        on_disk = Path(seg["path"]).read_bytes()[:seg["bound"]]
        assert _read_whole(remote, seg) == on_disk
        conn = _connection(addr)
        wait_until(lambda: _closed_by_peer(conn.sock), timeout=60, what="the broker to close the idle connection")
        assert _read_whole(remote, seg) == on_disk
        assert _connection(addr) is not conn
    finally:
        c.close()


def _read_whole(remote: Remote, seg: dict[str, Any]) -> bytes:
    win = RemoteWindow(remote, seg["fileName"], seg["bound"], 0, seg["bound"])
    try:
        return bytes(win.buf[:win.hi])
    finally:
        win.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""


ADMIN = SessionCredentials("remote-admin", "admin-secret")
ACL = """
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: remote-admin
    secretKey: admin-secret
    admin: true
"""


def test_with_acl_an_unsigned_reader_needs_only_the_snapshots_token(tmp_path: Path) -> None:
    """Executors hold no account secret: the admin's signed snapshot hands out the token, the reads carry it."""
    c = AclCluster(tmp_path, ACL)
    try:
        addr = c.broker.addr
        with AdminClient(c.namesrv, credentials=ADMIN) as admin, \
                Producer("acl-remote-pg", c.namesrv, credentials=ADMIN) as producer:
            ids = _fill(admin, producer, "AclNet", 50)
            unsigned = call(addr, RequestCode.SNAPSHOT_SEGMENTS, {})
            assert unsigned.code == ResponseCode.NO_PERMISSION  # the snapshot itself needs the admin's signature
            manifest = admin.snapshot_segments(addr)
            try:
                res = run_search(InProcess(), _networked(manifest, addr), SearchSpec(topics=["AclNet"]))
                assert sorted(r["offset_msg_id"] for r in res.rows) == sorted(ids)
                seg = manifest["segments"][0]
                forged = Remote(addr, manifest["snapshotId"], "f" * 32, prefer_local=False)
                with pytest.raises(RemoteReadError, match="answered 16"):
                    RemoteWindow(forged, seg["fileName"], seg["bound"], 0, 100)
            finally:
                admin.release_snapshot(addr, manifest["snapshotId"])
    finally:
        c.close()
