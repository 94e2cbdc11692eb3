"""Recovery at start-up (INVENTORY §12): make the CommitLog end at its last valid record and the
ConsumeQueues and IndexFiles agree with it.

Normal exit (no ``abort`` file): walk records from the third-to-last CommitLog segment (CRC checked if
``checkCRCOnRecover``), set the write position after the last valid one, and cut ConsumeQueue units that
point past it. Later segments holding data are never deleted: ``quarantine.py`` moves them (and a copy of
the damaged segment) into ``quarantine/<time>/`` with a report; only all-zero (never written) ones go.

Abnormal exit: choose the newest segment whose first record was stored at or before the checkpoint's
safe time (the flush timestamps minus 3 s), walk and verify records from there to find the valid end,
truncate the torn tail, cut derived units past it, and return the replay start: the dispatcher re-feeds
ConsumeQueues and IndexFiles from there (dispatch is idempotent). IndexFiles newer than the checkpoint
were already dropped at load; the replay starts early enough to rebuild them.

Store files are sparse (``mapped_file.create_sparse``): a hole, never written or never reaching the disk before a
crash, reads as zeros, so recovery takes it for the end of data exactly as it takes an unwritten, zeroed tail
(a record cut by a hole fails its size, magic or CRC check and is truncated as a torn record).

Then ``rebuild.py`` checks the ConsumeQueues and IndexFiles against the recovered CommitLog and moves the
replay start back to rebuild what is missing or corrupt. Afterwards ``recover_topic_queue_table`` sets each
queue's next offset from its ConsumeQueue and moves queue min offsets up to the CommitLog min offset.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker_core.codec.message import HEADER, MESSAGE_MAGIC_CODE
from broker_core.codec.records import SCAN_BLANK, SCAN_END, SCAN_LIMIT, scan_records
from broker_core.store import rebuild
from broker_core.store.checkpoint import StoreCheckpoint
from broker_core.store.quarantine import handle_bad_record

if TYPE_CHECKING:
    from broker_core.store.mapped_file import MappedFile
    from broker_core.store.ports import StoreParts

log = logging.getLogger(__name__)


def recover_consume_queues(store: StoreParts) -> int:
    max_phy = -1
    for cq in store.consume_queues():
        cq.recover()
        max_phy = max(max_phy, cq.max_physic_offset)
    return max_phy


def _walk(store: StoreParts, index: int) -> int:
    """Walk valid records from the start of segment ``index``; return the global end offset."""
    commit_log = store.commit_log
    files = commit_log.mapped_file_queue.files
    size = commit_log.mapped_file_size
    check_crc = store.store_config.check_crc_on_recover
    while True:
        mf = files[index]
        end, why = scan_records(mf.mv, 0, size, check_crc)
        if why == SCAN_BLANK:
            if index + 1 < len(files):
                index += 1
                continue
            return mf.file_from_offset + size
        if why == SCAN_END:
            # zeros: the end of data, unless a later segment holds records (then the zeros are damage)
            if any(any(later.mv[:8]) for later in files[index + 1:]):
                handle_bad_record(store, index, end, "zeros where a record was expected")
        elif why != SCAN_LIMIT:
            handle_bad_record(store, index, end, why)
        return mf.file_from_offset + end


def _finish(store: StoreParts, process_offset: int, max_phy_of_cq: int, always_cut: bool) -> None:
    mfq = store.commit_log.mapped_file_queue
    mfq.flushed_where = process_offset
    mfq.truncate_dirty_files(process_offset, store.clock.now_ms())
    if always_cut or max_phy_of_cq >= process_offset:
        for cq in store.consume_queues():
            cq.truncate_dirty_logic_files(process_offset)
    index = store.index_service
    if index is not None and index.last_indexed_phy >= process_offset:
        # entries past the end stay (lookups check every hit against its record), but new records there get indexed
        index.last_indexed_phy = process_offset - 1


def recover_normally(store: StoreParts, max_phy_of_cq: int) -> int:
    """Returns the offset the dispatcher should resume from."""
    files = store.commit_log.mapped_file_queue.files
    if not files:
        store.destroy_logics()
        return 0
    process_offset = _walk(store, max(0, len(files) - 3))
    _finish(store, process_offset, max_phy_of_cq, always_cut=False)
    return max(min(max_phy_of_cq, process_offset), store.commit_log.min_offset(), 0)


def _matches_checkpoint(mf: MappedFile, min_ts: int) -> bool:
    if mf.file_size < HEADER.size:
        return False
    fields = HEADER.unpack_from(mf.mv, 0)
    return fields[1] == MESSAGE_MAGIC_CODE and fields[11] != 0 and fields[11] <= min_ts


def recover_abnormally(store: StoreParts, max_phy_of_cq: int, index_rebuild_from: int | None) -> int:
    """Returns the offset the dispatcher must replay from."""
    files = store.commit_log.mapped_file_queue.files
    if not files:
        store.destroy_logics()
        return 0
    min_ts = store.checkpoint.min_timestamp(include_index=store.index_service is not None)
    index = 0
    for i in range(len(files) - 1, -1, -1):
        if _matches_checkpoint(files[i], min_ts):
            index = i
            break
    log.info("abnormal exit: verifying the CommitLog from %s", files[index].path.name)
    start = files[index].file_from_offset
    process_offset = _walk(store, index)
    _finish(store, process_offset, max_phy_of_cq, always_cut=True)
    # Everything the ConsumeQueues and IndexFiles show as done survived (page cache); replay from
    # the checkpoint's segment, or earlier when a dropped IndexFile started earlier.
    replay_from = start
    if index_rebuild_from is not None:
        replay_from = min(replay_from, max(index_rebuild_from, store.commit_log.min_offset()))
    return replay_from


def recover_topic_queue_table(store: StoreParts) -> None:
    table = {}
    min_phy = store.commit_log.min_offset()
    for cq in store.consume_queues():
        table[(cq.topic, cq.queue_id)] = cq.get_max_offset_in_queue()
        cq.correct_min_offset(min_phy)
    store.commit_log.topic_queue_table = table


def load_and_recover(store: StoreParts) -> None:
    """Load everything, recover the CommitLog, check the derived files, replay dispatch, rebuild the queue table."""
    cfg = store.store_config
    store.schedule.load()
    store.commit_log.load()
    damaged_cqs = rebuild.load_consume_queues(store)
    store.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
    index_rebuild_from = None
    if store.index_service is not None:
        index_rebuild_from = store.index_service.load(store.last_exit_ok, store.checkpoint.index_msg_timestamp,
                                                      lambda phy: rebuild.index_keys_at(store, phy))
    max_phy_cq = recover_consume_queues(store)
    if store.last_exit_ok:
        reput_from = recover_normally(store, max_phy_cq)
        if index_rebuild_from is not None:  # an IndexFile was dropped at load
            reput_from = min(reput_from, max(index_rebuild_from, store.commit_log.min_offset()))
    else:
        reput_from = recover_abnormally(store, max_phy_cq, index_rebuild_from)
    reput_from = rebuild.replay_start(store, max(reput_from, 0), damaged_cqs)
    store.reput.reput_from_offset = max(reput_from, 0)
    store.reput.do_reput()
    recover_topic_queue_table(store)
    store.commit_log.stage_last()  # commitLogWriteMode=pwrite: appends to the last segment are staged
