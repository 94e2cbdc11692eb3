"""Hosts of one machine for the multi-host suites: network namespaces joined by veth pairs to a bridge in a
namespace of its own, with addresses only inside them (nothing reaches outside this machine)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def bridged_hosts(prefix: str, net: str, hosts: dict[str, int]) -> Iterator[dict[str, str]]:
    """One namespace per host (``<prefix><pid><host>``), host ``h`` at ``<net>.<hosts[h]>/24`` on a bridge in the
    namespace ``sw``; yields host -> namespace name (with ``sw``) and deletes them all after. Skips the test without
    root or iproute2, or where namespaces cannot be made."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2's ip")
    tag = f"{prefix}{os.getpid() % 100000}"
    names = {h: f"{tag}{h}" for h in [*hosts, "sw"]}
    made: list[str] = []
    try:
        for name in names.values():
            ip("netns", "add", name)
            made.append(name)
        sw = names["sw"]
        ip("-n", sw, "link", "add", "br0", "type", "bridge")
        ip("-n", sw, "link", "set", "br0", "up")
        for host, n in hosts.items():
            ns, veth, peer = names[host], f"{tag}{host}0", f"{tag}{host}1"
            ip("link", "add", veth, "type", "veth", "peer", "name", peer)
            ip("link", "set", veth, "netns", ns)
            ip("link", "set", peer, "netns", sw)
            ip("-n", sw, "link", "set", peer, "master", "br0", "up")
            ip("-n", ns, "addr", "add", f"{net}.{n}/24", "dev", veth)
            ip("-n", ns, "link", "set", veth, "up")
            ip("-n", ns, "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, OSError) as exc:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        pytest.skip(f"cannot create network namespaces here: {getattr(exc, 'stderr', exc)!r}")
    try:
        yield names
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
