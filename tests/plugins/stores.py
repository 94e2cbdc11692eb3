"""In-process stores: a manual clock and ``open_store`` (small files, shut down after the test), and
``records_written`` (a store's records as bytes, to compare two stores)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.store import MessageStore
from broker_core.store.clock import ManualClock
from tests.conftest import small_config


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_store(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., MessageStore]]:
    """Factory: ``open_store(background=False, **config_overrides)`` -> started store, shut down after."""
    opened: list[MessageStore] = []

    def factory(background: bool = False, disk_probe=None, store_dir: Path | None = None, **overrides: object):  # type: ignore[no-untyped-def]
        cfg = small_config(store_dir or tmp_path / "store", **overrides)
        store = MessageStore(cfg, clock, disk_probe, background=background).start()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.shutdown()


STORE_TS = slice(56, 64)  # a record's store timestamp: it differs between two stores written one after the other


def records_written(store: MessageStore) -> list[bytes]:
    """Each record (or end-of-segment blank) written so far, in order, its store timestamp zeroed."""
    out = []
    for mf in store.commit_log.mapped_file_queue.files:
        data = bytes(mf.mv[:mf.wrote_position])
        pos = 0
        while pos + 8 <= len(data):
            size = int.from_bytes(data[pos:pos + 4], "big")
            rec = bytearray(data[pos:pos + size])
            rec[STORE_TS] = bytes(8)
            out.append(bytes(rec))
            pos += size
    return out
