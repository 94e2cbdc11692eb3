"""AdminClient's plumbing: the shared ClientInstance, request helpers and broker lookups (see ``admin.py``)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Self, TypeVar

from broker_core.client.instance import ClientInstance, decode_cluster_info, shared_instance
from broker_core.client.message import ClientError
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials
from broker_core.remoting.client import run_sync

T = TypeVar("T")


class AdminBase:
    def __init__(self, namesrv_addr: str, *, timeout: float = 5.0, instance: ClientInstance | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        """``credentials``: the ACL account every request is signed with (an admin account for topic and group
        changes on brokers with ``aclEnable``); with ``instance``, the instance's own are used."""
        self.instance = shared_instance(instance, namesrv_addr, credentials)
        self.timeout = timeout

    def start(self) -> Self:
        run_sync(self.instance.start())
        return self

    def shutdown(self) -> None:
        run_sync(self.instance.shutdown())

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ plumbing
    async def _call(self, addr: str, code: int, header: dict[str, Any] | None = None, body: bytes = b"",
                    ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        resp = await self.instance.invoke(addr, RemotingCommand.request(code, header or {}, body), self.timeout)
        if resp.code not in ok:
            raise ClientError(resp.code, resp.remark or f"request {code} failed")
        return resp

    async def _ns(self, code: int, header: dict[str, Any] | None = None) -> RemotingCommand:
        resp = await self.instance.invoke_namesrv(RemotingCommand.request(code, header or {}), self.timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)
        return resp

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return run_sync(coro)

    async def _cluster(self) -> dict[str, Any]:  # ClusterInfo, brokerAddrs keyed "0".. even from a Java namesrv
        return decode_cluster_info((await self._ns(RequestCode.GET_BROKER_CLUSTER_INFO)).body)

    async def _master_addrs(self, cluster: str | None = None, brokers: list[str] | None = None) -> dict[str, str]:
        info = await self._cluster()
        out = {}
        for name, data in info.get("brokerAddrTable", {}).items():
            if (cluster is None or data.get("cluster") == cluster) and (brokers is None or name in brokers):
                addr = data.get("brokerAddrs", {}).get("0")
                if addr:
                    out[name] = addr
                    self.instance.broker_addrs[name] = addr
        return out

    async def _topic_brokers(self, topic: str) -> dict[str, str]:
        route = await self.instance.route(topic, refresh=True)
        return {b["brokerName"]: b["brokerAddrs"]["0"] for b in route.broker_datas if "0" in b.get("brokerAddrs", {})}
