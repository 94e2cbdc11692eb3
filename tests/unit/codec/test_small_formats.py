from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core.codec import CodecError
from broker_core.codec.checkpoint import CHECKPOINT_FILE_SIZE, decode_checkpoint, encode_checkpoint
from broker_core.codec.consume_queue import CQ_STORE_UNIT_SIZE, decode_unit, encode_unit
from broker_core.codec.hashing import index_key, index_key_hash, tag_hash
from broker_core.codec.index_file import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    decode_header,
    entry_position,
    index_file_size,
)
from broker_core.codec.message_id import UniqueIdGenerator, decode_offset_msg_id, encode_offset_msg_id
from tests.conftest import GOLDEN


def test_consume_queue_unit():
    assert CQ_STORE_UNIT_SIZE == 20
    raw = encode_unit(1073742827, 201, 2598919)
    assert raw == (GOLDEN / "consumequeue_unit.bin").read_bytes()
    assert raw.hex() == "0000000040000 3eb000000c9000000000027a807".replace(" ", "")
    assert decode_unit(raw) == (1073742827, 201, 2598919)
    with pytest.raises(CodecError):
        decode_unit(raw[:19], source="cq")


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
def test_consume_queue_round_trip(phy, size, tags):
    assert decode_unit(encode_unit(phy, size, tags)) == (phy, size, tags)


def test_tag_hash_is_java_string_hashcode():
    assert tag_hash("TagA") == 2598919  # the seeds' dump example
    assert tag_hash("") == 0
    assert tag_hash("polygenelubricants") == -(2**31)  # Java's famous MIN_VALUE hash
    assert tag_hash("标签") == 0x6807 * 31 + 0x7B7E


def test_index_sizes_and_golden():
    assert INDEX_HEADER.size == INDEX_HEADER_SIZE == 40
    assert INDEX_ENTRY.size == INDEX_ENTRY_SIZE == 20
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040
    assert entry_position(5_000_000, 1) == 40 + 20_000_000 + 20
    raw = (GOLDEN / "index_header.bin").read_bytes()
    assert raw == INDEX_HEADER.pack(1700000000000, 1700000005000, 0, 4096, 3, 4)
    assert decode_header(raw) == (1700000000000, 1700000005000, 0, 4096, 3, 4)
    entry = (GOLDEN / "index_entry.bin").read_bytes()
    assert INDEX_ENTRY.unpack(entry) == (1829193424, 4096, 5, 2)  # abs("TopicTest#order-1".hashCode())
    with pytest.raises(CodecError):
        decode_header(raw[:39], source="idx")
    with pytest.raises(CodecError, match="counts"):
        decode_header(INDEX_HEADER.pack(0, 0, 0, 0, 0, 0))


# (String, String.hashCode(), RocketMQ's index hash) as printed by Java 17 (`x.hashCode()`, then
# `Math.abs(h)`, and 0 when that stays negative, as IndexService.buildKey/IndexFile.indexKeyHashMethod do).
JAVA_HASHES = [
    ("TagA", 2598919, 2598919),
    ("TopicTest#order-1", -1829193424, 1829193424),
    ("polygenelubricants", -2147483648, 0),
    ("日本", 835047, 835047),
    ("\U0001F600", 1772899, 1772899),  # a non-BMP character counts as two UTF-16 units
    ("T#KEY-€-1", -723215981, 723215981),
    ("TopicTest#7F0000010D2A18B4AAC2512345670000", -948049668, 948049668),
]


@pytest.mark.parametrize(("text", "java_hash", "index_hash"), JAVA_HASHES)
def test_hashes_match_java(text: str, java_hash: int, index_hash: int) -> None:
    assert tag_hash(text) == java_hash
    assert index_key_hash(text) == index_hash


def test_index_key_hash_is_non_negative_and_stable():
    assert index_key("T", "k") == "T#k"
    assert index_key_hash("TopicTest#order-1") == index_key_hash("TopicTest#order-1") >= 0
    assert index_key_hash("TopicTest#order-1") != index_key_hash("TopicTest#order-2")


def test_checkpoint():
    raw = encode_checkpoint(1, 2, 3)
    assert len(raw) == CHECKPOINT_FILE_SIZE
    assert raw == (GOLDEN / "checkpoint.bin").read_bytes()
    assert decode_checkpoint(raw) == (1, 2, 3)
    with pytest.raises(CodecError):
        decode_checkpoint(raw[:10], source="cp")


def test_offset_message_id():
    msg_id = encode_offset_msg_id(bytes([192, 168, 1, 9]), 10911, 1073742827)
    assert msg_id == (GOLDEN / "offset_msg_id.txt").read_text().strip()
    assert len(msg_id) == 32 and msg_id == msg_id.upper()
    assert decode_offset_msg_id(msg_id) == ("192.168.1.9", 10911, 1073742827)
    assert decode_offset_msg_id(msg_id.lower()) == ("192.168.1.9", 10911, 1073742827)
    for bad in ["", "XYZ", "G" * 32, "00" * 15]:
        with pytest.raises(CodecError):
            decode_offset_msg_id(bad)


def test_unique_ids_are_unique_and_hex():
    gen = UniqueIdGenerator("10.0.0.5")
    ids = {gen.next_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    one = next(iter(ids))
    assert len(one) == 32 and one.startswith("0A000005") and int(one, 16) >= 0
