"""spark_jobs.split_io: starting the prefetch thread lowers the process's GIL switch interval, never raises it
(each case in a fresh interpreter: the setting is process-wide)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import sys; from spark_jobs import split_io; before = sys.getswitchinterval(); "
         "split_io._prefetcher(); print(before, sys.getswitchinterval())")


def _intervals(setting: str | None) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_JOBS_SWITCH_INTERVAL_S"}
    if setting is not None:
        env["SPARK_JOBS_SWITCH_INTERVAL_S"] = setting
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    before, after = out.stdout.split()
    return float(before), float(after)


@pytest.mark.parametrize(("setting", "expected"), [(None, 0.0005), ("0.001", 0.001), ("0.05", 0.005), ("0", 0.005)])
def test_the_prefetcher_lowers_the_switch_interval_only(setting: str | None, expected: float) -> None:
    before, after = _intervals(setting)
    assert before == pytest.approx(0.005)  # CPython's default
    assert after == pytest.approx(expected)
