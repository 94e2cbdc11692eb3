"""Retention (INVENTORY §13); "disk full" itself is decided by :mod:`broker_core.store.disk_guard`.

CommitLog cleaning deletes non-active segments whose last modification is older than
``fileReservedTime`` hours when any trigger holds:
- time: the local hour is one of ``deleteWhen`` (``"04"``, ``"04;05"``);
- space: the CommitLog partition is fuller than ``diskMaxUsedSpaceRatio`` percent;
- manual: :meth:`CleanCommitLogService.execute_delete_files_manually` asked for it (20 passes).
Past ``diskSpaceCleanForciblyRatio`` (0.85) files are deleted regardless of age (if
``cleanFileForciblyEnable``); past ``diskSpaceWarningLevelRatio`` (0.90) the store is also marked
disk-full and refuses puts (``SERVICE_NOT_AVAILABLE``) until a check finds it below 0.85 again.
A pass deletes at most 10 segments, oldest first, and stops at the first one that is not expired.
ConsumeQueue files whose last unit points below the new CommitLog min offset, and IndexFiles wholly
below it, go next; queue min offsets advance. The report's ``bytes_freed`` counts the disk the deleted files
really took (``st_blocks``; they are sparse), not their lengths.

Crash behaviour: deletion is file by file (unlink); a crash between files leaves a shorter but
consistent store, and the next pass continues.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker_core.store.disk_guard import DiskCheck, DiskGuard
from broker_core.store.sparse import allocated_bytes

if TYPE_CHECKING:
    from broker_core.config import RetentionConfig
    from broker_core.store.ports import StoreParts

log = logging.getLogger(__name__)

MANUAL_DELETE_PASSES = 20


@dataclass
class RetentionReport:
    triggers: list[str] = field(default_factory=list)
    deleted_commit_log_files: list[str] = field(default_factory=list)
    deleted_consume_queue_files: int = 0
    deleted_index_files: int = 0
    bytes_freed: int = 0
    commit_log_min_offset: int = -1
    disk: DiskCheck | None = None

    @property
    def files_deleted(self) -> int:
        return len(self.deleted_commit_log_files) + self.deleted_consume_queue_files + self.deleted_index_files


class CleanCommitLogService:
    def __init__(self, store: StoreParts, config: RetentionConfig, disk_guard: DiskGuard) -> None:
        self.store = store
        self.config = config
        self.disk_guard = disk_guard
        self.manual_delete_times = 0
        self._lock = threading.Lock()

    def execute_delete_files_manually(self) -> None:
        self.manual_delete_times = MANUAL_DELETE_PASSES
        log.info("manual deletion of expired files requested")

    def is_time_to_delete(self, now_ms: int) -> bool:
        hour = dt.datetime.fromtimestamp(now_ms / 1000).hour
        return hour in self.config.delete_when_hours

    def check_disk(self) -> DiskCheck:
        """The disk guard's measurement (it sets or clears the store's disk-full flag)."""
        return self.disk_guard.check()

    def run(self, now_ms: int | None = None, force: bool = False) -> RetentionReport:
        """One cleaning pass (idempotent; concurrent callers are serialised)."""
        with self._lock:
            return self._run(self.store.clock.now_ms() if now_ms is None else now_ms, force)

    def _run(self, now_ms: int, force: bool) -> RetentionReport:
        store, cfg = self.store, self.config
        report = RetentionReport()
        disk = report.disk = self.check_disk()
        if self.is_time_to_delete(now_ms):
            report.triggers.append("time")
        if disk.space_to_delete:
            report.triggers.append("space")
        if self.manual_delete_times > 0:
            self.manual_delete_times -= 1
            report.triggers.append("manual")
        if force:
            report.triggers.append("forced")
        if report.triggers:
            # what the files really take (st_blocks: they are sparse), measured before they go
            blocks = {mf.path: allocated_bytes(mf.path) for mf in store.commit_log.mapped_file_queue.files}
            clean_at_once = (cfg.clean_file_forcibly_enable and disk.clean_immediately) or force
            deleted = store.commit_log.mapped_file_queue.delete_expired_file_by_time(
                int(cfg.file_reserved_time_hours * 3600 * 1000),
                cfg.delete_commit_log_files_interval_ms,
                cfg.destroy_mapped_file_interval_forcibly_ms,
                clean_at_once,
                now_ms,
                store.clock.sleep,
            )
            report.deleted_commit_log_files = [mf.path.name for mf in deleted]
            report.bytes_freed = sum(blocks.get(mf.path, 0) for mf in deleted)
            if not deleted and disk.space_to_delete:
                log.warning("disk space will be full soon, but no file could be deleted")
            elif deleted:
                log.info("retention (%s) deleted %d CommitLog segments", ",".join(report.triggers), len(deleted))
        self._clean_consume_queues(report, now_ms)
        report.commit_log_min_offset = store.commit_log.min_offset()
        return report

    def _clean_consume_queues(self, report: RetentionReport, now_ms: int) -> None:
        store = self.store
        min_phy = store.commit_log.min_offset()
        if min_phy < 0:
            return
        pause_s = self.config.delete_consume_queue_files_interval_ms / 1000
        for cq in list(store.consume_queues()):
            before = {mf.path: allocated_bytes(mf.path) for mf in cq.mapped_file_queue.files}
            deleted = cq.delete_expired_files(min_phy, now_ms)
            report.deleted_consume_queue_files += deleted
            if deleted:
                kept = {mf.path for mf in cq.mapped_file_queue.files}
                report.bytes_freed += sum(n for path, n in before.items() if path not in kept)
            if deleted and pause_s > 0:  # deleteConsumeQueueFilesInterval: spread the deletions' I/O
                store.clock.sleep(pause_s)
        if store.index_service is not None:
            report.deleted_index_files += store.index_service.delete_expired_files(min_phy)
