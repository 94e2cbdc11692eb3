"""The send lane (``send_fast.make_lane``, ``_native.serve_send_v2``): one read holding one plain SEND_MESSAGE_V2
frame is answered in one C call, with the same response frame and the same stored record as the general path (the
lane switched off); everything unusual answers None before anything is stored, and the read takes the general way;
a lane that raises answers SYSTEM_ERROR and the message is never stored twice."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.codec.message import encode_properties
from broker_core.codec.native import NATIVE
from broker_core.codec.wire import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.command import FLAG_ONEWAY
from broker_core.remoting.server import _ServerProtocol
from broker_core.server.controller import BrokerController
from broker_core.server.state import PERM_READ, TopicConfig
from tests.conftest import small_config

pytestmark = pytest.mark.skipif(NATIVE is None, reason="the lane needs the C codec")


class _Transport:
    """A connection's transport that keeps what is written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.1.2.3", 40001) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def writelines(self, chunks: list[bytes]) -> None:
        self.written.append(b"".join(chunks))

    def close(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class _Counting:
    """Wraps the lane: counts the reads it answered."""

    def __init__(self, lane: Any) -> None:
        self.lane, self.answered = lane, 0

    def __call__(self, data: bytes, conn: Any) -> bytes | None:
        out = self.lane(data, conn)
        self.answered += out is not None
        return out


class _Broker:
    def __init__(self, tmp: Path, **config: Any) -> None:
        # 1 MiB segments: the default 1 GiB ones are allocated on disk, in every test's directory
        cfg = small_config(tmp, namesrv_addr="", ha_listen_port=0, grpc_listen_port=-1,
                           mapped_file_size_commit_log_bytes=1 << 20, **config)
        self.ctl = BrokerController(cfg)
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self.ctl.start("127.0.0.1", 0))
        for name in ("LaneT", "PlainT"):
            self.ctl.topics.upsert(TopicConfig(name, 4, 4))
        assert self.ctl.server is not None and self.ctl.server.lane is not None
        self.lane = _Counting(self.ctl.server.lane)
        self.ctl.server.lane = self.lane
        self.transport = _Transport()
        self.proto = _ServerProtocol(self.ctl.server)
        self.loop.run_until_complete(self._connect())

    async def _connect(self) -> None:
        self.proto.connection_made(self.transport)  # type: ignore[arg-type]  # the methods a connection uses

    def read(self, data: bytes, lane: bool = True) -> list[RemotingCommand]:
        """The answers to one read of ``data`` (on the broker's loop, as a read is served)."""
        server = self.ctl.server
        assert server is not None
        server.lane = self.lane if lane else None
        before = len(self.transport.written)

        async def serve() -> None:
            self.proto.data_received(data)
            await asyncio.sleep(0)

        self.loop.run_until_complete(serve())
        server.lane = self.lane
        return FrameDecoder().feed(b"".join(self.transport.written[before:]))

    def close(self) -> None:
        self.loop.run_until_complete(self.ctl.shutdown())
        self.loop.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[_Broker]:
    b = _Broker(tmp_path)
    try:
        yield b
    finally:
        b.close()


def _frame(topic: str, props: dict[str, str] | None = None, body: bytes = b"payload", opaque: int = 5,
           serialize_type: int = SERIALIZE_ROCKETMQ, flags: int = 0, **over: str) -> bytes:
    props = {"UNIQ_KEY": "AC11000100002A9F0000000000000001", "TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true",
             "custom": "ü"} if props is None else props
    h = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1700000000123", "h": "7",
         "i": encode_properties(props).decode(), "j": "0", "k": "false", "m": "false"}
    h.update(over)
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque, flags, h, body, serialize_type=serialize_type).encode()


def _record(ctl: BrokerController, topic: str, queue_id: int, offset: int) -> dict[str, Any]:
    assert ctl.store.dispatch()
    res = ctl.store.get_message(topic, queue_id, offset, 1)
    (rec,) = res.messages
    return {k: getattr(rec, k) for k in ("body", "queue_id", "flag", "sys_flag", "born_timestamp", "born_host",
                                         "reconsume_times", "properties", "store_host", "topic")}


def _warm(b: _Broker, topic: str) -> None:
    """The general path's first send on the connection: it remembers the born host and the topic's name check."""
    (resp,) = b.read(_frame(topic), lane=False)
    assert resp.code == ResponseCode.SUCCESS


def test_the_lane_answers_and_stores_as_the_general_path(broker: _Broker) -> None:
    b = broker
    _warm(b, "LaneT")
    _warm(b, "PlainT")
    put_count = b.ctl.stats.put_count
    bodies = [b"payload", b"\x00" * 1024, "ünïcode".encode()]
    for i, body in enumerate(bodies):
        (lane,) = b.read(_frame("LaneT", body=body, opaque=100 + i))
        (plain,) = b.read(_frame("PlainT", body=body, opaque=100 + i), lane=False)
        assert (lane.code, lane.remark, lane.flags, lane.opaque, lane.language, lane.version) == (
            plain.code, plain.remark, plain.flags, plain.opaque, plain.language, plain.version)
        assert lane.code == ResponseCode.SUCCESS and lane.opaque == 100 + i
        assert list(lane.header) == list(plain.header)  # same fields, same order
        for k in ("queueId", "queueOffset", "MSG_REGION", "TRACE_ON"):
            assert lane.header[k] == plain.header[k], k
        assert lane.header["msgId"][:16] == plain.header["msgId"][:16]  # same store host and port
    assert b.lane.answered == len(bodies)
    assert b.ctl.stats.put_count == put_count + 2 * len(bodies)
    for offset in range(1, 1 + len(bodies)):  # offset 0: the warm-up send
        lane_rec, plain_rec = _record(b.ctl, "LaneT", 2, offset), _record(b.ctl, "PlainT", 2, offset)
        assert {**lane_rec, "topic": "PlainT"} == plain_rec
    assert lane_rec["properties"]["CLUSTER"] == "DefaultCluster" and "WAIT" not in lane_rec["properties"]
    assert lane_rec["flag"] == 7 and lane_rec["born_host"] == "10.1.2.3:40001"


def test_a_new_connection_and_a_new_topic_start_the_general_way(broker: _Broker) -> None:
    b = broker
    (resp,) = b.read(_frame("LaneT"))  # born host not remembered yet
    assert resp.code == ResponseCode.SUCCESS and b.lane.answered == 0
    b.ctl.topics.upsert(TopicConfig("OtherT", 4, 4))
    (resp,) = b.read(_frame("OtherT"))  # name not checked yet
    assert resp.code == ResponseCode.SUCCESS and b.lane.answered == 0
    (resp,) = b.read(_frame("OtherT"))
    assert resp.code == ResponseCode.SUCCESS and b.lane.answered == 1


CASES = ["oneway", "json", "batch", "retry", "prepared", "prepared_flag", "unknown_topic", "queue_out_of_range",
         "bad_int", "no_queue", "delay", "two_frames", "part_frame", "read_only", "acl", "trace", "slave",
         "sync_master", "disk_full", "flush_failed", "lock_held", "too_big"]


@pytest.mark.parametrize("case", CASES)
def test_unusual_reads_take_the_general_way(broker: _Broker, case: str) -> None:
    """The lane answers None and stores nothing; the general path's answer is the one written."""
    b = broker
    _warm(b, "LaneT")
    ctl = b.ctl
    topic, kw, props = "LaneT", {}, None
    if case == "oneway":
        kw = {"flags": FLAG_ONEWAY}
    elif case == "json":
        kw = {"serialize_type": SERIALIZE_JSON}
    elif case == "batch":
        kw = {"m": "TRUE"}
    elif case == "retry":
        topic = "%RETRY%pg"
        ctl.topics.upsert(TopicConfig(topic, 1, 1))
        kw = {"e": "0"}
        assert b.read(_frame(topic, **kw), lane=False)[0].code == ResponseCode.SUCCESS  # the name is checked
    elif case == "prepared":
        props = {"UNIQ_KEY": "AC11000100002A9F0000000000000002", "TRAN_MSG": "true"}
    elif case == "prepared_flag":
        kw = {"f": "4"}
    elif case == "unknown_topic":
        topic = "NewTopic"
    elif case == "queue_out_of_range":
        kw = {"e": "9"}
    elif case == "bad_int":
        kw = {"h": "seven"}
    elif case == "no_queue":
        kw = {"e": ""}
    elif case == "delay":
        props = {"UNIQ_KEY": "AC11000100002A9F0000000000000003", "DELAY": "2"}
    elif case == "read_only":
        ctl.topics.upsert(TopicConfig("LaneT", 4, 4, PERM_READ))
    elif case == "acl":
        ctl.config.acl.acl_enable = True
    elif case == "trace":
        ctl.tracer.enabled = True
    elif case in ("slave", "sync_master"):
        ctl.config.broker_role = "SLAVE" if case == "slave" else "SYNC_MASTER"
    elif case == "disk_full":
        ctl.store.disk_guard.full = True
    elif case == "flush_failed":
        ctl.store.flush_failure.error = "EIO"
    elif case == "too_big":
        kw = {"body": b"x" * (ctl.store.max_message_size + 1)}
    frame = _frame(topic, props, **kw)
    if case == "two_frames":
        frame = frame + _frame(topic, props, opaque=6)
    elif case == "part_frame":
        frame = frame[:-1]
    end = ctl.store.commit_log.max_offset()
    lane = b.lane.lane
    conn = b.proto.conn
    if case == "lock_held":
        ctl.store.commit_log.put_lock.acquire()
        try:
            assert lane(frame, conn) is None
        finally:
            ctl.store.commit_log.put_lock.release()
    else:
        assert lane(frame, conn) is None
    assert ctl.store.commit_log.max_offset() == end  # nothing stored
    if case in ("acl", "read_only", "slave", "lock_held"):  # the general path's refusals, a lock no longer held
        return
    answers = b.read(frame)
    assert b.lane.answered == 0
    if case == "oneway":
        assert answers == [] and ctl.store.commit_log.max_offset() > end
    elif case == "part_frame":
        assert answers == []
    else:
        assert answers and all(a.opaque in (5, 6) for a in answers)


def test_a_failing_lane_answers_system_error_and_stores_once(broker: _Broker) -> None:
    b = broker
    _warm(b, "LaneT")

    class Stats:  # the lane's last step before answering: the put count
        @property
        def put_count(self) -> int:
            return 0

        @put_count.setter
        def put_count(self, value: int) -> None:
            raise RuntimeError("stats broke")

    real = b.lane.lane
    assert isinstance(real, functools.partial)
    ctx = real.args[0]
    b.lane.lane = functools.partial(real.func, (*ctx[:5], Stats(), *ctx[6:]))
    end = b.ctl.store.commit_log.max_offset()
    (resp,) = b.read(_frame("LaneT", opaque=41))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.opaque == 41
    assert "RuntimeError: stats broke" in resp.remark
    assert b.ctl.store.commit_log.max_offset() > end  # stored once: the general path did not run again
    assert b.ctl.store.dispatch()
    assert b.ctl.store.get_max_offset_in_queue("LaneT", 2) == 2


def test_the_lane_checks_its_context() -> None:
    assert NATIVE is not None
    with pytest.raises(TypeError, match="ctx a tuple"):
        NATIVE.serve_send_v2((), b"", None)


@pytest.mark.parametrize("m", ["False", "", "no"])
def test_a_batch_flag_other_than_true_is_a_plain_send(broker: _Broker, m: str) -> None:
    """single_v2's rule (``btext and btext.lower() == "true"``): anything else is one plain message, in the lane."""
    _warm(broker, "LaneT")
    (resp,) = broker.read(_frame("LaneT", m=m))
    assert resp.code == ResponseCode.SUCCESS and broker.lane.answered == 1
