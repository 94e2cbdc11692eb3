"""The broker's name-server requests, as a 4.9 broker's ``BrokerOuterAPI`` builds them (reference §2.2), plus
this product's cluster-secret proof: pure functions of the broker's config and topic table."""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker_core.codec.fastjson import FastjsonPairs, dumps_fastjson, items, loads_fastjson
from broker_core.config import BrokerConfig
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import sign_registration
from broker_core.server.state import TopicConfigManager
from broker_core.server.topics_file import Fragments, TopicSnapshot, framed_line, registration_entry

if TYPE_CHECKING:
    from broker_core.remoting.client import RemotingClient

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
    doc = loads_fastjson(plain_body(topics, state_version))
    return dict(doc["topicConfigSerializeWrapper"])


def data_version(topics: TopicConfigManager, state_version: int | None = None) -> dict[str, int]:
    """The topic table's ``DataVersion`` as fastjson writes it (``counter``, [``stateVersion``], ``timestamp``)."""
    version: dict[str, int] = {"counter": int(topics.data_version)}
    if state_version is not None:
        version["stateVersion"] = int(state_version)
    version["timestamp"] = int(topics.data_version_ts)
    return version


def snapshot_version(snap: TopicSnapshot, state_version: int | None = None) -> dict[str, int]:
    """:func:`data_version` of one snapshot (the version a body built from it carries)."""
    version: dict[str, int] = {"counter": int(snap.counter)}
    if state_version is not None:
        version["stateVersion"] = int(state_version)
    version["timestamp"] = int(snap.timestamp)
    return version


class _Caches:
    """Per-topic registration text kept on the topic manager (:mod:`broker_core.server.topics_file`), and the
    last body built, reused while the DataVersion it carries is unchanged."""

    def __init__(self) -> None:
        self.framed: Fragments[bytes] = Fragments(framed_line)
        self.entries: Fragments[str] = Fragments(registration_entry)
        self.body: tuple[tuple[object, ...], bytes] | None = None
        self.fragments = (self.framed, self.entries)  # the manager forgets deleted topics in each


def _caches(topics: TopicConfigManager) -> _Caches:
    caches = getattr(topics, "registration_caches", None)
    if not isinstance(caches, _Caches):
        caches = _Caches()
        topics.registration_caches = caches
    return caches


def compressed_body(topics: TopicConfigManager, state_version: int | None = None,
                    snap: TopicSnapshot | None = None) -> bytes:
    """``RegisterBrokerBody.encode(true)`` (RocketMQ 4.9): deflated at level 9, ``[i32 n][DataVersion JSON]``,
    ``[i32 count]``, per topic ``[i32 n]["topicName readQueueNums writeQueueNums perm topicFilterType"]``
    (``TopicConfig.encode``), ``[i32 n][filterServerList JSON]``; lengths big-endian. ``order`` and
    ``topicSysFlag`` are not in this form (the name server reads them as false/0, as upstream). A join of
    cached per-topic lines; zlib releases the GIL while it deflates."""
    snap = snap or topics.snapshot()
    lines = _caches(topics).framed.join(snap)
    head = _framed(dumps_fastjson(snapshot_version(snap, state_version)).encode()) + struct.pack(">i", len(lines))
    return zlib.compress(b"".join([head, *lines, _framed(b"[]")]), 9)


def plain_body(topics: TopicConfigManager, state_version: int | None = None,
               snap: TopicSnapshot | None = None) -> bytes:
    """``{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{..},"topicConfigTable":{..}}}``
    (compact fastjson), joined from cached per-topic entries."""
    snap = snap or topics.snapshot()
    entries = _caches(topics).entries.join(snap)
    return ('{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":'
            + dumps_fastjson(snapshot_version(snap, state_version))
            + ',"topicConfigTable":{' + ",".join(entries) + "}}}").encode()


def _framed(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def request(config: BrokerConfig, broker_addr: str, topics: TopicConfigManager, ha_server_addr: str,
            state_version: int | None = None, snap: TopicSnapshot | None = None) -> RemotingCommand:
    """REGISTER_BROKER exactly as a 4.9 broker's ``BrokerOuterAPI.registerBrokerAll`` sends it: header
    ``brokerName, brokerAddr, clusterName, haServerAddr, brokerId, compressed, bodyCrc32`` and body
    ``RegisterBrokerBody`` ``{"filterServerList":[],"topicConfigSerializeWrapper":{...}}`` (compact fastjson), or
    with ``compressedRegister`` its deflated form (:func:`compressed_body`); ``bodyCrc32`` = crc32(body) &
    0x7FFFFFFF of the bytes sent; ``haServerAddr`` is ``brokerIP2:haListenPort``. Built from ``snap`` (the
    manager's current snapshot when None); thread-safe, so the broker builds it off its event loop, and the
    body of an unchanged snapshot is built once."""
    snap = snap or topics.snapshot()
    compressed = bool(config.compressed_register)
    caches = _caches(topics)
    key = (snap.seq, snap.counter, snap.timestamp, state_version, compressed)
    cached = caches.body
    if cached is not None and cached[0] == key:
        body = cached[1]
    else:
        body = (compressed_body if compressed else plain_body)(topics, state_version, snap)
        caches.body = (key, body)
    head = {**header(config, broker_addr), "haServerAddr": ha_server_addr, "compressed": compressed,
            "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, head, body)


async def build_request(config: BrokerConfig, broker_addr: str, topics: TopicConfigManager, ha_server_addr: str,
                        state_version: int | None, snap: TopicSnapshot) -> RemotingCommand:
    """:func:`request` built in the loop's default executor (off the event loop)."""
    return await asyncio.get_running_loop().run_in_executor(
        None, functools.partial(request, config, broker_addr, topics, ha_server_addr, state_version, snap))


async def send_to_all(client: RemotingClient, addrs: list[str], cmd: RemotingCommand,
                      sign: Callable[[RemotingCommand], RemotingCommand]) -> tuple[bool, RemotingCommand | None]:
    """``cmd`` (each copy signed by ``sign``) to every name server: (all answered SUCCESS, the first such answer);
    failures are logged."""
    ok, first = True, None
    for addr in addrs:
        try:
            resp = await client.invoke(addr, sign(RemotingCommand(cmd.code, 0, cmd.flags, dict(cmd.header),
                                                                   cmd.body)), 3.0)
        except (ConnectionError, TimeoutError) as exc:
            ok = False
            log.warning("cannot register with namesrv %s: %s", addr, exc)
            continue
        if resp.code != ResponseCode.SUCCESS:
            ok = False
            log.warning("namesrv %s refused registration (code %d): %s", addr, resp.code, resp.remark)
        elif first is None:
            first = resp
    return ok, first


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


class Coalescer:
    """Runs an async ``job`` for its callers, one run at a time: callers arriving while a run is under way
    share the next run, which starts when that one ends (so it reads the state after every one of them asked:
    the last state wins). ``job(follow_up)`` is told whether its callers all arrived during an earlier run
    (the broker skips such a run when the earlier one, ended after they asked, registered the same state)."""

    def __init__(self, job: Callable[[bool], Awaitable[bool]]) -> None:
        self._job = job
        self._pending: list[asyncio.Future[bool]] = []
        self._driver: asyncio.Future[None] | None = None
        self.runs = 0  # runs started (tests: a burst of changes costs few registrations)

    async def __call__(self) -> bool:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append(fut)
        if self._driver is None:
            self._driver = asyncio.ensure_future(self._drive())
        return await fut

    async def _drive(self) -> None:
        follow_up = False
        try:
            while self._pending:
                waiters, self._pending = self._pending, []
                self.runs += 1
                ok: bool | None = None
                try:
                    ok = await self._job(follow_up)
                finally:  # an error in the job reaches every caller of this run, as if each had run it
                    for fut in waiters:
                        if not fut.done():
                            if ok is None:
                                fut.set_exception(RuntimeError("registration failed (see the broker log)"))
                            else:
                                fut.set_result(ok)
                follow_up = True
        finally:
            self._driver = None
            if self._pending:  # callers who arrived during a run that raised get a run of their own
                self._driver = asyncio.ensure_future(self._drive())
