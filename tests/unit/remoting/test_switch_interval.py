"""``loops.lower_switch_interval``: every process that runs a broker, name server or SDK loop lowers the GIL switch
interval to ``BROKER_CORE_SWITCH_INTERVAL_S`` (0.5 ms by default), never raises it, leaves it alone with 0, and
refuses a value that is not seconds. Each case runs in a fresh interpreter (the interval is process-wide)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import sys
from broker_core.remoting import loops
before = sys.getswitchinterval()
try:
    loops.new_event_loop().close()
except ValueError as exc:
    print("error", exc)
else:
    print(before, sys.getswitchinterval())
"""


def _probe(value: str | None) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BROKER_CORE_SWITCH_INTERVAL_S", None)
    if value is not None:
        env["BROKER_CORE_SWITCH_INTERVAL_S"] = value
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60,
                         check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(("value", "want"), [(None, "0.005 0.0005"), ("0.001", "0.005 0.001"), ("0", "0.005 0.005"),
                                            ("0.05", "0.005 0.005")])
def test_the_interval_is_lowered_never_raised(value: str | None, want: str) -> None:
    assert _probe(value) == want


@pytest.mark.parametrize("value", ["fast", "-1", "nan"])
def test_a_bad_value_is_refused_with_its_name(value: str) -> None:
    out = _probe(value)
    assert out.startswith("error BROKER_CORE_SWITCH_INTERVAL_S must be seconds") and repr(value) in out
