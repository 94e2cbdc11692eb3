"""The broker's fast path for one plain SEND_MESSAGE_V2 (``produce.single_v2``) stores the same record and answers
the same response as the general path (the same message sent as SEND_MESSAGE with V1 names, which never takes the
fast path); anything unusual goes the general way (JSON headers, a batch flag, a retry topic, a prepared
transaction, an unknown topic, a queue out of range, a malformed field), with the general path's answer."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.codec.message import encode_properties
from broker_core.codec.wire import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.headers import V2_TO_V1
from broker_core.remoting.server import Connection
from broker_core.server.controller import BrokerController
from broker_core.server.state import TopicConfig
from tests.conftest import small_config


class _Transport:
    """What a Connection reads of its transport (handlers here are called directly; nothing is written)."""

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.1.2.3", 40001) if name == "peername" else default


LOOPS: dict[BrokerController, asyncio.AbstractEventLoop] = {}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[BrokerController, Connection, _Transport]]:
    # ha_listen_port 0: any free port (listenPort + 1 may be taken); 1 MiB segments, not 1 GiB ones allocated on disk
    cfg = small_config(tmp_path, namesrv_addr="", ha_listen_port=0, grpc_listen_port=-1,
                       mapped_file_size_commit_log_bytes=1 << 20)
    ctl = BrokerController(cfg)
    loop = asyncio.new_event_loop()
    LOOPS[ctl] = loop
    loop.run_until_complete(ctl.start("127.0.0.1", 0))
    ctl.topics.upsert(TopicConfig("FastT", 4, 4))
    ctl.topics.upsert(TopicConfig("SlowT", 4, 4))
    transport = _Transport()
    conn = Connection(transport)  # type: ignore[arg-type]  # the methods a connection uses
    try:
        yield ctl, conn, transport
    finally:
        loop.run_until_complete(ctl.shutdown())
        loop.close()
        del LOOPS[ctl]


def _v2(topic: str, props: dict[str, str], **over: str) -> dict[str, str]:
    h = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1700000000123", "h": "7",
         "i": encode_properties(props).decode(), "j": "0", "k": "false", "m": "false"}
    h.update(over)
    return h


def _send(ctl: BrokerController, conn: Connection, code: int, header: dict[str, str], body: bytes,
          serialize_type: int = SERIALIZE_ROCKETMQ) -> tuple[RemotingCommand, Any]:
    """The handler's answer to the request as it arrives (decoded from its frame), and that answer decoded from
    the frame the connection would write."""
    cmd = RemotingCommand(code, 77, 0, dict(header), body, serialize_type=serialize_type)
    assert ctl.server is not None
    handler = ctl.server.handlers[code]

    async def call() -> Any:  # on the broker's loop, as a request is served
        raw = handler(FrameDecoder().feed(cmd.encode())[0], conn)
        return await raw if inspect.isawaitable(raw) else raw

    raw = LOOPS[ctl].run_until_complete(call())
    (resp,) = FrameDecoder().feed(raw if type(raw) is bytes else raw.encode())
    return resp, raw


def _record(ctl: BrokerController, topic: str, queue_id: int, offset: int) -> dict[str, Any]:
    assert ctl.store.dispatch()
    res = ctl.store.get_message(topic, queue_id, offset, 1)
    (rec,) = res.messages
    out = {k: getattr(rec, k) for k in ("body", "queue_id", "flag", "sys_flag", "born_timestamp", "born_host",
                                         "reconsume_times", "properties", "store_host")}
    return out


def test_fast_and_general_paths_store_and_answer_alike(broker: Any) -> None:
    ctl, conn, _ = broker
    props = {"UNIQ_KEY": "AC11000100002A9F0000000000000001", "TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true",
             "custom": "ü"}
    fast_h = _v2("FastT", props)
    slow_h = {V2_TO_V1[k]: v for k, v in _v2("SlowT", props).items()}
    for _ in range(3):  # queue offsets move on alike
        fast, fast_raw = _send(ctl, conn, RequestCode.SEND_MESSAGE_V2, fast_h, b"payload")
        slow, _ = _send(ctl, conn, RequestCode.SEND_MESSAGE, slow_h, b"payload")
        assert type(fast_raw) is bytes  # the fast path answered (encoded at once)
        assert (fast.code, fast.remark, fast.flags, fast.opaque, fast.language, fast.version) == (
            slow.code, slow.remark, slow.flags, slow.opaque, slow.language, slow.version)
        assert fast.code == ResponseCode.SUCCESS
        assert list(fast.header) == list(slow.header)  # same fields, same order
        for k in ("queueId", "queueOffset", "MSG_REGION", "TRACE_ON"):
            assert fast.header[k] == slow.header[k], k
        assert len(fast.header["msgId"]) == 32 and fast.header["msgId"] != slow.header["msgId"]
    for offset in range(3):  # the two queues hold the same records
        f, s = _record(ctl, "FastT", 2, offset), _record(ctl, "SlowT", 2, offset)
        assert f == s
    assert f["properties"]["CLUSTER"] == "DefaultCluster" and "WAIT" not in f["properties"]
    assert f["flag"] == 7 and f["born_host"] == "10.1.2.3:40001"


@pytest.mark.parametrize("case", ["json", "batch", "retry", "prepared", "prepared_flag", "unknown_topic",
                                  "queue_out_of_range", "bad_int", "no_queue"])
def test_unusual_sends_take_the_general_path(broker: Any, case: str) -> None:
    ctl, conn, _ = broker
    props = {"UNIQ_KEY": "AC11000100002A9F0000000000000002"}
    over: dict[str, str] = {}
    topic, st, body = "FastT", SERIALIZE_ROCKETMQ, b"x"
    if case == "json":
        st = SERIALIZE_JSON
    elif case == "batch":
        over = {"m": "true"}
    elif case == "retry":
        topic = "%RETRY%pg"
        ctl.topics.upsert(TopicConfig(topic, 1, 1))
        over = {"e": "0"}
    elif case == "prepared":
        props["TRAN_MSG"] = "true"
    elif case == "prepared_flag":
        over = {"f": "4"}
    elif case == "unknown_topic":
        topic = "NewTopic"
    elif case == "queue_out_of_range":
        over = {"e": "9"}
    elif case == "bad_int":
        over = {"h": "seven"}
    elif case == "no_queue":
        over = {"e": "-1"}
    header = _v2(topic, props, **over)
    resp, raw = _send(ctl, conn, RequestCode.SEND_MESSAGE_V2, header, body, st)
    assert type(raw) is not bytes  # the general path answered
    # and it answered what the general path answers for the same request under V1 names
    slow, _ = _send(ctl, conn, RequestCode.SEND_MESSAGE, {V2_TO_V1[k]: v for k, v in header.items()},
                    body, st)
    assert resp.code == slow.code
    if case in ("bad_int", "batch"):  # b"x" is no batch body
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert ("'flag'" if case == "bad_int" else "truncated batch entry") in resp.remark
    elif case == "queue_out_of_range":
        assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId[9]" in resp.remark
    else:
        assert resp.code == ResponseCode.SUCCESS, resp.remark
