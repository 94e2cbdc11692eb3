"""broker_core.grpc.convert: a RocketMQ 5 message's fields land in the record's properties the 4.x way, and a
stored record comes back as the protobuf message the official client checks (encoding, digest, attempt)."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from broker_core.codec.message import COMPRESSED_FLAG, MessageRecord
from broker_core.grpc import convert
from broker_core.grpc.stubs import pb


def _record(props: dict[str, str], body: bytes = b"hello", sys_flag: int = 0) -> MessageRecord:
    return MessageRecord(store_size=0, body_crc=0, queue_id=2, flag=0, queue_offset=7, commit_log_offset=100,
                         sys_flag=sys_flag, born_timestamp=1_700_000_000_123, born_host="10.0.0.1:5000",
                         store_timestamp=1_700_000_000_456, store_host="127.0.0.1:10911", reconsume_times=1,
                         prepared_transaction_offset=0, body=body, topic="T", properties=props)


def test_send_fields_become_4x_properties() -> None:
    msg = pb.Message(topic=pb.Resource(name="T"), body=b"x", user_properties={"color": "red"})
    sp = msg.system_properties
    sp.tag, sp.message_id, sp.message_group = "TagA", "01ABC", "order-1"
    sp.keys.extend(["k1", "k2"])
    convert.set_millis(sp.delivery_timestamp, 1_700_000_005_250)
    props = convert.record_properties(msg)
    assert props == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01ABC",
                     "__SHARDINGKEY": "order-1", "TIMER_DELIVER_MS": "1700000005250"}
    clash = pb.Message(topic=pb.Resource(name="T"), body=b"x", user_properties={"UNIQ_KEY": "forged"})
    with pytest.raises(ValueError):
        convert.record_properties(clash)


def test_record_to_delivery() -> None:
    body = b"compressed by a 4.x client"
    rec = _record({"TAGS": "TagA", "KEYS": "k1", "UNIQ_KEY": "01ABC", "__SHARDINGKEY": "g", "CLUSTER": "c",
                   "color": "red"}, zlib.compress(body), COMPRESSED_FLAG)
    out = convert.to_pb(rec, "T", receipt_handle="T|2|7|9|0", invisible_ms=1500)
    sp = out.system_properties
    assert out.body == body and sp.body_encoding == pb.IDENTITY  # inflated: gRPC's GZIP is not zlib
    # the proxy's digest: MD5, upper-case hex (GrpcConverter.buildSystemProperties)
    assert sp.body_digest.type == pb.MD5 and sp.body_digest.checksum == hashlib.md5(body).hexdigest().upper()
    assert (sp.tag, list(sp.keys), sp.message_id, sp.message_group) == ("TagA", ["k1"], "01ABC", "g")
    # the proxy hides only MessageConst.STRING_HASH_SET: __SHARDINGKEY stays a user property
    assert dict(out.user_properties) == {"color": "red", "__SHARDINGKEY": "g"}
    assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt, sp.message_type) == (2, 7, 2, pb.FIFO)
    assert (sp.invisible_duration.seconds, sp.invisible_duration.nanos) == (1, 500_000_000)
    assert convert.millis(sp.store_timestamp) == 1_700_000_000_456 and sp.born_host == "10.0.0.1"


def test_top_level_code() -> None:
    assert convert.worst([pb.OK, pb.OK]) == pb.OK
    assert convert.worst([pb.OK, pb.INVALID_RECEIPT_HANDLE]) == pb.MULTIPLE_RESULTS
