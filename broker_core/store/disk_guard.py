"""The disk guard (INVENTORY §13): it alone decides "disk full".

:meth:`DiskGuard.check` measures the CommitLog partition (``shutil.disk_usage``, i.e. ``statvfs``: the blocks
really in use, which is what counts now that store files are sparse and a file's length says nothing of its
disk; or a probe such as :func:`file_disk_probe` for drills) and classifies it:
- over ``diskSpaceWarningLevelRatio`` (0.90): disk full, puts are refused (``SERVICE_NOT_AVAILABLE``), and
  retention cleans at once;
- over ``diskSpaceCleanForciblyRatio`` (0.85): retention cleans at once, regardless of file age;
- otherwise: disk full is cleared (so writes resume only once use is back under 0.85);
- over ``diskMaxUsedSpaceRatio`` percent (75, clamped to 10..95), or unreadable: retention has space to free.
:meth:`DiskGuard.no_space` also sets disk full when the CommitLog's blocks cannot be reserved (ENOSPC).
The flag lives in memory: a restarted store starts "not full" until the first check (every
``cleanResourceInterval``).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker_core.config import RetentionConfig

log = logging.getLogger(__name__)

DiskProbe = Callable[[Path], float]


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


class DiskGuard:
    def __init__(self, config: RetentionConfig, commit_log_dir: Path, probe: DiskProbe | None = None) -> None:
        self.config = config
        self.commit_log_dir = commit_log_dir
        self.probe = probe or disk_usage_ratio
        self.full = False

    def no_space(self, exc: OSError) -> None:
        """The CommitLog could not reserve blocks ahead of its writer (ENOSPC/EDQUOT, ``prefault.py``): the disk is
        full whatever the ratio says (quotas, root-reserved blocks, another process), so puts are refused now, before
        the writer reaches holes with no blocks; the next :meth:`check` under the clean ratio lets them in again."""
        if not self.full:
            log.error("no space for the CommitLog's next blocks (%s): marking the disk full, writes are refused", exc)
        self.full = True

    def check(self) -> DiskCheck:
        """Measure the CommitLog partition and set or clear the disk-full flag."""
        cfg = self.config
        ratio = self.probe(self.commit_log_dir)
        max_used = min(max(cfg.disk_max_used_space_percent, 10), 95) / 100.0
        clean_immediately = False
        if ratio > cfg.disk_space_warning_level_ratio:
            if not self.full:
                log.error("disk use %.1f%% is above %.0f%%: marking the disk full, writes are refused",
                          ratio * 100, cfg.disk_space_warning_level_ratio * 100)
            self.full = True
            clean_immediately = True
        elif ratio > cfg.disk_space_clean_forcibly_ratio:
            clean_immediately = True
        else:
            if self.full:
                log.warning("disk use %.1f%% is back under %.0f%%: writes are accepted again",
                            ratio * 100, cfg.disk_space_clean_forcibly_ratio * 100)
            self.full = False
        return DiskCheck(ratio, max_used, cfg.disk_space_clean_forcibly_ratio, cfg.disk_space_warning_level_ratio,
                         self.full, clean_immediately, ratio < 0 or ratio > max_used)
