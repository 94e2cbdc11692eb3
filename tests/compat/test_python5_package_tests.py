"""The RocketMQ 5 Python client's own tests, as published: ``rocketmq.v5.test`` in PyPI's
``rocketmq-python-client`` 5.1.2 (the wheel and the sdist ship the same three files; upstream has no other
Python tests). None of them talks to a server: they patch the RPC layer and check what the client would send
(``test_consumer``: receive; ``test_producer``: send, delay, FIFO, priority, async, transaction, recall). They
run unchanged here, in their own process with a temporary HOME (the client writes its log under it), so a
change of the pinned client that breaks its own expectations shows. What the client does against this broker's
gRPC endpoint is checked by ``test_grpc_producer.py``, ``test_grpc_consumer.py`` and ``test_body_digest.py``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

MODULES = ("rocketmq.v5.test.test_consumer", "rocketmq.v5.test.test_producer")


def test_the_published_python_client_tests_pass_unchanged(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("PYTHONPATH", None)  # only the installed package
    proc = subprocess.run([sys.executable, "-m", "unittest", "-v", *MODULES], capture_output=True, timeout=300,
                          cwd=tmp_path, env=env)
    out = proc.stderr.decode()
    assert proc.returncode == 0, out[-4000:]
    ran = re.search(r"Ran (\d+) tests?", out)
    assert ran and int(ran.group(1)) == 8, out[-4000:]  # test_receive + seven producer tests
    assert out.rstrip().endswith("OK"), out[-4000:]
