"""Quarantine: what recovery does with CommitLog data it cannot trust, instead of deleting it.

Recovery walks records and stops at the first invalid one (bad magic, lengths or CRC); the CommitLog then
continues at that record's offset. Whatever lies past that point is kept:

1. A *torn tail* is not quarantined: the invalid record is the last thing ever written (after its declared end
   the segment is zeros, and every later segment is zeros). That is the record a killed process was writing;
   it was never acknowledged, and it is cut with a warning, as before.
2. Anything else is *damage*: every later segment holding a non-zero byte is moved (renamed, the directories
   fsynced) into ``<storeRoot>/quarantine/<yyyyMMddHHmmssSSS>/``, the segment holding the bad record is copied
   there too (its tail will be overwritten by new appends), and ``REPORT.txt`` in that folder says what was found
   where and what happened. The folder is logged at ERROR and listed in the store's runtime info
   (``quarantined``, which the broker's runtime info and the console show). Nothing is deleted: an operator
   decides (e.g. salvage records with the codec, or remove the folder).

Later segments that are all zeros (pre-allocated, never written) hold nothing and are removed by the
truncation as before.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from broker_core.store.durability import create_durable_dir, datasync, fsync_dir

if TYPE_CHECKING:
    from broker_core.store.mapped_file import MappedFile
    from broker_core.store.ports import StoreParts

log = logging.getLogger(__name__)

QUARANTINE_DIR = "quarantine"
_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


def all_zero(mf: MappedFile, start: int = 0) -> bool:
    """Whether ``mf`` holds only zeros from ``start`` to its end."""
    mv = mf.mv
    for pos in range(start, mf.file_size, _CHUNK):
        end = min(pos + _CHUNK, mf.file_size)
        if mv[pos:end].tobytes() != _ZEROS[:end - pos]:
            return False
    return True


def _declared_end(mf: MappedFile, pos: int) -> int:
    """Where the record at ``pos`` says it ends (its TOTALSIZE), or ``pos`` when that is not plausible."""
    if pos + 4 > mf.file_size:
        return mf.file_size
    total = int.from_bytes(mf.mv[pos:pos + 4], "big", signed=True)
    return pos + total if 0 < total <= mf.file_size - pos else pos


def handle_bad_record(store: StoreParts, index: int, pos: int, why: str) -> None:
    """Recovery found an invalid record at ``pos`` of segment ``files[index]``: a torn tail is only logged;
    damage is quarantined and reported (module docstring)."""
    files = store.commit_log.mapped_file_queue.files
    bad = files[index]
    later = [mf for mf in files[index + 1:] if not all_zero(mf)]
    if not later and all_zero(bad, _declared_end(bad, pos)):
        log.warning("CommitLog %s: torn record at %d (%s), the last one written; truncating there",
                    bad.path.name, pos, why)
        return
    root = Path(store.store_config.store_path_root_dir) / QUARANTINE_DIR
    now = store.clock.now_ms()
    stamp = dt.datetime.fromtimestamp(now / 1000).strftime("%Y%m%d%H%M%S") + f"{now % 1000:03d}"
    folder = root / stamp
    n = 0
    while folder.exists():
        n += 1
        folder = root / f"{stamp}-{n}"
    create_durable_dir(folder)
    _copy_synced(bad.path, folder / bad.path.name)
    moved = []
    for mf in later:
        mf.close()
        os.rename(mf.path, folder / mf.path.name)
        moved.append(mf)
    fsync_dir(folder)
    fsync_dir(bad.path.parent)
    gone = {id(mf) for mf in moved}
    store.commit_log.mapped_file_queue.files = [mf for mf in files if id(mf) not in gone]
    offset = bad.file_from_offset + pos
    report = (
        f"CommitLog recovery found an invalid record at offset {offset} (segment {bad.path.name}, position "
        f"{pos}): {why}.\n"
        f"The CommitLog now ends there; new messages are appended from offset {offset}.\n"
        f"{bad.path.name}: a copy of the segment holding the bad record, as found (its bytes from position {pos} on "
        "are no longer part of the CommitLog).\n"
        + "".join(f"{mf.path.name}: a later segment (offsets {mf.file_from_offset}.."
                  f"{mf.file_from_offset + mf.file_size}), moved here from the CommitLog directory, unchanged.\n"
                  for mf in moved)
        + "Nothing was deleted. Messages in these files are not served; ConsumeQueue units and index entries pointing "
        "at them were cut. Salvage records with broker_core.codec (records.scan_records / message.decode_record), "
        "then remove this folder.\n")
    _write_synced(folder / "REPORT.txt", report.encode())
    store.quarantined.append(str(folder))
    log.error("CommitLog damaged at offset %d (%s): %d later segment(s) moved to %s and the damaged segment copied "
              "there; see %s", offset, why, len(moved), folder, folder / "REPORT.txt")


def _copy_synced(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    try:
        datasync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        datasync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
