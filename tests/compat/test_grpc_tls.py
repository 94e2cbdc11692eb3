"""The RocketMQ 5 gRPC endpoint over TLS (``grpcTlsCertFile``/``grpcTlsKeyFile``) with a self-signed certificate
made here by openssl for 127.0.0.1: the official Python client (``tls_enable=True``, trusting the certificate
through ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``) sends and receives; a plaintext channel never gets ready."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from broker_core.client import AdminClient
from tests.compat.grpc_cluster import create_group, endpoint, official
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration


def self_signed(tmp: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is missing (make system-packages installs it)")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("grpc-tls")
    cert, key = self_signed(tmp)
    c = Cluster(tmp)
    try:
        c.add_brokers_registered({"broker-a": f"grpcListenPort=0\nautoCreateTopicEnable=false\n"
                                              f"grpcTlsCertFile={cert}\ngrpcTlsKeyFile={key}\n"})
        c.tls_cert = cert  # type: ignore[attr-defined]
        yield c
    finally:
        c.close()


def test_official_client_over_tls_with_a_self_signed_certificate(cluster: Cluster, admin: AdminClient,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    admin.create_topic("GTls", 1, 1, brokers=["broker-a"])
    create_group(cluster, "g-tls")
    monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", str(cluster.tls_cert))  # type: ignore[attr-defined]
    sent = official(cluster, "produce", tls=True, messages=[{"topic": "GTls", "body": f"tls-{i}"} for i in range(3)])
    assert len(sent["results"]) == 3
    got = official(cluster, "receive", tls=True, group="g-tls", topic="GTls", expect=3)["messages"]
    assert sorted(m["body"] for m in got) == ["tls-0", "tls-1", "tls-2"]


def test_the_endpoint_speaks_tls_only(cluster: Cluster) -> None:
    target = endpoint(cluster)
    roots = cluster.tls_cert.read_bytes()  # type: ignore[attr-defined]
    with grpc.secure_channel(target, grpc.ssl_channel_credentials(roots)) as tls:
        grpc.channel_ready_future(tls).result(timeout=30)
    with grpc.insecure_channel(target) as plain, pytest.raises(grpc.FutureTimeoutError):
        grpc.channel_ready_future(plain).result(timeout=3)
