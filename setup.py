"""The codec's native extension. From a checkout: ``python setup.py build_ext --inplace`` (``make`` does it),
and the project runs with ``PYTHONPATH`` = the repo root. As a package: ``pip install .`` or ``python -m build``
compile it into the wheel, with the metadata, dependencies and console scripts of pyproject.toml ([project]).

The extension is built from its
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
    ext_modules=[Extension("broker_core.codec._native", SOURCES, depends=HEADERS,
                           extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                               "-Wno-missing-field-initializers"])],
)
