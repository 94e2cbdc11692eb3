"""Builds the codec's native extension in place: ``python setup.py build_ext --inplace`` (``make`` does it).

The project runs from its checkout (``PYTHONPATH`` = the repo root), so the extension is built next to its
source, ``broker_core/codec/_native.c``, with the machine's gcc and Python headers; nothing else is needed.
``BROKER_CORE_PURE_PYTHON=1`` runs the pure-Python codec instead (see broker_core/codec/native.py).
"""

from setuptools import Extension, setup

setup(
    name="broker-core-native",
    version="0.1.0",
    packages=[],
    ext_modules=[Extension("broker_core.codec._native", ["broker_core/codec/_native.c"],
                           extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                               "-Wno-missing-field-initializers"])],
)
