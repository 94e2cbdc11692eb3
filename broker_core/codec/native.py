"""Which codec runs: the C extension (``broker_core/codec/_native.c``, built in place by ``make``) or the
pure-Python functions it mirrors.

``BROKER_CORE_PURE_PYTHON=1`` (any value but empty or ``0``) selects pure Python. Otherwise the extension is
used; if it was never built (``python setup.py build_ext --inplace``), the codec falls back to pure Python and
warns once, so a checkout without a compiler still works, only slower. ``NATIVE`` is the module or None;
tests/unit/codec/test_native.py checks both paths give equal results.

Each codec module keeps its pure function under its public name and rebinds that name to the native one at
import, so callers import one name and get the selected implementation.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

PURE_ENV = "BROKER_CORE_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        import broker_core.codec._native as _native
    except ImportError as exc:
        warnings.warn(f"broker_core's native codec is not built ({exc}); running the pure-Python codec. "
                      "Build it with `python setup.py build_ext --inplace` (make does).", RuntimeWarning,
                      stacklevel=2)
        return None
    return _native


NATIVE: ModuleType | None = _load()
