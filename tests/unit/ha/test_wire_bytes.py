"""The bytes both HA flavours put on the wire, checked against the layouts written out here with ``struct`` (not
with the modules' own encoders): a raw socket plays the other side of a real master (HAService,
AutoSwitchHAService) or a real slave (HAClient, AutoSwitchHAClient) over loopback.

Classic (reference §8): the slave reports its CommitLog end in 8 bytes; the master sends a 12-byte header (offset,
size) before each batch and the header alone as a heartbeat. Autoswitch (``rocketmq-controller.md`` §4.4): a
16-byte slave handshake answered by a 20-byte header and 12-byte epoch entries; 12-byte acks; a 36-byte transfer
header with the epoch, its start offset and the confirm offset; a batch never crosses an epoch's start."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from pathlib import Path

from broker_core.ha.autoswitch_master import AutoSwitchHAService
from broker_core.ha.autoswitch_slave import AutoSwitchHAClient
from broker_core.ha.master import HAService
from broker_core.ha.slave import HAClient
from broker_core.store import MessageStore, PutStatus
from broker_core.store.epoch_file import EpochFile
from broker_core.store.message import MessageInner

BATCH = 700
HEARTBEAT_MS = 100


def fill(store: MessageStore, n: int, tag: str) -> None:
    msgs = [MessageInner("TopicWire", f"{tag}-{i}".encode() * (1 + i % 17), i % 2) for i in range(n)]
    assert all(r.status is PutStatus.PUT_OK for r in store.put_messages(msgs))


def commit_log(store: MessageStore, start: int, end: int) -> bytes:
    out = b""
    while start + len(out) < end:
        chunk = store.get_commit_log_data(start + len(out), end - start - len(out))
        assert chunk
        out += chunk
    return out


async def read_frame(reader: asyncio.StreamReader, header: struct.Struct, size_at: int) -> tuple[tuple[int, ...],
                                                                                              bytes]:
    fields = header.unpack(await asyncio.wait_for(reader.readexactly(header.size), 30))
    return fields, await asyncio.wait_for(reader.readexactly(fields[size_at]), 30)


def test_classic_master_stream(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    m = open_store(store_dir=tmp_path / "m", ha_transfer_batch_size=BATCH, ha_send_heartbeat_interval_ms=HEARTBEAT_MS)
    fill(m, 40, "classic")
    end = m.max_phy_offset()
    header = struct.Struct(">qi")

    async def run() -> None:
        service = HAService(m, m.config.ha)
        port = await service.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">q", 0))  # an empty slave: the stream starts at the last segment (offset 0 here)
        got, offset = b"", 0
        while offset < end:
            (at, size), body = await read_frame(reader, header, 1)
            assert at == offset and 0 < size <= BATCH
            got += body
            offset += size
        assert got == commit_log(m, 0, end)
        writer.write(struct.pack(">q", end))
        assert await asyncio.wait_for(reader.readexactly(12), 30) == struct.pack(">qi", end, 0)  # a heartbeat
        assert service.push2slave_max_offset == end
        writer.close()
        await service.close()

    asyncio.run(run())


def test_classic_slave_reports(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    m = open_store(store_dir=tmp_path / "m")
    s = open_store(store_dir=tmp_path / "s", broker_role="SLAVE", ha_send_heartbeat_interval_ms=HEARTBEAT_MS)
    fill(m, 30, "to-slave")
    end = m.max_phy_offset()
    data = commit_log(m, 0, end)

    async def run() -> None:
        accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        server = await asyncio.start_server(lambda r, w: accepted.put_nowait((r, w)), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = HAClient(s, s.config.ha, lambda: f"127.0.0.1:{port}")
        client.start()
        reader, writer = await asyncio.wait_for(accepted.get(), 30)
        assert await asyncio.wait_for(reader.readexactly(8), 30) == struct.pack(">q", 0)
        cut = len(data) // 3 + 5  # inside a record: the slave holds the tail until the rest comes
        writer.write(struct.pack(">qi", 0, cut) + data[:cut])
        writer.write(struct.pack(">qi", cut, len(data) - cut) + data[cut:])
        while (report := struct.unpack(">q", await asyncio.wait_for(reader.readexactly(8), 30))[0]) < end:
            pass  # reports of what it appended so far (whole records only)
        assert report == end and commit_log(s, 0, end) == data
        await client.close()
        writer.close()
        server.close()

    asyncio.run(run())


def test_autoswitch_master_stream(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    m = open_store(store_dir=tmp_path / "m", ha_transfer_batch_size=BATCH, ha_send_heartbeat_interval_ms=HEARTBEAT_MS)
    epochs = EpochFile(tmp_path / "m.epoch")
    assert epochs.append(1, 0)
    fill(m, 25, "epoch1")
    second = m.max_phy_offset()
    assert epochs.append(2, second)
    fill(m, 25, "epoch2")
    end = m.max_phy_offset()
    header = struct.Struct(">iiqiqq")

    async def run() -> None:
        service = AutoSwitchHAService(m, m.config, epochs)
        service.is_master, service.local_broker_id = True, 1
        service.set_sync_state_set({1}, 1)
        port = await service.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">ihhq", 1, 0, 0, 2))  # HANDSHAKE, not from the last file, no learner, id 2
        reply = await asyncio.wait_for(reader.readexactly(20 + 24), 30)
        assert reply == struct.pack(">iiqi", 1, 24, end, 2) + struct.pack(">iq", 1, 0) + struct.pack(">iq", 2, second)
        writer.write(struct.pack(">iq", 2, 0))  # the first ack: from the CommitLog's min offset
        got, offset = b"", 0
        while offset < end:
            (state, size, at, epoch, epoch_start, confirm), body = await read_frame(reader, header, 1)
            assert (state, at, confirm) == (2, offset, end) and 0 < size <= BATCH
            assert (epoch, epoch_start) == ((1, 0) if at < second else (2, second))
            assert at >= second or at + size <= second  # never across the second epoch's start
            got += body
            offset += size
        assert got == commit_log(m, 0, end)
        writer.write(struct.pack(">iq", 2, end))
        heartbeat = await asyncio.wait_for(reader.readexactly(36), 30)
        assert heartbeat == struct.pack(">iiqiqq", 2, 0, end, 2, second, end)
        writer.close()
        await service.close()

    asyncio.run(run())


def test_autoswitch_slave_handshake_and_acks(open_store: Callable[..., MessageStore], tmp_path: Path) -> None:
    m = open_store(store_dir=tmp_path / "m")
    s = open_store(store_dir=tmp_path / "s", broker_role="SLAVE", ha_send_heartbeat_interval_ms=HEARTBEAT_MS)
    fill(m, 30, "to-slave")
    end = m.max_phy_offset()
    data = commit_log(m, 0, end)
    epochs = EpochFile(tmp_path / "s.epoch")

    async def run() -> None:
        accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        server = await asyncio.start_server(lambda r, w: accepted.put_nowait((r, w)), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = AutoSwitchHAClient(s, s.config, epochs, 2, lambda: f"127.0.0.1:{port}", lambda: 1)
        client.start()
        reader, writer = await asyncio.wait_for(accepted.get(), 30)
        assert await asyncio.wait_for(reader.readexactly(16), 30) == struct.pack(">ihhq", 1, 0, 0, 2)
        writer.write(struct.pack(">iiqi", 1, 12, end, 1) + struct.pack(">iq", 1, 0))
        assert await asyncio.wait_for(reader.readexactly(12), 30) == struct.pack(">iq", 2, 0)
        writer.write(struct.pack(">iiqiqq", 2, len(data), 0, 1, 0, end) + data)
        while (ack := struct.unpack(">iq", await asyncio.wait_for(reader.readexactly(12), 30)))[1] < end:
            assert ack[0] == 2  # TRANSFER
        assert ack == (2, end) and commit_log(s, 0, end) == data
        assert [(e.epoch, e.start_offset) for e in epochs.entries()] == [(1, 0)]
        assert client.confirm_offset == end
        await client.close()
        writer.close()
        server.close()

    asyncio.run(run())
