"""Autoswitch HA byte layouts (RocketMQ 5 ``AutoSwitchHAConnection`` / ``AutoSwitchHAClient``, reference
``rocketmq-controller.md`` §4.4): the replication stream of brokers in controller mode. Plain TCP on
``haListenPort``, big-endian, no framing beyond these headers. Classic HA (``wire.py``) is unchanged for brokers
not in controller mode.

Every frame starts with the sender's state (ordinal): READY 0, HANDSHAKE 1, TRANSFER 2, SUSPEND 3, SHUTDOWN 4.

Slave -> master, HANDSHAKE (16 B):

| offset | size | field |
|---|---|---|
| 0 | 4 | state = 1 (i32) |
| 4 | 2 | isSyncFromLastFile (i16, 1 = true) |
| 6 | 2 | isAsyncLearner (i16, 1 = true) |
| 8 | 8 | slaveBrokerId (i64, the controller id) |

Slave -> master, ack (12 B): state = 2 (i32) at 0, slaveMaxPhyOffset (i64) at 4.

Master -> slave, HANDSHAKE: a 20-byte header, then ``bodySize / 12`` epoch entries (at most 1000):

| offset | size | field |
|---|---|---|
| 0 | 4 | state = 1 (i32) |
| 4 | 4 | bodySize (i32) |
| 8 | 8 | masterMaxPhyOffset (i64) |
| 16 | 4 | lastEpoch (i32) |
| entry +0 | 4 | epoch (i32) |
| entry +4 | 8 | startOffset (i64) |

Master -> slave, TRANSFER: a 36-byte header, then ``bodySize`` CommitLog bytes (0: a heartbeat):

| offset | size | field |
|---|---|---|
| 0 | 4 | state = 2 (i32) |
| 4 | 4 | bodySize (i32) |
| 8 | 8 | batchStartOffset (i64) |
| 16 | 4 | epoch (i32) |
| 20 | 8 | epochStartOffset (i64) |
| 28 | 8 | confirmOffset (i64) |
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

READY, HANDSHAKE, TRANSFER, SUSPEND, SHUTDOWN = range(5)

SLAVE_HANDSHAKE = struct.Struct(">ihhq")
SLAVE_ACK = struct.Struct(">iq")
MASTER_HANDSHAKE = struct.Struct(">iiqi")
EPOCH_ENTRY = struct.Struct(">iq")
MASTER_TRANSFER = struct.Struct(">iiqiqq")
MAX_HANDSHAKE_ENTRIES = 1000
assert (SLAVE_HANDSHAKE.size, SLAVE_ACK.size, MASTER_HANDSHAKE.size, EPOCH_ENTRY.size, MASTER_TRANSFER.size) == (
    16, 12, 20, 12, 36)


class HAWireError(ValueError):
    """A frame that breaks the layout (unknown state, negative size)."""


@dataclass(frozen=True, slots=True)
class SlaveHandshake:
    sync_from_last_file: bool
    async_learner: bool
    slave_broker_id: int


@dataclass(frozen=True, slots=True)
class SlaveAck:
    max_phy_offset: int


@dataclass(frozen=True, slots=True)
class MasterHandshake:
    master_max_offset: int
    last_epoch: int
    entries: tuple[tuple[int, int], ...]  # (epoch, startOffset), ascending


@dataclass(frozen=True, slots=True)
class Transfer:
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes


def encode_slave_handshake(slave_broker_id: int, sync_from_last_file: bool = False,
                           async_learner: bool = False) -> bytes:
    return SLAVE_HANDSHAKE.pack(HANDSHAKE, int(sync_from_last_file), int(async_learner), slave_broker_id)


def encode_slave_ack(max_phy_offset: int) -> bytes:
    return SLAVE_ACK.pack(TRANSFER, max_phy_offset)


def encode_master_handshake(master_max_offset: int, entries: list[tuple[int, int]]) -> bytes:
    """The master's reply; only the last :data:`MAX_HANDSHAKE_ENTRIES` entries go (upstream's limit)."""
    entries = entries[-MAX_HANDSHAKE_ENTRIES:]
    last_epoch = entries[-1][0] if entries else 0
    body = b"".join(EPOCH_ENTRY.pack(e, s) for e, s in entries)
    return MASTER_HANDSHAKE.pack(HANDSHAKE, len(body), master_max_offset, last_epoch) + body


def encode_transfer(offset: int, epoch: int, epoch_start_offset: int, confirm_offset: int,
                    body: bytes = b"") -> bytes:
    return MASTER_TRANSFER.pack(TRANSFER, len(body), offset, epoch, epoch_start_offset, confirm_offset) + body


class SlaveFrameReader:
    """The master's incremental parse of what a slave sends: handshakes and acks."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[SlaveHandshake | SlaveAck]:
        self.buf += data
        buf, pos = self.buf, 0
        out: list[SlaveHandshake | SlaveAck] = []
        while len(buf) - pos >= 4:
            state = struct.unpack_from(">i", buf, pos)[0]
            if state == HANDSHAKE:
                if len(buf) - pos < SLAVE_HANDSHAKE.size:
                    break
                _, last_file, learner, broker_id = SLAVE_HANDSHAKE.unpack_from(buf, pos)
                out.append(SlaveHandshake(last_file == 1, learner == 1, broker_id))
                pos += SLAVE_HANDSHAKE.size
            elif state == TRANSFER:
                if len(buf) - pos < SLAVE_ACK.size:
                    break
                out.append(SlaveAck(SLAVE_ACK.unpack_from(buf, pos)[1]))
                pos += SLAVE_ACK.size
            else:
                raise HAWireError(f"HA slave frame with state {state}")
        del buf[:pos]
        return out


class MasterFrameReader:
    """The slave's incremental parse of what its master sends: the handshake reply and transfer batches."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[MasterHandshake | Transfer]:
        self.buf += data
        buf, pos = self.buf, 0
        out: list[MasterHandshake | Transfer] = []
        while len(buf) - pos >= 8:
            state, size = struct.unpack_from(">ii", buf, pos)
            if size < 0:
                raise HAWireError(f"HA master frame with a negative body size {size}")
            if state == HANDSHAKE:
                end = pos + MASTER_HANDSHAKE.size + size
                if end > len(buf):
                    break
                if size % EPOCH_ENTRY.size:
                    raise HAWireError(f"HA handshake body of {size} bytes is not whole 12-byte entries")
                _, _, max_offset, last_epoch = MASTER_HANDSHAKE.unpack_from(buf, pos)
                entries = tuple(EPOCH_ENTRY.unpack_from(buf, p)
                                for p in range(pos + MASTER_HANDSHAKE.size, end, EPOCH_ENTRY.size))
                out.append(MasterHandshake(max_offset, last_epoch, entries))
            elif state == TRANSFER:
                end = pos + MASTER_TRANSFER.size + size
                if end > len(buf):
                    break
                _, _, offset, epoch, epoch_start, confirm = MASTER_TRANSFER.unpack_from(buf, pos)
                out.append(Transfer(offset, epoch, epoch_start, confirm,
                                    bytes(buf[pos + MASTER_TRANSFER.size:end])))
            else:
                raise HAWireError(f"HA master frame with state {state}")
            pos = end
        del buf[:pos]
        return out
