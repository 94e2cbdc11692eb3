"""Builds the codec's native extension in place: ``python setup.py build_ext --inplace`` (``make`` does it).

The project runs from its checkout (``PYTHONPATH`` = the repo root), so the extension is built next to its
sources, the C files of ``broker_core/codec/_native_c/`` (one module, ``broker_core.codec._native``: one file per
concern, ``_native.c`` the module's init, ``_native.h`` what they share), with the machine's gcc and Python headers;
nothing else is needed.
``BROKER_CORE_PURE_PYTHON=1`` runs the pure-Python codec instead (see broker_core/codec/native.py).
"""

from glob import glob

from setuptools import Extension, setup

SOURCES = sorted(glob("broker_core/codec/_native_c/*.c"))
HEADERS = sorted(glob("broker_core/codec/_native_c/*.h"))  # a changed header rebuilds every file

setup(
    name="broker-core-native",
    version="0.1.0",
    packages=[],
    ext_modules=[Extension("broker_core.codec._native", SOURCES, depends=HEADERS,
                           extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                               "-Wno-missing-field-initializers"])],
)
