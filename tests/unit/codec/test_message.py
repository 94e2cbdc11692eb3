from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.codec import CodecError
from broker_core.codec.message import (
    BLANK_MAGIC_CODE,
    FIXED_OVERHEAD,
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    body_crc,
    check_record,
    decode_properties,
    decode_record,
    encode_properties,
    encode_record,
    record_size,
    write_blank_into,
)
from broker_core.codec.records import SCAN_BLANK, SCAN_END, scan_records
from tests.conftest import GOLDEN

SAMPLE = dict(
    topic="TopicTest", body=b"Hello RocketMQ", queue_id=3, flag=7, queue_offset=42, physical_offset=201,
    sys_flag=0, born_timestamp=1700000000123, born_host="10.0.0.5:53211", store_timestamp=1700000000456,
    store_host="192.168.1.9:10911", reconsume_times=2, prepared_transaction_offset=0,
    properties={"TAGS": "TagA", "KEYS": "order-1 order-2", "UNIQ_KEY": "0A0000050F0B18B4AAC27F6A1B2C0000"},
)


def test_struct_sizes_match_the_seeds():
    assert HEADER.size == HEADER_SIZE == 88
    assert FIXED_OVERHEAD == 91
    assert record_size(1024, 9, 30) == 91 + 1024 + 9 + 30


def test_field_offsets_by_hand():
    raw = encode_record(**SAMPLE)
    assert struct.unpack_from(">i", raw, 0)[0] == len(raw)
    assert raw[4:8] == bytes.fromhex("DAA320A7")
    assert struct.unpack_from(">I", raw, 8)[0] == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF == 1774740973  # Java
    assert struct.unpack_from(">i", raw, 12)[0] == 3
    assert struct.unpack_from(">q", raw, 20)[0] == 42
    assert struct.unpack_from(">q", raw, 28)[0] == 201
    assert raw[48:52] == bytes([10, 0, 0, 5]) and struct.unpack_from(">i", raw, 52)[0] == 53211
    assert struct.unpack_from(">q", raw, 56)[0] == 1700000000456
    assert raw[64:68] == bytes([192, 168, 1, 9])
    assert struct.unpack_from(">i", raw, 84)[0] == 14
    assert raw[88:102] == b"Hello RocketMQ"
    assert raw[102] == 9 and raw[103:112] == b"TopicTest"
    props = encode_properties(SAMPLE["properties"])
    assert struct.unpack_from(">H", raw, 112)[0] == len(props)
    assert raw[114:] == props


def test_golden_record_bytes():
    golden = (GOLDEN / "commitlog_record.bin").read_bytes()
    assert encode_record(**SAMPLE) == golden
    rec = decode_record(golden, source="golden")
    assert rec.topic == "TopicTest" and rec.body == b"Hello RocketMQ"
    assert rec.tags == "TagA" and rec.keys == ["order-1", "order-2"]
    assert rec.born_host == "10.0.0.5:53211" and rec.store_host == "192.168.1.9:10911"
    assert rec.offset_msg_id == "C0A8010900002A9F00000000000000C9"


@given(
    topic=st.text(min_size=1, max_size=40).filter(lambda t: len(t.encode()) <= 127),
    body=st.binary(max_size=2048),
    props=st.dictionaries(
        st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1,
                max_size=10),
        st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20),
        max_size=5),
    queue_id=st.integers(0, 2**31 - 1),
    queue_offset=st.integers(0, 2**63 - 1),
    phy=st.integers(0, 2**63 - 1),
    reconsume=st.integers(0, 1000),
)
def test_round_trip(topic, body, props, queue_id, queue_offset, phy, reconsume):
    raw = encode_record(topic=topic, body=body, properties=props, queue_id=queue_id, queue_offset=queue_offset,
                        physical_offset=phy, reconsume_times=reconsume)
    rec = decode_record(raw)
    assert (rec.topic, rec.body, rec.properties, rec.queue_id, rec.queue_offset, rec.commit_log_offset,
            rec.reconsume_times, rec.store_size) == (topic, body, props, queue_id, queue_offset, phy, reconsume,
                                                     len(raw))
    req = check_record(raw, 0, len(raw))
    assert req.success and req.msg_size == len(raw) and req.topic == topic


def test_properties_round_trip():
    props = {"a": "1", "KEYS": "x y", "empty": ""}
    assert decode_properties(encode_properties(props)) == props
    assert encode_properties(None) == b""


@pytest.mark.parametrize("cut", [0, 10, 87, 88, 100])
def test_truncated_record_names_source_and_position(cut):
    raw = encode_record(**SAMPLE)
    with pytest.raises(CodecError) as err:
        decode_record(raw[:cut], source="seg-7", base_offset=4096)
    assert err.value.source == "seg-7" and err.value.position == 4096
    assert "seg-7" in str(err.value) and "4096" in str(err.value)


def test_corrupt_body_fails_crc():
    raw = bytearray(encode_record(**SAMPLE))
    raw[90] ^= 0xFF
    with pytest.raises(CodecError, match="CRC"):
        decode_record(bytes(raw), source="f")
    assert decode_record(bytes(raw), check_crc=False).body != SAMPLE["body"]
    assert not check_record(raw, 0, len(raw), check_crc=True).success


def test_bad_magic_and_lengths():
    raw = bytearray(encode_record(**SAMPLE))
    bad = bytearray(raw)
    bad[4:8] = b"\x00\x00\x00\x01"
    with pytest.raises(CodecError, match="magic"):
        decode_record(bytes(bad))
    bad = bytearray(raw)
    struct.pack_into(">i", bad, 84, 10_000)
    with pytest.raises(CodecError, match="lengths"):
        decode_record(bytes(bad))
    assert not check_record(bad, 0, len(bad)).success


def test_blank_and_scan():
    a = encode_record(**SAMPLE)
    b = encode_record(**{**SAMPLE, "body": b"second"})
    buf = bytearray(4096)
    buf[: len(a)] = a
    buf[len(a): len(a) + len(b)] = b
    assert scan_records(buf, 0, len(buf)) == (len(a) + len(b), SCAN_END)
    write_blank_into(buf, len(a) + len(b), len(buf) - len(a) - len(b))
    assert scan_records(buf, 0, len(buf)) == (len(a) + len(b), SCAN_BLANK)
    req = check_record(buf, len(a) + len(b), len(buf))
    assert req.success and req.msg_size == 0
    assert struct.unpack_from(">I", buf, len(a) + len(b) + 4)[0] == BLANK_MAGIC_CODE
    buf[len(a) + 90] ^= 0x55  # corrupt second body (bytes 88..93)
    end, why = scan_records(buf, 0, len(buf))
    assert end == len(a) and "CRC" in why
    assert MESSAGE_MAGIC_CODE == 0xDAA320A7


def test_body_crc_is_rocketmq_masked_and_legacy_full_crc_still_reads():
    """RocketMQ's UtilAll.crc32 clears the top bit; records this product wrote before kept all 32 bits."""
    sample = {**SAMPLE, "body": b"a"}  # crc32(b"a") = 0xE8B7BE43: the top bit is set
    raw = bytearray(encode_record(**sample))
    assert struct.unpack_from(">I", raw, 8)[0] == 0x68B7BE43 == body_crc(b"a")
    assert decode_record(bytes(raw)).body == b"a"
    struct.pack_into(">I", raw, 8, 0xE8B7BE43)  # as the earlier version stored it
    assert decode_record(bytes(raw)).body == b"a"
    assert check_record(raw, 0, len(raw), check_crc=True).success
    assert scan_records(raw, 0, len(raw), check_crc=True)[0] == len(raw)
    struct.pack_into(">I", raw, 8, 0x68B7BE44)
    with pytest.raises(CodecError, match="CRC"):
        decode_record(bytes(raw))
    assert not check_record(raw, 0, len(raw), check_crc=True).success
    assert scan_records(raw, 0, len(raw), check_crc=True) == (0, "body CRC mismatch")


def test_walk_records_yields_fields_body_topic_and_properties():
    from broker_core.codec.message import F_BODY_LENGTH, F_QUEUE_OFFSET, F_STORE_TIMESTAMP
    from broker_core.codec.records import walk_records

    a = encode_record(**SAMPLE)
    b = encode_record(**{**SAMPLE, "body": b"second", "queue_offset": 43, "topic": "Other"})
    for buf in (a + b, memoryview(a + b), bytearray(a + b)):
        (fa, body_a, topic_a, props_a), (fb, body_b, topic_b, _) = walk_records(buf)
        assert (body_a, topic_a, fa[F_QUEUE_OFFSET]) == (SAMPLE["body"], SAMPLE["topic"], SAMPLE["queue_offset"])
        assert decode_properties(props_a) == SAMPLE["properties"]
        assert (body_b, topic_b, fb[F_QUEUE_OFFSET], fb[F_BODY_LENGTH]) == (b"second", "Other", 43, 6)
        assert fa[F_STORE_TIMESTAMP] == decode_record(a).store_timestamp
    with pytest.raises(CodecError):
        walk_records(a + b[:100])  # the second record cut short after its header
