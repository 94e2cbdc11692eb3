"""Autoswitch HA (ha/autoswitch_*.py, reference rocketmq-controller.md §4): the byte layouts, truncation of the
store (store/truncate.py), and a master and a slave over loopback sockets in one event loop: epochs travel with
the batches, a batch never crosses an epoch boundary, and a deposed master that comes back as a slave cuts what
the new master never had, then holds the new master's bytes exactly."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.ha.autoswitch_master import AutoSwitchHAService
from broker_core.ha.autoswitch_slave import AutoSwitchHAClient
from broker_core.ha.autoswitch_wire import (
    MASTER_TRANSFER,
    MasterFrameReader,
    MasterHandshake,
    SlaveAck,
    SlaveFrameReader,
    SlaveHandshake,
    Transfer,
    encode_master_handshake,
    encode_slave_ack,
    encode_slave_handshake,
    encode_transfer,
)
from broker_core.store import GetStatus, MessageStore, PutStatus
from broker_core.store.epoch_file import EpochFile
from broker_core.store.message import MessageInner


def test_frames_round_trip_cut_anywhere() -> None:
    slave_bytes = encode_slave_handshake(3, True, False) + encode_slave_ack(4096)
    assert len(slave_bytes) == 16 + 12
    assert slave_bytes[:16] == bytes.fromhex("00000001" "0001" "0000" "0000000000000003")
    master_bytes = (encode_master_handshake(999, [(1, 0), (2, 500)])
                    + encode_transfer(500, 2, 500, 480, b"x" * 10) + encode_transfer(510, 2, 500, 510))
    assert len(master_bytes) == 20 + 24 + 36 + 10 + 36
    for data, reader_cls, want in (
            (slave_bytes, SlaveFrameReader, [SlaveHandshake(True, False, 3), SlaveAck(4096)]),
            (master_bytes, MasterFrameReader, [
                MasterHandshake(999, 2, ((1, 0), (2, 500))), Transfer(500, 2, 500, 480, b"x" * 10),
                Transfer(510, 2, 500, 510, b"")])):
        for cut in range(len(data) + 1):
            reader = reader_cls()
            got = reader.feed(data[:cut]) + reader.feed(data[cut:])  # type: ignore[operator]
            assert got == want
    assert MASTER_TRANSFER.size == 36


def fill(store: MessageStore, n: int, tag: str) -> None:
    msgs = [MessageInner("TopicAS", f"{tag}-{i}".encode() * random.Random(i).randint(1, 40), i % 2)
            for i in range(n)]
    for i in range(0, n, 20):
        assert all(r.status is PutStatus.PUT_OK for r in store.put_messages(msgs[i:i + 20]))


def bodies(store: MessageStore) -> list[bytes]:
    store.dispatch()
    out = []
    for q in (0, 1):
        offset = 0
        while (got := store.get_message("TopicAS", q, offset, 1000)).status is GetStatus.FOUND:
            out += [m.body for m in got.messages]
            offset = got.next_begin_offset
    return sorted(out)


def commit_log(store: MessageStore) -> bytes:
    end = store.max_phy_offset()
    out = b""
    while len(out) < end:
        out += store.get_commit_log_data(len(out), 1 << 20) or b""
    return out


def test_truncate_files_cuts_commit_log_and_queues(open_store: Callable[..., MessageStore]) -> None:
    store = open_store()
    fill(store, 50, "a")
    store.dispatch()
    point = store.max_phy_offset()
    before = bodies(store)
    fill(store, 70, "b")
    assert not store.truncate_files(point + 1)  # not a message boundary: nothing changes
    assert store.truncate_files(point)
    assert store.max_phy_offset() == point
    assert bodies(store) == before
    fill(store, 5, "c")  # queue offsets continue from the cut
    assert len(bodies(store)) == 55


async def _until(cond: Callable[[], bool], what: str) -> None:
    for _ in range(1000):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _as_master(store: MessageStore, epochs: EpochFile, epoch: int) -> None:
    store.dispatch()
    epochs.truncate_suffix_from_epoch(epoch)
    assert epochs.append(epoch, store.max_phy_offset())
    store.open_as_master()  # what AutoSwitchBrokerHA.change_to_master does: queue offsets continue


@pytest.mark.parametrize("batch", [32 * 1024, 700])
def test_deposed_master_truncates_to_the_consistent_point(open_store: Callable[..., MessageStore], tmp_path: Path,
                                                          batch: int) -> None:
    a = open_store(store_dir=tmp_path / "a", ha_transfer_batch_size=batch, ha_send_heartbeat_interval_ms=100)
    b = open_store(store_dir=tmp_path / "b", broker_role="SLAVE", ha_transfer_batch_size=batch,
                   ha_send_heartbeat_interval_ms=100)
    ea, eb = EpochFile(tmp_path / "a.epoch"), EpochFile(tmp_path / "b.epoch")

    async def run() -> None:
        # epoch 1: A is master, B replicates
        _as_master(a, ea, 1)
        fill(a, 40, "e1")
        sa = AutoSwitchHAService(a, a.config, ea)
        sa.is_master, sa.local_broker_id = True, 1
        port_a = await sa.start("127.0.0.1", 0)
        cb = AutoSwitchHAClient(b, b.config, eb, 2, lambda: f"127.0.0.1:{port_a}", lambda: 1)
        cb.start()
        await _until(lambda: b.max_phy_offset() == a.max_phy_offset(), "B caught up in epoch 1")
        assert [(e.epoch, e.start_offset) for e in eb.entries()] == [(1, 0)]
        # A is cut off: B is elected (epoch 2); A keeps writing in epoch 1 (never acknowledged)
        await cb.close()
        fill(a, 30, "lost")
        _as_master(b, eb, 2)
        cut = b.max_phy_offset()
        fill(b, 25, "e2")
        a_only = a.max_phy_offset()
        assert a_only > cut
        # A comes back as B's slave: it truncates to the end of epoch 1 on B, then takes epoch 2
        await sa.close()
        a.set_writable(False)
        sb = AutoSwitchHAService(b, b.config, eb)
        sb.is_master, sb.local_broker_id = True, 2
        port_b = await sb.start("127.0.0.1", 0)
        ca = AutoSwitchHAClient(a, a.config, ea, 1, lambda: f"127.0.0.1:{port_b}", lambda: 2)
        ca.start()
        await _until(lambda: a.max_phy_offset() == b.max_phy_offset() and len(sb.connections) == 1
                     and next(iter(sb.connections)).ack_offset == b.max_phy_offset(), "A caught up in epoch 2")
        assert ca.truncations == 1
        assert [(e.epoch, e.start_offset) for e in ea.entries()] == [(1, 0), (2, cut)]
        # the master acks: with A in the set under allAck, a put is acknowledged once A has it
        b.config.controller.all_ack_in_sync_state_set = True
        sb.set_sync_state_set({1, 2}, 1)
        fill(b, 1, "acked")
        assert await sb.wait_acked(b.max_phy_offset()) is PutStatus.PUT_OK
        await ca.close()
        await sb.close()

    asyncio.run(run())
    ca_, cb_ = commit_log(a), commit_log(b)
    first = next((i for i, (x, y) in enumerate(zip(ca_, cb_, strict=False)) if x != y), None)
    assert (len(ca_), first) == (len(cb_), None)
    assert bodies(a) == bodies(b)
    assert not any(x.startswith(b"lost") for x in bodies(a))


def test_consumers_see_only_what_the_sync_state_set_acknowledged(open_store: Callable[..., MessageStore],
                                                                 tmp_path: Path) -> None:
    """readUnCommitted=false: with allAckInSyncStateSet the master dispatches (makes consumable) only below its
    confirm offset, the smallest ack of the set; a message waits, unseen, until the slave has it."""
    m = open_store(store_dir=tmp_path / "m", ha_send_heartbeat_interval_ms=100, all_ack_in_sync_state_set=True)
    s = open_store(store_dir=tmp_path / "s", broker_role="SLAVE", ha_send_heartbeat_interval_ms=100)
    em, es = EpochFile(tmp_path / "m.epoch"), EpochFile(tmp_path / "s.epoch")

    async def run() -> None:
        _as_master(m, em, 1)
        service = AutoSwitchHAService(m, m.config, em)
        service.is_master, service.local_broker_id = True, 1
        service.set_sync_state_set({1, 2}, 1)
        m.set_dispatch_limit(service.confirm)
        port = await service.start("127.0.0.1", 0)
        fill(m, 10, "before")
        assert bodies(m) == []  # nobody in the set acknowledged them yet
        client = AutoSwitchHAClient(s, s.config, es, 2, lambda: f"127.0.0.1:{port}", lambda: 1)
        client.start()
        await _until(lambda: len(bodies(m)) == 10, "the acknowledged messages to become consumable")
        await client.close()
        fill(m, 1, "unacked")
        await asyncio.sleep(0.3)
        assert len(bodies(m)) == 10  # the slave is gone: the new message stays unconsumable
        client = AutoSwitchHAClient(s, s.config, es, 2, lambda: f"127.0.0.1:{port}", lambda: 1)
        client.start()
        await _until(lambda: len(bodies(m)) == 11, "the message to become consumable once acknowledged")
        await client.close()
        await service.close()

    asyncio.run(run())
