"""AdminClient's operator calls as ``mqadmin`` makes them: subscription groups, connections, a consumer's running
info, broker write permission on the name servers, store maintenance, broker stats and the ACL 1.0 codes (50-53).

Each method sends one RocketMQ request code to one address and answers the decoded body; a refusal raises
:class:`ClientError` with the response code (``REQUEST_CODE_NOT_SUPPORTED`` when the peer does not serve the code).
:meth:`request` is the way to any other code."""

from __future__ import annotations

import json
from typing import Any

from broker_core.client.admin_base import AdminBase
from broker_core.client.message import ClientError
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.bodies import loads_fastjson


class OpsAdminMixin(AdminBase):
    def request(self, addr: str, code: int, header: dict[str, Any] | None = None, body: bytes = b"",
                ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """Any request ``code`` to the broker at ``addr``; the response, or ClientError for a code not in ``ok``."""
        return self._run(self._call(addr, code, header, body, ok))

    @property
    def namesrv_addrs(self) -> list[str]:
        return list(self.instance.namesrv_addrs)

    # ------------------------------------------------------------------ subscription groups
    def update_subscription_group(self, addr: str, config: dict[str, Any]) -> None:
        """200: create or update the group; ``config`` is a ``SubscriptionGroupConfig`` (camelCase keys)."""
        self.request(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(config).encode())

    def delete_subscription_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        """207 (``removeOffset`` as 5.x sends it; 4.9 brokers ignore it)."""
        self.request(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": group, "removeOffset": remove_offset})

    # ------------------------------------------------------------------ connections
    def consumer_connection(self, addr: str, group: str) -> dict[str, Any] | None:
        """203: the ``ConsumerConnection`` body; None when no member is online (206)."""
        async def go() -> dict[str, Any] | None:
            resp = await self._call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                                    ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
            return dict(json.loads(resp.body)) if resp.code == ResponseCode.SUCCESS else None
        return self._run(go())

    def producer_connection(self, addr: str, group: str) -> dict[str, Any]:
        """204: the ``ProducerConnection`` body (``connectionSet``)."""
        resp = self.request(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
        return dict(json.loads(resp.body))

    def consumer_running_info(self, addr: str, group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
        """307: the client's ``ConsumerRunningInfo``, forwarded by the broker at ``addr``."""
        resp = self.request(addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                            {"consumerGroup": group, "clientId": client_id, "jstackEnable": jstack})
        return dict(loads_fastjson(resp.body))

    def topic_consumed_by(self, addr: str, topic: str) -> list[str]:
        """300: the groups holding offsets of ``topic`` on that broker."""
        resp = self.request(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        return sorted(str(g) for g in loads_fastjson(resp.body).get("groupList") or [])

    # ------------------------------------------------------------------ name servers
    def _perm_on_each_namesrv(self, code: int, broker_name: str, count_field: str) -> dict[str, int | ClientError]:
        out: dict[str, int | ClientError] = {}
        for ns in self.namesrv_addrs:
            try:
                resp = self.request(ns, code, {"brokerName": broker_name})
                out[ns] = int(resp.header.get(count_field, 0))
            except ClientError as exc:
                out[ns] = exc
        return out

    def wipe_write_perm(self, broker_name: str) -> dict[str, int | ClientError]:
        """205 to every name server: ``{namesrv: topics changed}`` (or the error that name server answered)."""
        return self._perm_on_each_namesrv(RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount")

    def add_write_perm(self, broker_name: str) -> dict[str, int | ClientError]:
        """327 to every name server, as :meth:`wipe_write_perm`."""
        return self._perm_on_each_namesrv(RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount")

    # ------------------------------------------------------------------ store maintenance and stats
    def clean_expired_consume_queue(self, addr: str) -> bool:
        """306 CLEAN_EXPIRED_CONSUMEQUEUE."""
        return self.request(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE).code == ResponseCode.SUCCESS

    def delete_expired_commit_log(self, addr: str) -> bool:
        """329 DELETE_EXPIRED_COMMITLOG."""
        return self.request(addr, RequestCode.DELETE_EXPIRED_COMMITLOG).code == ResponseCode.SUCCESS

    def view_broker_stats(self, addr: str, stats_name: str, stats_key: str) -> dict[str, Any]:
        """315 VIEW_BROKER_STATS_DATA: ``BrokerStatsData`` (``statsMinute``/``statsHour``/``statsDay``)."""
        resp = self.request(addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": stats_name, "statsKey": stats_key})
        return dict(loads_fastjson(resp.body))

    # ------------------------------------------------------------------ ACL 1.0
    def update_acl_config(self, addr: str, account: dict[str, Any]) -> None:
        """50: ``account`` holds ``CreateAccessConfigRequestHeader`` fields (accessKey, secretKey, ...)."""
        self.request(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, account)

    def delete_acl_config(self, addr: str, access_key: str) -> None:
        """51."""
        self.request(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})

    def acl_version_info(self, addr: str) -> dict[str, Any]:
        """52: the response header (``version``, ``allAclFileVersion`` as JSON text, brokerName, brokerAddr,
        clusterName)."""
        return dict(self.request(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO).header)

    def update_global_white_addrs(self, addr: str, addrs: str, acl_file: str | None = None) -> None:
        """53: ``addrs`` comma separated; ``acl_file`` None means the broker's main file."""
        header: dict[str, Any] = {"globalWhiteAddrs": addrs}
        if acl_file:
            header["aclFileFullPath"] = acl_file
        self.request(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)
