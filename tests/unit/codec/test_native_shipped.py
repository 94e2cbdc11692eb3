"""The codec imported from the code zip Spark executors get (``spark_jobs.session.build_code_zip``): it loads the
C extension shipped beside the zip (where ``SparkContext.addFile`` puts it) when the file carries this
interpreter's ABI name, and falls back to pure Python without it, with another ABI's name, with a file that does
not load, and under ``BROKER_CORE_PURE_PYTHON``. Each case is a fresh isolated interpreter that sees only the zip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs.session import build_code_zip, native_extension

PROBE = """
import json, sys, warnings
sys.path.insert(0, sys.argv[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from broker_core.codec import native
    from broker_core.codec.hashing import index_key_hash
print(json.dumps({"impl": native.IMPLEMENTATION, "file": getattr(native.NATIVE, "__file__", None),
                  "codec": native.__file__, "hash": index_key_hash("broker"), "fn": index_key_hash.__module__,
                  "warned": [str(w.message) for w in caught]}))
"""


def _probe(zip_path: Path, pure: bool = False) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "BROKER_CORE_PURE_PYTHON"}
    if pure:
        env["BROKER_CORE_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, "-I", "-c", PROBE, str(zip_path)], cwd=zip_path.parent, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_the_extension_beside_the_zip_is_used_only_when_it_fits(tmp_path: Path) -> None:
    ext = native_extension()
    if ext is None:
        pytest.skip("the codec's extension is not built (make builds it)")
    from broker_core.codec.hashing import index_key_hash

    zip_path = Path(build_code_zip(tmp_path / "code.zip"))
    alone = _probe(zip_path)
    assert alone["impl"] == "pure" and alone["codec"] == str(zip_path / "broker_core" / "codec" / "native.py")
    assert any("not built" in str(w) for w in alone["warned"])  # type: ignore[union-attr]

    other_abi = tmp_path / "_native.cpython-39-x86_64-linux-gnu.so"  # another interpreter's build: not for us
    shutil.copy(ext, other_abi)
    assert _probe(zip_path)["impl"] == "pure"
    other_abi.unlink()

    beside = tmp_path / ext.name
    beside.write_bytes(b"not an ELF file")  # the right name, but it does not load
    broken = _probe(zip_path)
    assert broken["impl"] == "pure" and broken["warned"]

    shutil.copy(ext, beside)
    shipped = _probe(zip_path)
    assert shipped["impl"] == "native" and shipped["file"] == str(beside) and not shipped["warned"]
    assert (shipped["fn"], alone["fn"]) == ("broker_core.codec._native", "broker_core.codec.hashing")  # rebound
    assert shipped["hash"] == alone["hash"] == index_key_hash("broker")
    assert _probe(zip_path, pure=True)["impl"] == "pure"  # the switch still wins
