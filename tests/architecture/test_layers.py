"""The layering of DESIGN.md, enforced by import-linter contracts in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "broken" in out.stdout and "0 broken" in out.stdout


def test_codec_uses_only_the_standard_library():
    allowed = set(sys.stdlib_module_names) | {"broker_core"}
    for path in (ROOT / "broker_core" / "codec").glob("*.py"):
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1:
                top = words[1].split(".")[0]
                assert top in allowed or top == "__future__", f"{path.name}: {line}"
