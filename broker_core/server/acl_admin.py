"""ACL 1.0 administration (RocketMQ's ``AdminBrokerProcessor`` codes 50-54), each broker editing its own
``plain_acl.yml`` (:mod:`broker_core.server.acl_file`: validated, atomic, ``dataVersion`` bumped) and reloading
it at once:

================================== ======================================================================
50 UPDATE_AND_CREATE_ACL_CONFIG     header ``accessKey, secretKey, whiteRemoteAddress, admin, defaultTopicPerm,
                                    defaultGroupPerm, topicPerms, groupPerms`` (CSV ``res=PERM``); 0, or 209
                                    with the reason
51 DELETE_ACL_CONFIG                ``accessKey``; 0, or 210 (also for an unknown key)
52 GET_BROKER_CLUSTER_ACL_INFO      response header ``version`` (DataVersion JSON), ``allAclFileVersion``
                                    (JSON {path: DataVersion}), ``brokerName``, ``brokerAddr``, ``clusterName``
53 UPDATE_GLOBAL_WHITE_ADDRS_CONFIG ``globalWhiteAddrs`` (CSV), ``aclFileFullPath`` (absent or blank: the broker's
                                    file, as a compatible broker should take mqadmin's null); 0, or 211
54 GET_BROKER_CLUSTER_ACL_CONFIG    body ``{"globalWhiteAddrs":[..],"plainAccessConfigs":[..]}``
================================== ======================================================================

With ``aclEnable=false`` every code answers SYSTEM_ERROR ``The broker does not enable acl.`` (RocketMQ 5.3.1's
answer; 4.9 has no validator then and leaves 52/54 unanswered). Who may call them is the validator's business
(:mod:`broker_core.server.acl`: admin accounts only, see ``ADMIN_CODES``).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.server import Connection, Handler
from broker_core.server.acl_config import AclConfigError
from broker_core.server.acl_file import (
    cluster_acl_config,
    data_version,
    delete_account,
    read_doc,
    set_global_white,
    update_account,
    write_doc,
)

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

log = logging.getLogger(__name__)

UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
DELETE_ACL_CONFIG_FAILED = 210
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
NOT_ENABLED = "The broker does not enable acl."


def _version_json(v: dict[str, int]) -> dict[str, int]:
    """RocketMQ's ``DataVersion`` as fastjson writes it."""
    return {"counter": v["counter"], "stateVersion": 0, "timestamp": v["timestamp"]}


class AclAdminProcessor:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_account,
                RequestCode.DELETE_ACL_CONFIG: self.delete_account,
                RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.version_info,
                RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
                RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: self.config}

    @property
    def enabled(self) -> bool:
        return bool(self.ctl.config.acl.acl_enable)

    def _write(self, doc: dict[str, Any]) -> None:
        """Write the edited document and load it into the validator at once."""
        write_doc(self.ctl.acl.path, doc)
        self.ctl.acl.load()

    def _edit(self, cmd: RemotingCommand, failed: int, edit: Any) -> RemotingCommand:
        if not self.enabled:
            return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        try:
            doc = edit(read_doc(self.ctl.acl.path))
            if doc is None:
                return cmd.response(failed, f"No acl config for {cmd.header.get('accessKey')}")
            self._write(doc)
        except (AclConfigError, OSError, ValueError) as exc:
            log.warning("ACL admin request %d refused: %s", cmd.code, exc)
            return cmd.response(failed, str(exc))
        log.info("ACL file %s changed by request %d", self.ctl.acl.path, cmd.code)
        return cmd.response(ResponseCode.SUCCESS)

    def update_account(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return self._edit(cmd, UPDATE_AND_CREATE_ACL_CONFIG_FAILED, lambda doc: update_account(doc, cmd.header))

    def delete_account(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        key = str(cmd.header.get("accessKey") or "")
        return self._edit(cmd, DELETE_ACL_CONFIG_FAILED, lambda doc: delete_account(doc, key))

    def update_global_white(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        target = str(cmd.header.get("aclFileFullPath") or "").strip()
        if target and self.enabled and target != str(self.ctl.acl.path):
            return cmd.response(UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                f"{target} is not this broker's ACL file ({self.ctl.acl.path})")
        addrs = str(cmd.header.get("globalWhiteAddrs") or "")
        return self._edit(cmd, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, lambda doc: set_global_white(doc, addrs))

    def version_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        if not self.enabled:
            return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        version = _version_json(data_version(read_doc(self.ctl.acl.path)))
        cfg = self.ctl.config
        return cmd.response(ResponseCode.SUCCESS, header={
            "version": json.dumps(version, separators=(",", ":")),
            "allAclFileVersion": json.dumps({str(self.ctl.acl.path): version}, separators=(",", ":")),
            "brokerName": cfg.broker_name, "brokerAddr": self.ctl.broker_addr, "clusterName": cfg.broker_cluster_name})

    def config(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        if not self.enabled:
            return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        body = cluster_acl_config(read_doc(self.ctl.acl.path))
        body["plainAccessConfigs"] = [{k: v for k, v in a.items() if v is not None} for a in body["plainAccessConfigs"]]
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode())
