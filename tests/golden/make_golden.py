"""Regenerate the golden files. Run only when a format changes on purpose, and say so in the commit.

    python -m tests.golden.make_golden
"""

from pathlib import Path

from broker_core.codec.checkpoint import encode_checkpoint
from broker_core.codec.consume_queue import encode_unit
from broker_core.codec.hashing import index_key, index_key_hash
from broker_core.codec.index_file import INDEX_ENTRY, INDEX_HEADER
from broker_core.codec.message import encode_record
from broker_core.codec.message_id import encode_offset_msg_id

HERE = Path(__file__).parent


def main() -> None:
    from tests.unit.codec.test_message import SAMPLE

    (HERE / "commitlog_record.bin").write_bytes(encode_record(**SAMPLE))
    (HERE / "consumequeue_unit.bin").write_bytes(encode_unit(1073742827, 201, 2598919))
    (HERE / "index_header.bin").write_bytes(INDEX_HEADER.pack(1700000000000, 1700000005000, 0, 4096, 3, 4))
    (HERE / "index_entry.bin").write_bytes(
        INDEX_ENTRY.pack(index_key_hash(index_key("TopicTest", "order-1")), 4096, 5, 2))
    (HERE / "checkpoint.bin").write_bytes(encode_checkpoint(1, 2, 3))
    (HERE / "offset_msg_id.txt").write_text(encode_offset_msg_id(bytes([192, 168, 1, 9]), 10911, 1073742827) + "\n")


if __name__ == "__main__":
    main()
