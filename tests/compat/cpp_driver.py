"""The test side of the Apache C++ clients in tests/compat: where their virtualenvs and driver scripts are, the
one-broker cluster most of their tests start, and a driver run (a JSON command in, the last line of stdout out,
as JSON).

- ``.venv-rocketmq``: PyPI ``rocketmq`` 0.4.4, the Apache C++ core its wheel bundles; driver ``cpp_client.py``
  (one command on stdin, or as its argument for the long-running ones).
- ``.venv-rocketmq21``: PyPI ``rocketmq-python-cvs`` 2.1.0.3, the C++ 2.1 core; drivers ``cpp21_client.py`` and
  ``cpp21_trace_client.py``.

Each client runs in its own process and virtualenv (its module name ``rocketmq`` must stay out of ``.venv``);
``make test`` makes both virtualenvs, and a test fails (never skips) when one is missing."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.conftest import ROOT
from tests.integration.cluster import Cluster

HERE = Path(__file__).parent
CPP_PYTHON = ROOT / ".venv-rocketmq" / "bin" / "python"
CPP21_PYTHON = ROOT / ".venv-rocketmq21" / "bin" / "python"
CPP_DRIVER = HERE / "cpp_client.py"


class HasNameServer(Protocol):
    namesrv: str
    tmp: Path


def require(python: Path) -> None:
    """Fail (not skip) the test when a client's virtualenv is missing."""
    if not python.exists():
        venv = python.parents[1].relative_to(ROOT)
        pytest.fail(f"{python} is missing: run `make {venv}/.installed` (make test does)")


def one_broker_cluster(tmp_path_factory: pytest.TempPathFactory, name: str, broker_conf: str,
                       python: Path = CPP_PYTHON) -> Iterator[Cluster]:
    """A name server and one registered broker ``broker-a`` with ``broker_conf``, for a module's fixture
    (``yield from``); fails first when ``python``'s virtualenv is missing."""
    require(python)
    c = Cluster(tmp_path_factory.mktemp(name))
    try:
        c.add_brokers_registered({"broker-a": broker_conf})
        yield c
    finally:
        c.close()


def clean_env(home: Path) -> dict[str, str]:
    """A bare environment for the C++ 2.1 core, which writes its logs under ``$HOME``."""
    return {"HOME": str(home), "PATH": "/usr/bin:/bin"}


def last_json(stdout: bytes) -> dict[str, Any]:
    """A driver's answer: the last line it printed, as JSON (the C++ core may print before it)."""
    answer: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return answer


def run_driver(python: Path, driver: Path, cmd: dict[str, Any], cwd: Path, *, timeout: float = 120,
               env: dict[str, str] | None = None, what: str = "C++ client") -> dict[str, Any]:
    """Run ``driver`` with ``cmd`` on its stdin to the end; its answer (it must exit 0)."""
    proc = subprocess.run([str(python), str(driver)], input=json.dumps(cmd).encode(), capture_output=True,
                          timeout=timeout, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{what} failed: {proc.stderr.decode()[-3000:]}"
    return last_json(proc.stdout)


def cpp(cluster: HasNameServer, op: str, timeout: float = 120, **cmd: Any) -> dict[str, Any]:
    """Run one ``cpp_client.py`` command (the 0.4.4 client) against ``cluster``'s name server; its JSON answer."""
    return run_driver(CPP_PYTHON, CPP_DRIVER, {"op": op, "namesrv": cluster.namesrv, **cmd}, cluster.tmp,
                      timeout=timeout, what=f"C++ client {op}")


def spec(topic: str, body: bytes, **kw: Any) -> dict[str, Any]:
    """A message for the driver (its body in base64)."""
    return {"topic": topic, "body": base64.b64encode(body).decode(), **kw}


def body_of(m: dict[str, Any]) -> bytes:
    return base64.b64decode(m["body"])
