"""AdminClient's ACL 1.0 administration, one broker at a time or every broker of a cluster (masters and slaves,
as rocketmq-dashboard applies accounts), with each broker's own answer:

- :meth:`~AclAdminMixin.acl_brokers`: ``{address: brokerName}`` of every broker (every brokerId) of a cluster;
- :meth:`~AclAdminMixin.acl_config`: 54 GET_BROKER_CLUSTER_ACL_CONFIG (accounts with secrets, global white list);
- :meth:`~AclAdminMixin.acl_version`: 52 GET_BROKER_CLUSTER_ACL_INFO (``dataVersion`` counter and time, file);
- :meth:`~AclAdminMixin.acl_update_account` (50), :meth:`~AclAdminMixin.acl_delete_account` (51),
  :meth:`~AclAdminMixin.acl_set_global_white` (53).

The ``*_everywhere`` forms return ``{address: None | error text}``: one broker refusing does not stop the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from broker_core.client.admin_base import AdminBase
from broker_core.client.message import ClientError
from broker_core.protocol import RequestCode


class AclAdminMixin(AdminBase):
    def acl_brokers(self, cluster: str | None = None) -> dict[str, str]:
        """``{address: brokerName}`` of every broker (masters and slaves) of ``cluster`` (every cluster: None)."""
        async def go() -> dict[str, str]:
            info = await self._cluster()
            out = {}
            for name, data in sorted(info.get("brokerAddrTable", {}).items()):
                if cluster is None or data.get("cluster") == cluster:
                    for _bid, addr in sorted(data.get("brokerAddrs", {}).items()):
                        out[str(addr)] = name
            return out
        return self._run(go())

    def acl_config(self, addr: str) -> dict[str, Any]:
        """54: ``{"globalWhiteAddrs": [..], "plainAccessConfigs": [{accessKey, secretKey, ...}]}``."""
        resp = self._run(self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG))
        return dict(json.loads(resp.body))

    def acl_version(self, addr: str) -> dict[str, Any]:
        """52: ``{"counter", "timestamp", "file", "brokerName", "brokerAddr", "clusterName"}``."""
        h = self._run(self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)).header
        files = json.loads(h.get("allAclFileVersion") or "{}")
        version = json.loads(h.get("version") or "{}")
        return {"counter": int(version.get("counter", 0)), "timestamp": int(version.get("timestamp", 0)),
                "file": next(iter(files), None), "brokerName": h.get("brokerName"), "brokerAddr": h.get("brokerAddr"),
                "clusterName": h.get("clusterName")}

    def acl_update_account(self, addr: str, account: dict[str, Any]) -> None:
        """50: ``account`` holds CreateAccessConfigRequestHeader fields (accessKey, secretKey, whiteRemoteAddress,
        admin, defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms as CSV ``res=PERM``)."""
        header = {k: ("true" if v is True else "false" if v is False else str(v))
                  for k, v in account.items() if v is not None}
        self._run(self._call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header))

    def acl_delete_account(self, addr: str, access_key: str) -> None:
        """51."""
        self._run(self._call(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key}))

    def acl_set_global_white(self, addr: str, patterns: list[str]) -> None:
        """53 with no file path (the broker's own file)."""
        self._run(self._call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                             {"globalWhiteAddrs": ",".join(patterns)}))

    def acl_everywhere(self, addrs: list[str], op: Callable[[str], None]) -> dict[str, str | None]:
        """``op(addr)`` on each address: ``{addr: None}`` where it worked, the error text where it did not."""
        out: dict[str, str | None] = {}
        for addr in addrs:
            try:
                op(addr)
                out[addr] = None
            except (ClientError, ConnectionError, TimeoutError) as exc:
                out[addr] = str(exc) or type(exc).__name__
        return out
