"""broker_core's own request codes stay in ``OWN_CODE_BLOCK``, clear of every number RocketMQ uses, and fit the
ROCKETMQ serialize type's two-byte code field."""

from __future__ import annotations

from broker_core.codec.wire import SERIALIZE_ROCKETMQ
from broker_core.protocol import FrameDecoder, RemotingCommand, RequestCode
from broker_core.protocol.codes import OWN_CODE_BLOCK
from broker_core.protocol.controller import ControllerRequestCode

OWN = {"CLEAN_EXPIRED_FILES", "CHECK_DISK", "DELIVER_DELAYED", "GET_DELAY_BACKLOG", "RESEND_DEAD_LETTERS",
       "REPORT_CONSUME_TRACE", "SNAPSHOT_SEGMENTS", "RELEASE_SNAPSHOT", "READ_SNAPSHOT_SEGMENT"}

# Every RequestCode number below 32768 on any branch or tag of apache/rocketmq (4.0 to 5.3.3 and develop,
# RequestCode.java under common/.../protocol and remoting/.../protocol), as ranges that cover them.
ROCKETMQ_RANGES = [range(10, 62), range(100, 107), range(200, 226), range(300, 423), range(513, 667),
                   range(901, 909), range(1000, 1020), range(1217, 1218), range(2001, 2042), range(3001, 3011),
                   range(3442, 3544), range(4000, 4010)]


def test_own_codes_are_the_block_and_only_they() -> None:
    assert {c.name for c in RequestCode if c in OWN_CODE_BLOCK} == OWN
    assert OWN_CODE_BLOCK.stop <= 32768


def test_no_code_shares_a_number() -> None:
    """IntEnum makes a second name with a taken number an alias, silently: the clash this block fixed."""
    assert len(RequestCode.__members__) == len({c.value for c in RequestCode})


def test_block_is_clear_of_rocketmq() -> None:
    for r in ROCKETMQ_RANGES:
        assert not set(r) & set(OWN_CODE_BLOCK), r
    assert not {int(c) for c in ControllerRequestCode} & set(OWN_CODE_BLOCK)
    assert RequestCode.RESEND_DEAD_LETTERS != 907 and RequestCode.CHECK_DISK != 901  # RocketMQ 5's HA status / group


def test_own_codes_survive_the_two_byte_header() -> None:
    for name in sorted(OWN):
        cmd = RemotingCommand.request(RequestCode[name], {"k": "v"})
        cmd.serialize_type = SERIALIZE_ROCKETMQ
        frame = cmd.encode()
        assert frame[4] == SERIALIZE_ROCKETMQ  # not the JSON fallback of codes past the i16 (POP's 200050...)
        [back] = FrameDecoder().feed(frame)
        assert back.code == RequestCode[name]


def test_spark_readers_copy_of_the_read_code_matches() -> None:
    """``spark_jobs.remote`` may not import broker_core.protocol, so it keeps its own copy of the number."""
    from spark_jobs import remote

    assert remote.READ_SNAPSHOT_SEGMENT == RequestCode.READ_SNAPSHOT_SEGMENT
