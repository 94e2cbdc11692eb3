"""The epoch file (store/epoch_file.py, reference rocketmq-controller.md §4.1) and findConsistentPoint (§4.3)."""

from __future__ import annotations

import zlib
from pathlib import Path

from broker_core.store.epoch_file import (
    LONG_MAX,
    EpochEntry,
    EpochFile,
    decode_epoch_file,
    encode_epoch_file,
    find_consistent_point,
)


def test_layout_is_count_crc_then_entries() -> None:
    text = encode_epoch_file([EpochEntry(7, 7000), EpochEntry(8, 8000)])
    lines = text.splitlines()
    assert lines[0] == "2"
    assert int(lines[1]) == zlib.crc32(b"7-7000\n8-8000\n") & 0x7FFFFFFF
    assert lines[2:] == ["7-7000", "8-8000"]
    entries = decode_epoch_file(text)
    assert entries == [EpochEntry(7, 7000, 8000), EpochEntry(8, 8000, LONG_MAX)]


def test_crc_zero_is_not_checked_and_a_wrong_one_is_refused() -> None:
    assert decode_epoch_file("1\n0\n3-100\n") == [EpochEntry(3, 100)]
    assert decode_epoch_file("1\n12345\n3-100\n") is None
    assert decode_epoch_file("2\n0\n3-100\n") is None  # count differs
    assert decode_epoch_file("") is None


def test_append_needs_both_fields_strictly_greater(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    assert f.append(1, 0)
    assert not f.append(1, 10)
    assert not f.append(2, 0)
    assert f.append(1, 0)  # the same entry again: accepted, nothing changes
    assert f.append(3, 500)
    assert [(e.epoch, e.start_offset, e.end_offset) for e in EpochFile(f.path).entries()] == [
        (1, 0, 500), (3, 500, LONG_MAX)]


def test_write_keeps_bak_and_read_falls_back_to_it(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    f.append(1, 0)
    f.append(2, 100)
    assert decode_epoch_file(Path(f"{f.path}.bak").read_text()) == [EpochEntry(1, 0)]
    f.path.write_text("2\n99\n1-0\n2-1")  # a torn overwrite: the CRC no longer matches
    assert EpochFile(f.path).entries() == [EpochEntry(1, 0)]
    f.path.write_text("")
    assert EpochFile(f.path).entries() == [EpochEntry(1, 0)]


def test_truncations(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "e")
    for epoch, start in ((1, 0), (2, 100), (4, 300), (5, 900)):
        assert f.append(epoch, start)
    f.truncate_suffix_from_offset(300)
    assert [e.epoch for e in f.entries()] == [1, 2]
    f.append(4, 300)
    f.truncate_suffix_from_epoch(4)
    assert [e.epoch for e in f.entries()] == [1, 2]
    f.append(6, 700)
    f.truncate_prefix_by_offset(150)  # files below 150 expired: epoch 1 (0..100) goes
    assert [(e.epoch, e.start_offset) for e in EpochFile(f.path).entries()] == [(2, 100), (6, 700)]
    assert f.entry_at(650) == EpochEntry(2, 100, 700)
    assert f.next_after(2) == EpochEntry(6, 700)


def _entries(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return decode_epoch_file(encode_epoch_file([EpochEntry(e, s) for e, s in pairs])) or []


def test_consistent_point_is_the_smaller_end_of_the_newest_common_epoch() -> None:
    # the old master wrote epoch 2 up to 900; the new master (elected at 700) has epoch 2 up to 700, then 3
    local = _entries((1, 0), (2, 300))
    master = _entries((1, 0), (2, 300), (3, 700))
    assert find_consistent_point(local, 900, master, 1500) == 700
    # a slave behind the master in the same epoch keeps everything
    assert find_consistent_point(local, 500, _entries((1, 0), (2, 300)), 800) == 500
    # an epoch with a different start offset does not match: the next lower common one decides
    assert find_consistent_point(_entries((1, 0), (2, 400)), 900, master, 1500) == 300
    assert find_consistent_point(_entries((5, 0)), 10, master, 1500) == -1
    assert find_consistent_point([], 10, master, 1500) == -1


def test_an_epoch_that_wrote_nothing_gives_way(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "e")
    f.append(1, 0)
    f.append(2, 500)
    assert not f.append(3, 500)  # RocketMQ's rule: both strictly greater
    assert f.append_after_empty(3, 500)  # epoch 2 wrote no byte: epoch 3 takes its place
    assert [(e.epoch, e.start_offset) for e in EpochFile(f.path).entries()] == [(1, 0), (3, 500)]
    assert not f.append_after_empty(2, 900)
