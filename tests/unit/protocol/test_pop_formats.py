"""RocketMQ 5 POP's text formats (broker_core.protocol.pop) against the forms ExtraInfoUtil and BatchAck write,
and the ACL resources of the POP request codes."""

from __future__ import annotations

import base64
import json

import pytest

from broker_core.errors import BadRequest
from broker_core.protocol import RequestCode
from broker_core.protocol.pop import (
    ExtraInfo,
    bitset_offsets,
    encode_bitset,
    offset_info,
    parse_batch_ack_body,
    parse_extra_info,
    parse_offset_info,
    retry_mark,
)
from broker_core.server.acl import required_resources
from broker_core.server.acl_config import SUB


def test_extra_info_is_eight_space_separated_fields() -> None:
    info = ExtraInfo(5, 1700000000123, 30000, 3, "0", "broker-a", 1, 7)
    text = info.encode()
    assert text == "5 1700000000123 30000 3 0 broker-a 1 7"  # buildExtraInfo(..., msgQueueOffset)
    assert parse_extra_info(text) == info
    seven = parse_extra_info("5 1700000000123 30000 999 0 broker-a 1")  # the checkpoint's form
    assert seven.queue_offset is None and seven.is_order and not info.is_order
    for bad in ("", "h", "1 2 3", "a 2 3 4 0 b 1 7", "1 2 3 4 0 b 1 7 9"):
        with pytest.raises(BadRequest, match="malformed receipt handle"):
            parse_extra_info(bad)


def test_retry_marks() -> None:
    assert (retry_mark("T"), retry_mark("%RETRY%g_T"), retry_mark("%RETRY%g+T")) == ("0", "1", "2")


def test_offset_infos_round_trip_by_retry_and_queue() -> None:
    text = offset_info([("0", 1, "5"), ("0", 3, "8,9,12")])
    assert text == "0 1 5;0 3 8,9,12"
    assert parse_offset_info(text) == {"0@1": "5", "0@3": "8,9,12"}
    assert parse_offset_info("") == {} and parse_offset_info(None) == {}
    with pytest.raises(ValueError, match="duplicate"):
        parse_offset_info("0 1 5;0 1 6")


def test_bitset_is_java_to_byte_array_in_base64() -> None:
    # BitSet with bits 0, 3 and 9: toByteArray() = [0x09, 0x02]
    assert encode_bitset([0, 3, 9]) == base64.b64encode(bytes([0x09, 0x02])).decode()
    assert bitset_offsets(encode_bitset([0, 3, 9])) == [0, 3, 9]
    assert bitset_offsets([9, 2]) == [0, 3, 9]  # fastjson also reads a byte[] written as numbers
    assert bitset_offsets([-128]) == [7]


def test_batch_ack_body_short_and_long_field_names() -> None:
    body = json.dumps({"brokerName": "broker-a", "acks": [
        {"c": "g", "t": "T", "r": "0", "so": 10, "q": 2, "rq": 1, "pt": 1700000000000, "it": 5000,
         "b": encode_bitset([0, 2])},
        {"consumerGroup": "g", "topic": "T", "retry": "1", "startOffset": 4, "queueId": 0, "reviveQueueId": 3,
         "popTime": 1, "invisibleTime": 2, "bitSet": [1]}]}).encode()
    broker, acks = parse_batch_ack_body(body)
    assert broker == "broker-a"
    assert (acks[0].group, acks[0].real_topic(), acks[0].queue_id, acks[0].offsets) == ("g", "T", 2, (10, 12))
    assert (acks[1].real_topic(), acks[1].offsets, acks[1].pop_time) == ("%RETRY%g_T", (4,), 1)
    with pytest.raises(BadRequest, match="BatchAckMessageRequestBody"):
        parse_batch_ack_body(b'{"acks": [{"c": "g"}]}')


def test_acl_resources_of_the_pop_codes() -> None:
    header = {"topic": "T", "consumerGroup": "g"}
    for code in (RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE, RequestCode.PEEK_MESSAGE,
                 RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.NOTIFICATION, RequestCode.POLLING_INFO):
        assert required_resources(code, header, b"") == {"T": SUB, "%RETRY%g": SUB}
    body = json.dumps({"acks": [{"c": "g2", "t": "T2", "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 1,
                                 "b": encode_bitset([0])}]}).encode()
    assert required_resources(RequestCode.BATCH_ACK_MESSAGE, {}, body) == {"T2": SUB, "%RETRY%g2": SUB}
