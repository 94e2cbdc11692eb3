"""The package as an operator installs it: ``python -m build`` (sdist, then the wheel from it, which compiles the C
codec) of the committed tree, the wheel installed into a fresh virtualenv outside the checkout, and from it the
console scripts: each answers ``--help``, and ``mqnamesrv``, ``mqbroker`` and ``mqadmin`` run a name server, a
broker and admin commands against them. Built once per module (about a minute: the compile and pip)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.cluster import stop_process, wait_until

pytestmark = pytest.mark.integration

SCRIPTS = ("mqnamesrv", "mqbroker", "mqcontroller", "mqadmin", "broker-console")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src"
    src.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    (tmp / "src.tar").write_bytes(archive.stdout)
    with tarfile.open(tmp / "src.tar") as tar:
        tar.extractall(src, filter="data")
    build = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(src)],
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    wheels = list((tmp / "dist").glob("*.whl"))
    assert len(wheels) == 1 and list((tmp / "dist").glob("*.tar.gz")), list((tmp / "dist").iterdir())
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    install = subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", f"{wheels[0]}[console]"],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    yield env_dir


def clean_env(tmp: Path) -> dict[str, str]:
    """No PYTHONPATH and a working directory outside the checkout: only the installed package can be imported; and
    no BROKER_CORE_PURE_PYTHON (make test-pure sets it), so the installed package uses the C codec it compiled."""
    dropped = ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "BROKER_CORE_PURE_PYTHON")
    return {k: v for k, v in os.environ.items() if k not in dropped} | {
        "HOME": str(tmp), "DJANGO_DB_PATH": str(tmp / "console.sqlite3")}


def test_the_wheel_holds_the_compiled_codec_and_every_script_answers_help(venv: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import broker_core, broker_core.codec.native as n; print(broker_core.__file__); "
                            "print(n.NATIVE is not None)"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    where, native = probe.stdout.split()
    assert where.startswith(str(venv)) and native == "True", probe.stdout + probe.stderr
    for script in SCRIPTS:
        out = subprocess.run([str(venv / "bin" / script), "--help"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, f"{script} --help: {out.stdout[-2000:]} {out.stderr[-2000:]}"
        assert out.stdout.strip(), script
    assert "consumerProgress" in subprocess.run([str(venv / "bin" / "mqadmin"), "--help"], cwd=tmp_path, env=env,
                                                capture_output=True, text=True, timeout=120).stdout
    assert "migrate" in subprocess.run([str(venv / "bin" / "broker-console"), "help"], cwd=tmp_path, env=env,
                                       capture_output=True, text=True, timeout=120).stdout


def start(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen, int]:  # type: ignore[type-arg]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=open(log, "ab"))
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("READY port="), f"{cmd}: {line!r} {log.read_text()[-2000:]}"
    return proc, int(line.split()[1].split("=")[1])


def test_installed_name_server_broker_and_mqadmin_work_together(venv: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    bin_dir = venv / "bin"
    ns, ns_port = start([str(bin_dir / "mqnamesrv"), "--listen", "127.0.0.1:0"], tmp_path, env,
                        tmp_path / "namesrv.log")
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-pkg\nmapedFileSizeCommitLog=4194304\nmapedFileSizeConsumeQueue=60000\n"
                    "registerNameServerPeriod=1000\nhaListenPort=0\n")
    broker = None
    try:
        broker, _port = start([str(bin_dir / "mqbroker"), "--store-dir", str(tmp_path / "store"), "--listen",
                               "127.0.0.1:0", "--namesrv", f"127.0.0.1:{ns_port}", "--config", str(conf)],
                              tmp_path, env, tmp_path / "broker.log")

        def mqadmin(*args: str) -> str:
            out = subprocess.run([str(bin_dir / "mqadmin"), *args, "-n", f"127.0.0.1:{ns_port}"], cwd=tmp_path,
                                 env=env, capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            return out.stdout

        wait_until(lambda: "broker-pkg" in mqadmin("clusterList"), timeout=60, what="the broker to register")
        assert "create topic to" in mqadmin("updateTopic", "-c", "DefaultCluster", "-t", "PkgT", "-r", "1", "-w", "1")
        assert "SEND_OK" in mqadmin("sendMessage", "-t", "PkgT", "-p", "from the wheel")
        status = mqadmin("topicStatus", "-t", "PkgT").splitlines()
        assert status[1].split()[:4] == ["broker-pkg", "0", "0", "1"], status
    finally:
        if broker is not None:
            stop_process(broker)
        stop_process(ns)
