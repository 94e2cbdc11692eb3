"""Which codec runs: the C extension (``broker_core/codec/_native_c/*.c``, built in place by ``make``) or the
pure-Python functions it mirrors.

``BROKER_CORE_PURE_PYTHON=1`` (any value but empty or ``0``) selects pure Python. Otherwise the extension is
used; if it was never built (``python setup.py build_ext --inplace``), the codec falls back to pure Python and
warns once, so a checkout without a compiler still works, only slower. ``NATIVE`` is the module or None;
tests/unit/codec/test_native.py checks both paths give equal results.

Each codec module keeps its pure function under its public name and rebinds that name to the native one at
import, so callers import one name and get the selected implementation. ``IMPLEMENTATION`` names it
(``"native"`` or ``"pure"``); the Spark jobs report it per split (the executors' codec, see
``spark_jobs/session.py``).

Imported from a zip (how Spark ships this package to executors), the package has no extension inside it (one
cannot be imported from a zip): the extension is then looked for beside the zip, under the name it was built
with (``_native`` + this interpreter's first extension suffix, e.g. ``.cpython-311-x86_64-linux-gnu.so``),
where ``SparkContext.addFile`` (or ``spark-submit --files``) puts it next to the ``addPyFile`` zip. An
interpreter of another ABI looks for another name and finds none; one the file does not load in (another libc)
gets an ImportError: both fall back to pure Python with the warning.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings
from types import ModuleType

PURE_ENV = "BROKER_CORE_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        try:
            import broker_core.codec._native as _native
        except ImportError:
            shipped = _beside_zip()
            if shipped is None:
                raise
            _native = shipped
    except ImportError as exc:
        warnings.warn(f"broker_core's native codec is not built ({exc}); running the pure-Python codec. "
                      "Build it with `python setup.py build_ext --inplace` (make does).", RuntimeWarning,
                      stacklevel=2)
        return None
    return _native


NAME = "broker_core.codec._native"


def _beside_zip() -> ModuleType | None:
    """The extension beside the zip this package was imported from (see the module docstring), loaded as
    ``broker_core.codec._native``; None when the package is not in a zip or no such file is there. Raises
    ImportError when the file is there but does not load."""
    here = os.path.dirname(os.path.abspath(__file__))
    cut = here.find(".zip" + os.sep)
    if cut < 0:
        return None
    path = os.path.join(os.path.dirname(here[:cut + 4]), "_native" + importlib.machinery.EXTENSION_SUFFIXES[0])
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location(NAME, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as {NAME}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    return module


NATIVE: ModuleType | None = _load()
IMPLEMENTATION = "native" if NATIVE is not None else "pure"
