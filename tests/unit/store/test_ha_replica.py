"""Replicated appends (store/replica.py) and the HA byte layouts (ha/wire.py), in process: a slave store fed the
master's CommitLog in 32 KiB chunks, cut at arbitrary points as the HA stream cuts them, ends byte-identical,
rolls segments where the master rolled, dispatches its own ConsumeQueues and index, and refuses bytes that do
not continue it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker_core.codec.records import scan_records
from broker_core.ha.wire import TransferReader, encode_report, encode_transfer, take_last_report
from broker_core.store import GetStatus, MessageStore, PutStatus, ReplicaError, split_whole_records
from broker_core.store.message import MessageInner
from broker_core.store.replica import copy_chunk


def fill(master: MessageStore, n: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    msgs = [MessageInner("TopicHA", bytes([i % 251]) * rnd.randint(1, 3000), i % 3,
                         properties={"KEYS": f"k{i}", "UNIQ_KEY": f"{i:032X}", "TAGS": "t"}) for i in range(n)]
    for i in range(0, n, 50):
        assert all(r.ok for r in master.put_messages(msgs[i:i + 50]))


def append_whole(slave: MessageStore, start: int, buf: bytes, size: int) -> int:
    """Append the whole records at the head of ``buf`` (segment by segment), as HAClient does; returns how many
    bytes went in."""
    done = 0
    while whole := split_whole_records(buf[done:], start + done, size):
        slave.append_replicated(start + done, buf[done:done + whole])
        done += whole
    return done


def replicate(master: MessageStore, slave: MessageStore, rnd: random.Random, batch: int = 32 * 1024) -> None:
    """What HAConnection + HAClient do, without sockets: chunks of at most ``batch`` bytes, each cut again at a
    random point, whole records appended, the cut tail carried over."""
    size = master.config.store.mapped_file_size_commit_log_bytes
    offset = slave.max_phy_offset() or master.max_phy_offset() - master.max_phy_offset() % size
    partial = b""
    while True:
        data = master.get_commit_log_data(offset, batch)
        if not data:
            break
        cut = rnd.randint(0, len(data))
        for part in (data[:cut], data[cut:]):
            buf = partial + part
            partial = buf[append_whole(slave, offset - len(partial), buf, size):]
            offset += len(part)
    assert partial == b""


def read_all(store: MessageStore, queue_id: int, offset: int) -> list[bytes]:
    bodies = []
    while (got := store.get_message("TopicHA", queue_id, offset, 1000)).status is GetStatus.FOUND:
        bodies += [m.body for m in got.messages]
        offset = got.next_begin_offset
    return bodies


def files(store: MessageStore) -> dict[str, bytes]:
    store.flush()
    return {f.path.name: Path(f.path).read_bytes() for f in store.commit_log.mapped_file_queue.files}


def test_slave_commit_log_is_byte_identical_and_dispatched(open_store, tmp_path: Path) -> None:
    master = open_store(store_dir=tmp_path / "m")
    slave = open_store(store_dir=tmp_path / "s", broker_role="SLAVE")
    fill(master, 400)
    assert len(master.commit_log.mapped_file_queue.files) > 3  # several segment rolls (blank records)
    # a slave that was there from the start: replication from offset 0
    rnd = random.Random(7)
    offset = 0
    partial = b""
    size = master.config.store.mapped_file_size_commit_log_bytes
    while (data := master.get_commit_log_data(offset, 32 * 1024)):
        buf = partial + data
        start = offset - len(partial)
        cut = rnd.randint(0, len(buf))
        partial = buf[append_whole(slave, start, buf[:cut], size):]
        offset += len(data)
    assert append_whole(slave, offset - len(partial), partial, size) == len(partial)
    assert files(slave) == files(master)
    slave.dispatch()
    master.dispatch()
    for q in range(3):
        assert slave.get_max_offset_in_queue("TopicHA", q) == master.get_max_offset_in_queue("TopicHA", q)
        assert read_all(slave, q, 0) == read_all(master, q, 0)
    assert [m.body for m in slave.query_message("TopicHA", "k123").messages] == [bytes([123]) * len(
        master.query_message("TopicHA", "k123").messages[0].body)]


def test_a_late_slave_starts_at_the_masters_last_segment_and_catches_up(open_store, tmp_path: Path) -> None:
    master = open_store(store_dir=tmp_path / "m")
    slave = open_store(store_dir=tmp_path / "s", broker_role="SLAVE")
    fill(master, 300)
    replicate(master, slave, random.Random(3))
    fill(master, 200, seed=2)
    replicate(master, slave, random.Random(4))
    mine, theirs = files(slave), files(master)
    assert 0 < len(mine) < len(theirs)
    assert all(theirs[name] == data for name, data in mine.items())
    assert slave.max_phy_offset() == master.max_phy_offset()
    slave.dispatch()
    cq_min = slave.get_min_offset_in_queue("TopicHA", 0)
    assert cq_min > 0  # the queue starts where the slave's CommitLog starts
    bodies = read_all(slave, 0, cq_min)
    assert len(bodies) == master.get_max_offset_in_queue("TopicHA", 0) - cq_min
    assert bodies == read_all(master, 0, cq_min)


def test_replicated_bytes_must_continue_the_commit_log(open_store, tmp_path: Path) -> None:
    master = open_store(store_dir=tmp_path / "m")
    slave = open_store(store_dir=tmp_path / "s", broker_role="SLAVE")
    fill(master, 20)
    data = master.get_commit_log_data(0, 32 * 1024)
    assert data is not None
    whole = split_whole_records(data, 0, master.config.store.mapped_file_size_commit_log_bytes)
    with pytest.raises(ReplicaError):
        slave.append_replicated(100, data[:whole])  # an empty store starts at a segment boundary
    slave.append_replicated(0, data[:whole])
    with pytest.raises(ReplicaError):
        slave.append_replicated(0, data[:whole])  # not at the end
    first = int.from_bytes(data[:4], "big")
    with pytest.raises(ReplicaError):
        slave.append_replicated(whole, data[whole - first + 1:whole])  # not a record
    with pytest.raises(ReplicaError):
        split_whole_records(b"\x00" * 16, 0, 65536)
    assert slave.max_phy_offset() == whole


def test_a_slave_refuses_puts_until_promoted(open_store, tmp_path: Path) -> None:
    master = open_store(store_dir=tmp_path / "m")
    slave = open_store(store_dir=tmp_path / "s", broker_role="SLAVE")
    fill(master, 30)
    replicate(master, slave, random.Random(1))
    refused = slave.put_message(MessageInner("TopicHA", b"x", 0))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE and "slave" in refused.error
    slave.promote("ASYNC_MASTER")
    after = slave.put_messages([MessageInner("TopicHA", b"x", 0)])[0]
    assert after.ok and after.queue_offset == master.get_max_offset_in_queue("TopicHA", 0)
    assert after.phy_offset == master.max_phy_offset()


def test_wire_layouts() -> None:
    assert encode_report(5) == b"\x00" * 7 + b"\x05"
    buf = bytearray(encode_report(7) + encode_report(9) + b"\x00\x00")
    assert take_last_report(buf) == 9 and buf == bytearray(b"\x00\x00")
    assert take_last_report(buf) is None
    reader = TransferReader()
    stream = encode_transfer(100, b"abc") + encode_transfer(103) + encode_transfer(103, b"d" * 10)
    assert reader.feed(stream[:5]) == []
    assert reader.feed(stream[5:20]) == [(100, b"abc")]
    assert reader.feed(stream[20:]) == [(103, b""), (103, b"d" * 10)]
    assert encode_transfer(1, b"x")[:12] == (1).to_bytes(8, "big") + (1).to_bytes(4, "big")


class _Writes:
    """Records the slice assignments a copy makes, in order."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, bytes]] = []

    def __setitem__(self, where: slice, value: bytes | memoryview) -> None:
        self.writes.append((where.start, bytes(value)))


def _torn(base: bytearray, at: int, data: bytes, rnd: random.Random, block: int = 64) -> None:
    """``data`` written at ``at`` only in part, as a killed ``memcpy`` may leave it: a random subset of its blocks."""
    for i in range(0, len(data), block):
        if rnd.random() < 0.5:
            base[at + i:at + i + block] = data[i:i + block]


@pytest.mark.parametrize("copy", ["copy_chunk", "plain"])
def test_a_copy_killed_at_any_point_recovers_to_master_bytes(open_store, copy: str) -> None:
    """Recovery after a SIGKILL anywhere in a replicated copy (earlier cut copies of the same bytes lying around
    too) finds only records equal to the master's: ``copy_chunk``'s order. A plain slice copy does not: recovery
    checks lengths and the body CRC, so a record cut in its properties recovers as valid (that case must fail)."""
    master = open_store()
    fill(master, 200)
    size = master.config.store.mapped_file_size_commit_log_bytes
    source = master.get_commit_log_data(0, size)
    assert source is not None and len(source) > 8192
    source = bytes(source) + bytes(size - len(source))  # the segment as the master has it
    rnd = random.Random(7)
    failures = 0
    for trial in range(300):
        pos = split_whole_records(source[:rnd.randint(0, 4096)], 0, size)  # a record boundary: the slave's end
        end = pos + split_whole_records(source[pos:pos + rnd.randint(600, 6000)], pos, size)
        if end == pos:
            continue
        chunk = source[pos:end]
        writes = _Writes()
        if copy == "copy_chunk":
            copy_chunk(writes, pos, chunk, size)  # type: ignore[arg-type]  # the slice assignments it makes
        else:
            writes[pos:end] = chunk
        buf = bytearray(source[:pos]) + bytes(size - pos)
        if trial % 2:  # an earlier attempt at these bytes was killed too: part of them (and of later ones) is there
            _torn(buf, pos, source[pos:pos + 8192], rnd)
        cut = rnd.randrange(len(writes.writes))
        for at, data in writes.writes[:cut]:
            buf[at:at + len(data)] = data
        at, data = writes.writes[cut]
        _torn(buf, at, data, rnd)
        got, _ = scan_records(buf, pos, size, True)
        failures += buf[pos:got] != source[pos:got]
    assert (failures == 0) == (copy == "copy_chunk"), failures
