"""StoreCheckpoint: the flush timestamps of CommitLog, ConsumeQueues and IndexFiles (INVENTORY §12.1).

Invariant: each timestamp is the store time of a record whose data (in that structure) was on disk
when the timestamp was written (the flush services set them from what they flushed, never from the last
write; ``flush.py``); recovery may trust everything stored at or before it.
Crash behaviour: the file is created durably (its directory is fsynced) and then rewritten in place with
``pwrite`` + ``fdatasync``, as RocketMQ does; a torn write can only make a timestamp unreadable
(negative), which recovery treats as 0, i.e. "trust nothing" (full replay). After a failed flush the store
never writes it again (``close(write=False)``), so it keeps the last values known to be true.
"""

from __future__ import annotations

import os
from pathlib import Path

from broker_core.codec import CodecError
from broker_core.codec.checkpoint import CHECKPOINT_FILE_SIZE, decode_checkpoint, encode_checkpoint
from broker_core.store.durability import create_durable_dir, datasync, fsync_dir


class StoreCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        create_durable_dir(path.parent)
        created = not path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        raw = os.pread(self._fd, CHECKPOINT_FILE_SIZE, 0)
        self.physic_msg_timestamp = self.logics_msg_timestamp = self.index_msg_timestamp = 0
        if len(raw) >= 24:
            try:
                (self.physic_msg_timestamp, self.logics_msg_timestamp,
                 self.index_msg_timestamp) = decode_checkpoint(raw, str(path))
            except CodecError:
                pass
        if len(raw) < CHECKPOINT_FILE_SIZE:
            self.flush()
        if created:
            fsync_dir(path.parent)

    def min_timestamp(self, include_index: bool = False) -> int:
        """The safe point for abnormal recovery (upstream subtracts 3 s of slack)."""
        values = [self.physic_msg_timestamp, self.logics_msg_timestamp]
        if include_index:
            values.append(self.index_msg_timestamp)
        return max(0, min(values) - 3000)

    def flush(self) -> None:
        os.pwrite(self._fd, encode_checkpoint(
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp), 0)
        datasync(self._fd)

    def close(self, write: bool = True) -> None:
        if self._fd >= 0:
            if write:
                self.flush()
            os.close(self._fd)
            self._fd = -1
