"""The SparkSession the jobs use, configured from the environment.

- ``SPARK_MASTER``: the master URL (default: ``spark-submit``'s ``--master`` when launched by it, else ``local[*]``;
  ``spark://host:7077``, ``yarn``, ``k8s://...``).
- ``SPARK_APP_NAME`` (default ``broker_core-jobs``), ``SPARK_DRIVER_MEMORY``, ``SPARK_EXECUTOR_MEMORY``,
  ``SPARK_EXECUTOR_CORES``, ``SPARK_SQL_SHUFFLE_PARTITIONS``: the usual settings by name.
- ``SPARK_CONF_<ANYTHING>=key=value``: any other Spark setting, e.g.
  ``SPARK_CONF_1="spark.ui.enabled=false"``.
- ``SPARK_SHIP_CODE``: ``1`` to ship ``broker_core/codec`` + ``spark_jobs`` to executors as a zip
  (``addPyFile``); on by default for a non-local master. Under ``spark-submit`` pass the zip with
  ``--py-files`` instead (``python -m spark_jobs.session --zip dist/jobs.zip`` builds it).

The codec's C extension cannot be imported from a zip: when it is built here (``make``), shipping the code also
ships the extension file (``addFile``), which executors find beside the zip (``broker_core/codec/native.py``)
and load when their Python has the same ABI; others run the pure-Python codec. Under ``spark-submit`` pass it
with ``--files`` (``--zip`` prints its path on a second line). Each job's summary names the codec its splits
were decoded with where they ran (``codecs``).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_NAMED = {
    "SPARK_DRIVER_MEMORY": "spark.driver.memory",
    "SPARK_EXECUTOR_MEMORY": "spark.executor.memory",
    "SPARK_EXECUTOR_CORES": "spark.executor.cores",
    "SPARK_SQL_SHUFFLE_PARTITIONS": "spark.sql.shuffle.partitions",
}


def conf_from_env(env: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """``(master, settings)`` from the environment."""
    env = os.environ if env is None else env
    master = env.get("SPARK_MASTER") or "local[*]"
    conf: dict[str, str] = {}
    for name, key in _NAMED.items():
        if env.get(name):
            conf[key] = env[name]
    for name, value in sorted(env.items()):
        if name.startswith("SPARK_CONF_") and "=" in value:
            k, _, v = value.partition("=")
            conf[k.strip()] = v.strip()
    return master, conf


def build_code_zip(path: str | os.PathLike[str] | None = None) -> str:
    """A zip of ``broker_core/__init__.py``, ``broker_core/errors.py``, ``broker_core/codec`` and ``spark_jobs``:
    all executors need (tests/spark/test_standalone_cluster.py runs executors that have nothing else)."""
    if path is None:
        fd, tmp = tempfile.mkstemp(prefix="spark_jobs-", suffix=".zip")
        os.close(fd)
        path = tmp
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(ROOT / "broker_core" / "__init__.py", "broker_core/__init__.py")
        zf.write(ROOT / "broker_core" / "errors.py", "broker_core/errors.py")  # the codec's CodecError lives here
        for pkg in (ROOT / "broker_core" / "codec", ROOT / "spark_jobs"):
            for f in sorted(pkg.rglob("*.py")):
                zf.write(f, str(f.relative_to(ROOT)))
    return str(path)


def native_extension() -> Path | None:
    """The codec's extension as built in this checkout for this interpreter (``broker_core/codec/_native`` + its
    extension suffix), or None when it is not built."""
    path = ROOT / "broker_core" / "codec" / ("_native" + importlib.machinery.EXTENSION_SUFFIXES[0])
    return path if path.is_file() else None


def build_session(app_name: str | None = None, master: str | None = None,
                  conf: Mapping[str, str] | None = None, ship_code: bool | None = None) -> Any:
    """Get or create the SparkSession (the environment first, then ``master``/``conf`` override it)."""
    from pyspark.sql import SparkSession

    env_master, env_conf = conf_from_env()
    # launched by spark-submit (it hands the driver its JVM's port): its --master is the user's choice
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT")) and not master and not os.environ.get("SPARK_MASTER")
    master = master or env_master
    settings = {**env_conf, **(conf or {})}
    if master.startswith("local") and not submitted:
        # local workers must run this interpreter (it has the codec on its path), not whatever python3 is
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name or os.environ.get("SPARK_APP_NAME") or "broker_core-jobs")
    if not submitted:
        builder = builder.master(master)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    master = str(spark.sparkContext.master)
    if ship_code is None:
        ship_code = os.environ.get("SPARK_SHIP_CODE", "") == "1" or not master.startswith("local")
    if ship_code and not getattr(spark.sparkContext, "_broker_core_shipped", False):
        spark.sparkContext.addPyFile(build_code_zip())
        extension = native_extension()
        if extension is not None:  # lands beside the zip on executors (see the module docstring)
            spark.sparkContext.addFile(str(extension))
        setattr(spark.sparkContext, "_broker_core_shipped", True)  # noqa: B010 (our marker, not a Spark attribute)
    return spark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spark_jobs.session",
                                 description="Build the zip of code executors need (for spark-submit --py-files); "
                                             "prints its path, then the codec's extension to pass with --files "
                                             "when it is built.")
    ap.add_argument("--zip", required=True, help="where to write the zip")
    args = ap.parse_args(argv)
    print(build_code_zip(args.zip))
    extension = native_extension()
    if extension is not None:
        print(extension)
    return 0


if __name__ == "__main__":
    sys.exit(main())
