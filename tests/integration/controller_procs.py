"""Controller processes and stand-in brokers for controller-mode tests.

A :class:`FakeBroker` speaks the broker's side of the controller protocol from the test process: it applies for
an id (1012/1013), registers (1003), heartbeats every controller over connections of its own (904, a thread),
and listens on its "broker address" for the controllers' 1008 notifications. Stopping it closes those
connections, as a crashed broker's kernel would.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

from broker_core.protocol import FrameDecoder, RemotingCommand
from broker_core.protocol.controller import (
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ControllerRequestCode,
    GetNextBrokerIdRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from broker_core.remoting.blocking import BlockingClient
from tests.integration.cluster import free_port, start_ready, stop_process

R = ControllerRequestCode


def controller_confs(tmp: Path, n: int = 3, extra: str = "") -> tuple[list[Path], list[str]]:
    """``n`` controller config files on free ports; returns the files and the peer (remoting) addresses."""
    peers = [f"127.0.0.1:{free_port()}" for _ in range(n)]
    raft = [f"127.0.0.1:{free_port()}" for _ in range(n)]
    files = []
    for i in range(n):
        path = tmp / f"controller-n{i}.conf"
        path.write_text(
            "controllerDLegerGroup = group1\n"
            f"controllerDLegerPeers = {';'.join(f'n{j}-{a}' for j, a in enumerate(peers))}\n"
            f"controllerRaftPeers = {';'.join(f'n{j}-{a}' for j, a in enumerate(raft))}\n"
            f"controllerDLegerSelfId = n{i}\n"
            f"controllerStorePath = {tmp / f'store-n{i}'}\n" + extra)
        files.append(path)
    return files, peers


def start_controller(conf: Path, log: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    proc, _ = start_ready(["-m", "broker_core.controller", "--config", str(conf)], log)
    return proc


class FakeBroker:
    def __init__(self, cluster: str, name: str, controllers: list[str], timeout_ms: int = 3000) -> None:
        self.cluster, self.name, self.controllers, self.timeout_ms = cluster, name, controllers, timeout_ms
        self.broker_id: int | None = None
        self.epoch = 0
        self.max_offset = 0
        self.notifications: list[RemotingCommand] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._hb: threading.Thread | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while not self._stop.is_set():
                data = conn.recv(65536)
                if not data:
                    return
                self.notifications.extend(decoder.feed(data))

    def call(self, client: BlockingClient, addr: str, code: int, header: dict[str, str]) -> RemotingCommand:
        return client.invoke(addr, RemotingCommand.request(code, header), 5.0)

    def join(self, client: BlockingClient, leader: str) -> int:
        """1012 + 1013 + 1003 at ``leader``; returns the controller id."""
        nxt = self.call(client, leader, R.CONTROLLER_GET_NEXT_BROKER_ID,
                        GetNextBrokerIdRequestHeader(self.cluster, self.name).to_ext())
        assert nxt.code == 0, nxt.remark
        broker_id = int(nxt.header["nextBrokerId"])
        applied = self.call(client, leader, R.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
            self.cluster, self.name, broker_id, f"{self.addr};{int(time.time() * 1000)}").to_ext())
        assert applied.code == 0, applied.remark
        reg = self.call(client, leader, R.CONTROLLER_REGISTER_BROKER, RegisterBrokerToControllerRequestHeader(
            self.cluster, self.name, broker_id, self.addr).to_ext())
        assert reg.code == 0, reg.remark
        self.broker_id = broker_id
        return broker_id

    def register_namesrv(self, client: BlockingClient, namesrv: str, namesrv_id: int = 0) -> None:
        """REGISTER_BROKER with no topics, so the name server lists this broker-set."""
        body = b'{"filterServerList":[],"topicConfigSerializeWrapper":{"topicConfigTable":{}}}'
        resp = client.invoke(namesrv, RemotingCommand.request(103, {
            "brokerName": self.name, "brokerAddr": self.addr, "clusterName": self.cluster,
            "haServerAddr": self.addr, "brokerId": str(namesrv_id)}, body), 5.0)
        assert resp.code == 0, resp.remark

    def unregister_namesrv(self, client: BlockingClient, namesrv: str, namesrv_id: int = 0) -> None:
        resp = client.invoke(namesrv, RemotingCommand.request(104, {
            "brokerName": self.name, "brokerAddr": self.addr, "clusterName": self.cluster,
            "brokerId": str(namesrv_id)}), 5.0)
        assert resp.code == 0, resp.remark

    def heartbeat_once(self, client: BlockingClient) -> None:
        assert self.broker_id is not None
        header = BrokerHeartbeatRequestHeader(self.cluster, self.addr, self.name, self.broker_id, self.epoch,
                                              self.max_offset, self.max_offset, self.timeout_ms).to_ext()
        for addr in self.controllers:
            try:
                client.invoke(addr, RemotingCommand.request(R.BROKER_HEARTBEAT, header), 2.0)
            except OSError:
                pass  # a controller down: the others still count

    def start_heartbeats(self) -> None:
        def run() -> None:
            client = BlockingClient(connect_timeout=1.0)
            try:
                while not self._stop.is_set():
                    self.heartbeat_once(client)
                    self._stop.wait(0.5)
            finally:
                client.close()  # the connections close: the controllers see the broker inactive at once
        self._hb = threading.Thread(target=run, daemon=True)
        self._hb.start()

    def stop(self) -> None:
        self._stop.set()
        if self._hb is not None:
            self._hb.join(10)
        self._listener.close()


__all__ = ["FakeBroker", "controller_confs", "start_controller", "stop_process"]
