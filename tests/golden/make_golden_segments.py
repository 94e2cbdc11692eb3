"""Golden CommitLog segment files for the Spark source tests (run only when the record format changes on purpose):

    python -m tests.golden.make_golden_segments

- ``commitlog_segment_sealed.bin``: a sealed 4096-byte segment starting at offset 8192: the records of
  :data:`RECORDS` then the blank record filling the rest.
- ``commitlog_segment_torn.bin``: an active 4096-byte segment starting at 12288: the same records, then a record
  whose header promises more bytes than were written (a torn tail), then zeros.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from broker_core.codec.message import BLANK, BLANK_MAGIC_CODE, COMPRESSED_FLAG, encode_record

HERE = Path(__file__).parent
SEGMENT_SIZE = 4096
SEALED_FROM = 8192
TORN_FROM = 12288
RECORDS = [
    {"topic": "Orders", "body": b'{"id": 1, "sku": "A-1"}', "queue_id": 0, "queue_offset": 0, "sys_flag": 0,
     "properties": {"KEYS": "order-1 k2", "TAGS": "created", "UNIQ_KEY": "0A0000010001000000000000000000A1",
                    "region": "eu"}, "born_timestamp": 1700000000001, "store_timestamp": 1700000000011},
    {"topic": "Orders", "body": b"", "queue_id": 1, "queue_offset": 7, "sys_flag": 0,
     "properties": {}, "born_timestamp": 1700000000002, "store_timestamp": 1700000000012, "reconsume_times": 2},
    {"topic": "%RETRY%g1", "body": zlib.compress(b"x" * 5000), "queue_id": 0, "queue_offset": 3,
     "sys_flag": COMPRESSED_FLAG, "properties": {"RETRY_TOPIC": "Orders", "DELAY": "4"},
     "born_timestamp": 1700000000003, "store_timestamp": 1700000000013, "reconsume_times": 1},
    {"topic": "Bytes", "body": bytes(range(256)), "queue_id": 3, "queue_offset": 9, "sys_flag": 0,
     "properties": {"TAGS": "raw"}, "born_timestamp": 1700000000004, "store_timestamp": 1700000000014},
]


def records(base: int) -> list[bytes]:
    out, pos = [], base
    for spec in RECORDS:
        raw = encode_record(physical_offset=pos, born_host="10.0.0.1:5000", store_host="10.0.0.2:10911", **spec)
        out.append(raw)
        pos += len(raw)
    return out


def sealed() -> bytes:
    buf = bytearray(SEGMENT_SIZE)
    data = b"".join(records(SEALED_FROM))
    buf[:len(data)] = data
    BLANK.pack_into(buf, len(data), SEGMENT_SIZE - len(data), BLANK_MAGIC_CODE)
    return bytes(buf)


def torn() -> bytes:
    buf = bytearray(SEGMENT_SIZE)
    data = b"".join(records(TORN_FROM))
    buf[:len(data)] = data
    tail = encode_record(topic="Orders", body=b"never finished" * 10, physical_offset=TORN_FROM + len(data))
    buf[len(data):len(data) + 60] = tail[:60]
    return bytes(buf)


def main() -> None:
    (HERE / "commitlog_segment_sealed.bin").write_bytes(sealed())
    (HERE / "commitlog_segment_torn.bin").write_bytes(torn())


if __name__ == "__main__":
    main()
