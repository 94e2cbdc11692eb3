"""Client trace records (RocketMQ's TraceDataEncoder layout): bodies written field by field as the Java client
writes them are read back, with the variants older and CLOUD clients write."""

from __future__ import annotations

from broker_core.codec.trace_data import decode_trace_data, encode_trace_record, is_trace_data

S, E = "\u0001", "\u0002"


def test_pub_sub_before_sub_after_and_end_transaction() -> None:
    body = (S.join(["Pub", "1700000000100", "DefaultRegion", "pg", "Orders", "UNIQ1", "TagA", "k1 k2",
                    "10.0.0.5:10911", "42", "7", "0", "0A00000500002A9F0000000000000100", "true"]) + E
            + S.join(["SubBefore", "1700000000200", "DefaultRegion", "cg", "REQ1", "UNIQ1", "0", "k1 k2"]) + E
            + S.join(["SubAfter", "REQ1", "UNIQ1", "15", "false", "k1 k2", "2", "1700000000215", "cg"]) + E
            + S.join(["EndTransaction", "1700000000300", "DefaultRegion", "tpg", "Orders", "UNIQ1", "null", "null",
                      "10.0.0.5:10911", "1", "TX1", "COMMIT_MESSAGE", "false"]) + E).encode()
    assert is_trace_data(body)
    pub, before, after, end = decode_trace_data(body)
    assert pub == {"type": "Pub", "timestamp": 1700000000100, "regionId": "DefaultRegion", "groupName": "pg",
                   "topic": "Orders", "msgId": "UNIQ1", "tags": "TagA", "keys": "k1 k2", "storeHost": "10.0.0.5:10911",
                   "bodyLength": 42, "costTime": 7, "msgType": "Normal_Msg",
                   "offsetMsgId": "0A00000500002A9F0000000000000100", "success": True, "clientHost": ""}
    assert (before["groupName"], before["requestId"], before["retryTimes"], before["timestamp"]) == (
        "cg", "REQ1", 0, 1700000000200)
    assert (after["success"], after["contextCode"], after["costTime"], after["timestamp"], after["groupName"]) == (
        False, "EXCEPTION", 15, 1700000000215, "cg")
    assert (end["transactionState"], end["msgType"], end["tags"], end["fromTransactionCheck"]) == (
        "COMMIT_MESSAGE", "Trans_Msg_Half", "", False)


def test_short_variants_and_junk() -> None:
    cloud_after = S.join(["SubAfter", "REQ2", "UNIQ2", "3", "true", "null", "0"])  # CLOUD: no time, no group
    old_pub = S.join(["Pub", "1", "r", "pg", "T", "UNIQ3", "null", "null", "h:1", "1", "2", "3"])  # 12 fields
    body = f"{cloud_after}{E}garbage{S}x{E}{old_pub}{E}".encode()
    after, pub = decode_trace_data(body)
    assert (after["timestamp"], after["groupName"], after["keys"], after["contextCode"]) == (0, "", "", "SUCCESS")
    assert (pub["msgType"], pub["offsetMsgId"], pub["success"], pub["tags"]) == ("Delay_Msg", "", True, "")
    assert not is_trace_data(b'{"type":"stored","msgId":"X"}')


def test_encode_round_trips() -> None:
    rec = {"type": "SubAfter", "requestId": "R", "msgId": "M", "costTime": 4, "success": True, "keys": "",
           "contextCode": "SUCCESS", "timestamp": 5, "groupName": "g"}
    (back,) = decode_trace_data(encode_trace_record(rec))
    assert back == {**rec}
