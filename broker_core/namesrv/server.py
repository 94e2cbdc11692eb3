"""NamesrvController: the name server's request handlers on a RemotingServer, plus the expiry scan.

Invariants:

1. Handlers only validate, call :class:`RouteInfoManager` and encode; the route tables live there alone.
2. A request with a missing or ill-typed header field gets ``SYSTEM_ERROR`` naming the field and changes
   nothing. A route lookup for a malformed topic name gets ``TOPIC_NOT_EXIST`` with the validation message.
3. Bodies are RocketMQ 4.9's (reference §2.2, §5.2): registration takes ``RegisterBrokerBody``
   (``{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":..,"topicConfigTable":..}}``, read with
   the fastjson-tolerant parser; a bare wrapper as pre-3.0.11 brokers send it, and the deflated form of
   ``compressedRegister=true``, are accepted too) checked against ``bodyCrc32`` (crc32 & 0x7FFFFFFF, 0 =
   unchecked); answers are compact JSON with quoted, sorted keys (every client reads them; Go splits
   ``brokerAddrs`` by hand, so no spaces). ClusterInfo carries only ``brokerAddrTable`` and
   ``clusterAddrTable``, as upstream. Codes upstream serves and this one does not (318/319 namesrv config) get
   REQUEST_CODE_NOT_SUPPORTED instead of upstream's silence, so callers fail fast.
4. While started, a background task calls ``scan_not_active_broker`` every ``scan_interval_ms`` (first after
   ``scan_initial_delay_ms``: 5 s as upstream, or the interval if that is shorter), so a broker silent for
   longer than ``broker_expire_ms`` disappears within one interval after expiring.
5. A closed connection does not by itself remove a broker: brokers may register over short-lived
   connections, so liveness is the heartbeat alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_core.codec.fastjson import FastjsonPairs, loads_fastjson
from broker_core.controller.server import ControllerConfig, ControllerManager, start_embedded
from broker_core.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from broker_core.namesrv.registration_auth import RegistrationGuard
from broker_core.namesrv.route_info import BROKER_CHANNEL_EXPIRED_MS, NowClock, RouteInfoManager
from broker_core.protocol import BadRequest, RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.validation import topic_error
from broker_core.remoting.server import Connection, Handler, RemotingServer

log = logging.getLogger(__name__)

DEFAULT_SCAN_INTERVAL_MS = 10_000
DEFAULT_SCAN_INITIAL_DELAY_MS = 5_000
DEFAULT_LISTEN_PORT = 9876


# Unit topic lists (RocketMQ RequestCode; TopicSysFlag FLAG_UNIT 0x1, FLAG_UNIT_SUB 0x2)
GET_UNIT_TOPIC_LIST = 311
GET_HAS_UNIT_SUB_TOPIC_LIST = 312
GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2
MAX_INFLATED_BODY = 64 * 1024 * 1024  # a compressed registration may not inflate beyond this


def encode_json(obj: object, ascii_only: bool = False) -> bytes:
    """Compact JSON, keys quoted and sorted, as fastjson writes wire bodies (``ascii_only``: non-ASCII as
    ``\\uXXXX``, fastjson's ``BrowserCompatible`` for route bodies)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=ascii_only, sort_keys=True).encode("utf-8")


def _str_field(header: dict[str, Any], name: str) -> str:
    if name not in header:
        raise BadRequest(f"missing header field {name}")
    value = header[name]
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"header field {name} must be a non-empty string, got {value!r}")
    return value


def _broker_id_field(header: dict[str, Any]) -> int:
    if "brokerId" not in header:
        raise BadRequest("missing header field brokerId")
    value = header["brokerId"]
    if isinstance(value, str) and value.isdigit():  # Java-style string headers
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"header field brokerId must be a non-negative integer, got {header['brokerId']!r}")
    return value


def _addr_field(header: dict[str, Any]) -> str:
    addr = _str_field(header, "brokerAddr")
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadRequest(f"header field brokerAddr must be host:port, got {addr!r}")
    return addr


def _broker_fields(cmd: RemotingCommand) -> tuple[str, str, int, str]:
    h = cmd.header
    return _str_field(h, "clusterName"), _str_field(h, "brokerName"), _broker_id_field(h), _addr_field(h)


def _registration_body(body: bytes, compressed: bool = False) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(topicConfigTable, dataVersion)`` of a ``RegisterBrokerBody`` (or of a bare
    ``TopicConfigSerializeWrapper``, as brokers before 3.0.11 send it); an empty body means the broker reports
    no topics. ``compressed``: the deflated binary form ``compressedRegister=true`` brokers send."""
    if not body:
        return {}, None
    if compressed:
        return _compressed_registration_body(body)
    try:
        doc = loads_fastjson(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"body is not UTF-8 JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadRequest("body must be a RegisterBrokerBody JSON object")
    wrapper = doc.get("topicConfigSerializeWrapper", doc)
    if not isinstance(wrapper, dict):
        raise BadRequest("body field topicConfigSerializeWrapper must be an object")
    table = wrapper.get("topicConfigTable", {})
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise BadRequest("body field topicConfigTable must be an object of topic -> config")
    version = wrapper.get("dataVersion")
    return table, version if isinstance(version, dict) else None


def _compressed_registration_body(body: bytes) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """RegisterBrokerBody.encode(compress=true): zlib-deflated ``[i32 len][DataVersion JSON] [i32 n]
    n x [i32 len]["topic read write perm filterType"] [i32 len][filterServerList JSON]`` (no topicSysFlag or
    order in that form: they read as 0/false, as upstream)."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(body, MAX_INFLATED_BODY)
    except zlib.error as exc:
        raise BadRequest(f"compressed body is not zlib data: {exc}") from None
    if inflater.unconsumed_tail:
        raise BadRequest(f"compressed RegisterBrokerBody inflates to more than {MAX_INFLATED_BODY} bytes")
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(raw):
            raise BadRequest("compressed RegisterBrokerBody is truncated")
        chunk = raw[pos:pos + n]
        pos += n
        return chunk

    def take_int() -> int:
        return struct.unpack(">i", take(4))[0]

    try:
        version = loads_fastjson(take(take_int()))
        table: dict[str, Any] = {}
        count, end, unpack_int = take_int(), len(raw), struct.Struct(">i").unpack_from
        for _ in range(count):  # inlined take(): this loop runs once per topic (50k and more)
            if pos + 4 > end:
                raise BadRequest("compressed RegisterBrokerBody is truncated")
            n = unpack_int(raw, pos)[0]
            if n < 0 or pos + 4 + n > end:
                raise BadRequest("compressed RegisterBrokerBody is truncated")
            fields = raw[pos + 4:pos + 4 + n].decode("utf-8").split(" ")
            pos += 4 + n
            if len(fields) != 5 or not (fields[1].isdigit() and fields[2].isdigit() and fields[3].isdigit()):
                raise BadRequest(f"compressed topic config must be 'topic read write perm filterType', got "
                                 f"{' '.join(fields)!r}")
            name, read, write, perm, filter_type = fields
            table[name] = {"order": False, "perm": int(perm), "readQueueNums": int(read),
                           "topicFilterType": filter_type, "topicName": name, "topicSysFlag": 0,
                           "writeQueueNums": int(write)}
        take(take_int())  # filterServerList: filter servers are not supported
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, BadRequest):
            raise
        raise BadRequest(f"compressed RegisterBrokerBody is malformed: {exc}") from None
    return table, version if isinstance(version, dict) else None


def _kv_table(table: dict[str, str]) -> bytes:
    """``KVTable``: ``{"table":{key:value}}``."""
    return encode_json({"table": dict(sorted(table.items()))})


class NamesrvController:
    """Route tables served over the remoting protocol, with periodic expiry of silent brokers."""

    def __init__(self, *, scan_interval_ms: int = DEFAULT_SCAN_INTERVAL_MS,
                 broker_expire_ms: int = BROKER_CHANNEL_EXPIRED_MS, scan_initial_delay_ms: int | None = None,
                 clock: NowClock | None = None, idle_timeout: float = 120.0, kv_config_path: Path | None = None,
                 order_message_enable: bool = False, cluster_secret: str = "",
                 controller_config: ControllerConfig | None = None) -> None:
        """``cluster_secret``: when set, broker (un)registrations must be signed with it
        (:mod:`broker_core.namesrv.registration_auth`); empty accepts them as RocketMQ does.
        ``controller_config``: run the RocketMQ 5 controller in this process (``enableControllerInNamesrv``), on
        this server's port; without ``controllerDLegerPeers`` it is a group of one at the bound address."""
        if scan_interval_ms <= 0 or broker_expire_ms <= 0:
            raise ValueError("scan_interval_ms and broker_expire_ms must be positive")
        self.scan_interval_ms = scan_interval_ms
        self.broker_expire_ms = broker_expire_ms
        self.scan_initial_delay_ms = (min(DEFAULT_SCAN_INITIAL_DELAY_MS, scan_interval_ms)
                                      if scan_initial_delay_ms is None else scan_initial_delay_ms)
        self.routes = RouteInfoManager(clock)
        self.kv = KVConfigManager(kv_config_path)
        self.order_message_enable = order_message_enable
        handlers: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self._put_kv, RequestCode.GET_KV_CONFIG: self._get_kv,
            RequestCode.DELETE_KV_CONFIG: self._delete_kv, RequestCode.GET_KVLIST_BY_NAMESPACE: self._kv_list,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self._wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self._add_write_perm,
            RequestCode.GET_TOPICS_BY_CLUSTER: self._topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._system_topics,
            GET_UNIT_TOPIC_LIST: self._unit_topics, GET_HAS_UNIT_SUB_TOPIC_LIST: self._unit_topics,
            GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._unit_topics,
            RequestCode.QUERY_DATA_VERSION: self._query_data_version,
            RequestCode.REGISTER_BROKER: self._register_broker,
            RequestCode.UNREGISTER_BROKER: self._unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self._get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._get_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
        }
        self.remoting = RemotingServer("namesrv", handlers, idle_timeout=idle_timeout,
                                       rpc_hook=RegistrationGuard(cluster_secret) if cluster_secret else None)
        self._scan_task: asyncio.Task[None] | None = None
        self.controller_config = controller_config
        self.controller: ControllerManager | None = None

    async def start(self, host: str = "127.0.0.1", port: int = DEFAULT_LISTEN_PORT) -> int:
        """Listen and start the expiry scan (and the embedded controller); returns the bound port."""
        bound = await self.remoting.start(host, port)
        if self.controller_config is not None:  # before any request is read: no await in between
            self.controller = start_embedded(self.remoting, self.controller_config, f"{host}:{bound}")
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan-not-active-broker")
        log.info("The Name Server boot success. serializeType=JSON, listening on %s:%d", host, bound)
        return bound

    async def close(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        if self.controller is not None:
            await self.controller.close()
        await self.remoting.close()

    def scan_once(self) -> list[str]:
        removed = self.routes.scan_not_active_broker(None, self.broker_expire_ms)
        for addr in removed:
            log.warning("broker %s expired: no heartbeat for more than %d ms; removed from routes",
                        addr, self.broker_expire_ms)
        return removed

    async def _scan_loop(self) -> None:
        await asyncio.sleep(self.scan_initial_delay_ms / 1000)
        while True:
            try:
                self.scan_once()
            except Exception:  # keep scanning: a failed pass must not stop expiry for good
                log.exception("scan of inactive brokers failed")
            await asyncio.sleep(self.scan_interval_ms / 1000)

    # -- handlers -------------------------------------------------------------------------------------------

    def _register_broker(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """REGISTER_BROKER: header ``brokerName, brokerAddr, clusterName, haServerAddr, brokerId, [compressed],
        [bodyCrc32]``, body ``RegisterBrokerBody``. A non-zero ``bodyCrc32`` must equal crc32(body) & 0x7FFFFFFF
        (else SYSTEM_ERROR "crc32 not match", upstream's remark). A slave is answered its live master's
        ``masterAddr`` and ``haServerAddr``; the body is the ``ORDER_TOPIC_CONFIG`` KVTable when that namespace
        exists (upstream's ``getKVListByNamespace``)."""
        h = cmd.header
        try:
            cluster, name, broker_id, addr = _broker_fields(cmd)
            try:
                crc = int(str(h.get("bodyCrc32") or 0))
            except ValueError:
                raise BadRequest(f"header field bodyCrc32 must be an integer, got {h.get('bodyCrc32')!r}") from None
            actual = zlib.crc32(cmd.body) & 0x7FFFFFFF
            if crc != 0 and crc != actual:
                log.warning("registration of %s from %s refused: bodyCrc32 %d, body crc32 %d (%d bytes)",
                            addr, conn.remote, crc, actual, len(cmd.body))
                return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
            compressed = str(h.get("compressed", "false")).lower() == "true"
            table, version = _registration_body(cmd.body, compressed)
            master = self.routes.register_broker(cluster, name, broker_id, addr, table,
                                                 str(h.get("haServerAddr") or ""), version)
        except ValueError as exc:  # BadRequest, or a bad topic config from the manager
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.debug("registered broker %s/%s id=%d at %s from %s (%d topics)", cluster, name, broker_id, addr,
                  conn.remote, len(table))
        header = {"masterAddr": master, "haServerAddr": self.routes.ha_server_addr(master)} if master else None
        order = self.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        return cmd.response(ResponseCode.SUCCESS, header=header, body=_kv_table(order) if order is not None else b"")

    def _unregister_broker(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            cluster, name, broker_id, addr = _broker_fields(cmd)
        except BadRequest as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if self.routes.unregister_broker(cluster, name, broker_id, addr):
            log.info("unregistered broker %s/%s id=%d at %s", cluster, name, broker_id, addr)
        return cmd.response(ResponseCode.SUCCESS)

    def _get_route_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        if "topic" not in cmd.header:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "missing header field topic")
        topic = cmd.header["topic"]
        err = topic_error(topic)
        if err:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, err)
        route = self.routes.pickup_topic_route(topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}")
        if self.order_message_enable:
            conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            if conf:
                route["orderTopicConf"] = conf
        return cmd.response(ResponseCode.SUCCESS, body=encode_json(route, ascii_only=True))

    def _get_cluster_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=encode_json(self.routes.cluster_info()))

    def _get_topic_list(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=encode_json({"topicList": self.routes.topic_list()}))

    def _delete_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV: header ``topic, [clusterName]`` (with a cluster, only its brokers' queue
        data go, as upstream)."""
        if "topic" not in cmd.header:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "missing header field topic")
        topic = cmd.header["topic"]
        err = topic_error(topic)
        if err:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"header field topic: {err}")
        cluster = str(cmd.header.get("clusterName") or "")
        if self.routes.delete_topic(topic, cluster or None):
            log.info("deleted topic %s from the routes%s", topic, f" of cluster {cluster}" if cluster else "")
        return cmd.response(ResponseCode.SUCCESS)

    # -- KV config, permissions, lists -------------------------------------------------------------------

    def _put_kv(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = cmd.header
        self.kv.put(_str_field(h, "namespace"), _str_field(h, "key"), str(h.get("value", "")))
        return cmd.response(ResponseCode.SUCCESS)

    def _get_kv(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        ns, key = _str_field(cmd.header, "namespace"), _str_field(cmd.header, "key")
        value = self.kv.get(ns, key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
        return cmd.response(ResponseCode.SUCCESS, header={"value": value})

    def _delete_kv(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        self.kv.delete(_str_field(cmd.header, "namespace"), _str_field(cmd.header, "key"))
        return cmd.response(ResponseCode.SUCCESS)

    def _kv_list(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        ns = _str_field(cmd.header, "namespace")
        table = self.kv.namespace(ns)
        if table is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return cmd.response(ResponseCode.SUCCESS, body=_kv_table(table))

    def _wipe_write_perm(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        count = self.routes.change_write_perm(_str_field(cmd.header, "brokerName"), writable=False)
        return cmd.response(ResponseCode.SUCCESS, header={"wipeTopicCount": count})

    def _add_write_perm(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        count = self.routes.change_write_perm(_str_field(cmd.header, "brokerName"), writable=True)
        return cmd.response(ResponseCode.SUCCESS, header={"addTopicCount": count})

    def _topics_by_cluster(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        topics = self.routes.topics_by_cluster(_str_field(cmd.header, "cluster"))
        return cmd.response(ResponseCode.SUCCESS, body=encode_json({"topicList": topics}))

    def _system_topics(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=encode_json(self.routes.system_topic_list()))

    def _unit_topics(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """311 / 312 / 313: topics by their ``topicSysFlag`` unit bits, as a ``TopicList``."""
        predicates: dict[int, Callable[[int], bool]] = {
            GET_UNIT_TOPIC_LIST: lambda f: bool(f & FLAG_UNIT),
            GET_HAS_UNIT_SUB_TOPIC_LIST: lambda f: bool(f & FLAG_UNIT_SUB),
            GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: lambda f: not f & FLAG_UNIT and bool(f & FLAG_UNIT_SUB)}
        topics = self.routes.topics_by_sys_flag(predicates[cmd.code])
        return cmd.response(ResponseCode.SUCCESS, body=encode_json({"topicList": topics}))

    def _query_data_version(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """QUERY_DATA_VERSION: header ``brokerAddr, brokerName, clusterName, brokerId``, body the broker's
        DataVersion -> header ``changed``, body the DataVersion the name server holds (none if unknown)."""
        _cluster, _name, _bid, addr = _broker_fields(cmd)
        try:
            version = loads_fastjson(cmd.body) if cmd.body else {}
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadRequest(f"body is not a DataVersion: {exc}") from None
        if isinstance(version, FastjsonPairs) or not isinstance(version, dict):
            raise BadRequest("body is not a DataVersion object")
        changed, stored = self.routes.query_data_version(addr, version)
        return cmd.response(ResponseCode.SUCCESS, header={"changed": changed},
                            body=encode_json(stored) if stored is not None else b"")
