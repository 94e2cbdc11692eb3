"""Retention and the disk guard (INVENTORY §13).

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
below it, go next; queue min offsets advance.

Crash behaviour: deletion is file by file (unlink); a crash between files leaves a shorter but
consistent store, and the next pass continues.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker_core.store.message_store import MessageStore

log = logging.getLogger(__name__)

DiskProbe = Callable[[Path], float]
MANUAL_DELETE_PASSES = 20


def disk_usage_ratio(path: Path) -> float:
    """Used fraction of the partition holding ``path`` (-1 when it cannot be read)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return usage.used / usage.total if usage.total else -1.0


def file_disk_probe(path: Path) -> DiskProbe:
    """A probe that reads the ratio from a file (``diskUsageProbeFile``): disk-full drills without filling a
    disk. An unreadable file means "unknown" (-1), like an unreadable file system."""

    def probe(_: Path) -> float:
        try:
            return float(path.read_text().strip())
        except (OSError, ValueError):
            return -1.0

    return probe


@dataclass
class DiskCheck:
    ratio: float
    max_used_ratio: float
    clean_forcibly_ratio: float
    warning_ratio: float
    disk_full: bool
    clean_immediately: bool
    space_to_delete: bool


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
    def __init__(self, store: MessageStore, disk_probe: DiskProbe | None = None) -> None:
        self.store = store
        self.disk_probe = disk_probe or disk_usage_ratio
        self.manual_delete_times = 0
        self._lock = threading.Lock()

    def execute_delete_files_manually(self) -> None:
        self.manual_delete_times = MANUAL_DELETE_PASSES
        log.info("manual deletion of expired files requested")

    def is_time_to_delete(self, now_ms: int) -> bool:
        hour = dt.datetime.fromtimestamp(now_ms / 1000).hour
        return hour in self.store.config.delete_when_hours

    def check_disk(self) -> DiskCheck:
        """Measure the CommitLog partition and set or clear the disk-full flag."""
        cfg = self.store.config
        ratio = self.disk_probe(cfg.commit_log_dir)
        max_used = min(max(cfg.disk_max_used_space_percent, 10), 95) / 100.0
        clean_immediately = False
        if ratio > cfg.disk_space_warning_level_ratio:
            if not self.store.disk_full:
                log.error("disk use %.1f%% is above %.0f%%: marking the disk full, writes are refused",
                          ratio * 100, cfg.disk_space_warning_level_ratio * 100)
            self.store.disk_full = True
            clean_immediately = True
        elif ratio > cfg.disk_space_clean_forcibly_ratio:
            clean_immediately = True
        else:
            if self.store.disk_full:
                log.warning("disk use %.1f%% is back under %.0f%%: writes are accepted again",
                            ratio * 100, cfg.disk_space_clean_forcibly_ratio * 100)
            self.store.disk_full = False
        return DiskCheck(ratio, max_used, cfg.disk_space_clean_forcibly_ratio, cfg.disk_space_warning_level_ratio,
                         self.store.disk_full, clean_immediately, ratio < 0 or ratio > max_used)

    def run(self, now_ms: int | None = None, force: bool = False) -> RetentionReport:
        """One cleaning pass (idempotent; concurrent callers are serialised)."""
        with self._lock:
            return self._run(self.store.clock.now_ms() if now_ms is None else now_ms, force)

    def _run(self, now_ms: int, force: bool) -> RetentionReport:
        store = self.store
        cfg = store.config
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
            report.bytes_freed = sum(mf.file_size for mf in deleted)
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
        for cq in list(store.consume_queues()):
            before = sum(mf.file_size for mf in cq.mapped_file_queue.files)
            report.deleted_consume_queue_files += cq.delete_expired_files(min_phy, now_ms)
            report.bytes_freed += before - sum(mf.file_size for mf in cq.mapped_file_queue.files)
        if store.index_service is not None:
            report.deleted_index_files += store.index_service.delete_expired_files(min_phy)
