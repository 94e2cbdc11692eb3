"""The broker's name-server requests, as a 4.9 broker's ``BrokerOuterAPI`` builds them (reference §2.2), plus
this product's cluster-secret proof: pure functions of the broker's config and topic table."""

from __future__ import annotations

import logging
import struct
import time
import zlib
from typing import Any

from broker_core.codec.fastjson import FastjsonPairs, dumps_fastjson, items, loads_fastjson
from broker_core.config import BrokerConfig
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import sign_registration
from broker_core.server.state import TopicConfigManager

log = logging.getLogger(__name__)


def header(config: BrokerConfig, broker_addr: str) -> dict[str, object]:
    """The broker identity every name-server request carries (UNREGISTER_BROKER's whole header)."""
    return {"brokerName": config.broker_name, "brokerAddr": broker_addr,
            "clusterName": config.broker_cluster_name, "brokerId": config.broker_id}


def topic_config_wrapper(topics: TopicConfigManager, state_version: int | None = None) -> dict[str, Any]:
    """RocketMQ 4.9's ``TopicConfigSerializeWrapper`` of ``topics`` (reference §7.5):
    ``{"dataVersion":{"counter","timestamp"},"topicConfigTable":{name: TopicConfig}}``, every TopicConfig with the
    seven 4.x keys. Built here from the table so the name server sees the same shape whatever the topic manager's
    own encoder does."""
    table = topics.table
    configs = {}
    for name in sorted(table):
        cfg = table[name]
        configs[name] = {
            "order": bool(cfg.order), "perm": int(cfg.perm), "readQueueNums": int(cfg.read_queue_nums),
            "topicFilterType": str(cfg.topic_filter_type or "SINGLE_TAG"), "topicName": name,
            "topicSysFlag": int(cfg.topic_sys_flag or 0), "writeQueueNums": int(cfg.write_queue_nums)}
    # RocketMQ 5 controller mode: DataVersion.stateVersion = the master epoch
    return {"dataVersion": data_version(topics, state_version), "topicConfigTable": configs}


def data_version(topics: TopicConfigManager, state_version: int | None = None) -> dict[str, int]:
    """The topic table's ``DataVersion`` as fastjson writes it (``counter``, [``stateVersion``], ``timestamp``)."""
    version: dict[str, int] = {"counter": int(topics.data_version)}
    if state_version is not None:
        version["stateVersion"] = int(state_version)
    version["timestamp"] = int(topics.data_version_ts)
    return version


def compressed_body(topics: TopicConfigManager, state_version: int | None = None) -> bytes:
    """``RegisterBrokerBody.encode(true)`` (RocketMQ 4.9): deflated at level 9, ``[i32 n][DataVersion JSON]``,
    ``[i32 count]``, per topic ``[i32 n]["topicName readQueueNums writeQueueNums perm topicFilterType"]``
    (``TopicConfig.encode``), ``[i32 n][filterServerList JSON]``; lengths big-endian. ``order`` and
    ``topicSysFlag`` are not in this form (the name server reads them as false/0, as upstream)."""
    table = topics.table
    parts = [_framed(dumps_fastjson(data_version(topics, state_version)).encode()), struct.pack(">i", len(table))]
    for name in sorted(table):
        cfg = table[name]
        parts.append(_framed(f"{name} {int(cfg.read_queue_nums)} {int(cfg.write_queue_nums)} {int(cfg.perm)} "
                             f"{cfg.topic_filter_type or 'SINGLE_TAG'}".encode()))
    parts.append(_framed(b"[]"))
    return zlib.compress(b"".join(parts), 9)


def _framed(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def request(config: BrokerConfig, broker_addr: str, topics: TopicConfigManager, ha_server_addr: str,
            state_version: int | None = None) -> RemotingCommand:
    """REGISTER_BROKER exactly as a 4.9 broker's ``BrokerOuterAPI.registerBrokerAll`` sends it: header
    ``brokerName, brokerAddr, clusterName, haServerAddr, brokerId, compressed, bodyCrc32`` and body
    ``RegisterBrokerBody`` ``{"filterServerList":[],"topicConfigSerializeWrapper":{...}}`` (compact fastjson), or
    with ``compressedRegister`` its deflated form (:func:`compressed_body`); ``bodyCrc32`` = crc32(body) &
    0x7FFFFFFF of the bytes sent; ``haServerAddr`` is ``brokerIP2:haListenPort``."""
    compressed = bool(config.compressed_register)
    if compressed:
        body = compressed_body(topics, state_version)
    else:
        body = dumps_fastjson({"filterServerList": [],
                               "topicConfigSerializeWrapper": topic_config_wrapper(topics, state_version)}).encode()
    head = {**header(config, broker_addr), "haServerAddr": ha_server_addr, "compressed": compressed,
            "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, head, body)


def query_data_version(config: BrokerConfig, broker_addr: str, version: dict[str, int]) -> RemotingCommand:
    """QUERY_DATA_VERSION (322) as ``BrokerOuterAPI.needRegister`` sends it: header ``brokerName, brokerAddr,
    clusterName, brokerId``, body the broker's topic ``DataVersion``."""
    return RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, header(config, broker_addr),
                                   dumps_fastjson(version).encode())


def name_server_changed(resp: RemotingCommand, version: dict[str, int]) -> bool:
    """Whether a QUERY_DATA_VERSION answer asks for a full registration (upstream ``needRegister``): not SUCCESS,
    ``changed`` true or absent, or a DataVersion body whose counter or timestamp differs from ``version``."""
    if resp.code != ResponseCode.SUCCESS:
        return True
    if str(resp.header.get("changed", "true")).lower() != "false":
        return True
    if resp.body:
        try:
            held = loads_fastjson(resp.body)
        except (UnicodeDecodeError, ValueError):
            return True
        if not isinstance(held, dict):
            return True
        try:
            return (int(str(held.get("counter"))), int(str(held.get("timestamp")))) != (
                version["counter"], version["timestamp"])
        except ValueError:
            return True
    return False


def signed(cmd: RemotingCommand, cluster_secret: str) -> RemotingCommand:
    """``cmd`` with the cluster-secret proof when ``clusterSecret`` is set (name servers started with a secret
    refuse registrations without it; others, Java's too, ignore the extra fields)."""
    if cluster_secret:
        sign_registration(cmd, cluster_secret, int(time.time() * 1000))
    return cmd

def kv_table(body: bytes) -> dict[str, str] | None:
    """A ``KVTable`` body ``{"table":{k:v}}`` as a dict; None for no body or one that is not a KVTable."""
    if not body:
        return None
    try:
        doc = loads_fastjson(body)
    except (UnicodeDecodeError, ValueError):
        log.warning("registration answer body is not a KVTable: %r", body[:200])
        return None
    table = doc.get("table") if isinstance(doc, dict) else None
    if not isinstance(table, dict | FastjsonPairs):
        return None
    return {str(k): str(v) for k, v in items(table)}
