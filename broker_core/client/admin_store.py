"""AdminClient's dead-letter, delay, store-maintenance and segment-snapshot operations (see ``admin.py``)."""

from __future__ import annotations

import json
from typing import Any

from broker_core.client.admin_base import AdminBase
from broker_core.client.consumer import decode_records
from broker_core.client.message import ClientError, MessageExt
from broker_core.codec import CodecError
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.codec.names import ADMIN_GROUP
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.protocol.headers import PULL_SUBSCRIPTION
from broker_core.protocol.validation import dlq_topic


class StoreAdminMixin(AdminBase):
    # ------------------------------------------------------------------ dead letters and delays
    def dead_letters(self, group: str, max_num: int = 1000) -> list[MessageExt]:
        """Dead letters of ``group`` (``%DLQ%<group>`` on every broker), oldest first, at most ``max_num``.
        ``properties["DLQ_ORIGIN_TOPIC"]`` and ``["DLQ_REASON"]`` say where each came from and why."""
        topic = dlq_topic(group)

        async def go() -> list[MessageExt]:
            try:
                brokers = await self._topic_brokers(topic)
            except ClientError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    return []
                raise
            out: list[MessageExt] = []
            for name, addr in sorted(brokers.items()):
                offset = 0
                while len(out) < max_num:
                    resp = await self._call(addr, RequestCode.PULL_MESSAGE, {
                        "consumerGroup": ADMIN_GROUP, "topic": topic, "queueId": 0, "queueOffset": offset,
                        "maxMsgNums": min(256, max_num - len(out)), "sysFlag": PULL_SUBSCRIPTION, "commitOffset": 0,
                        "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0},
                        ok=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED,
                            ResponseCode.PULL_RETRY_IMMEDIATELY))
                    nxt = int(resp.header.get("nextBeginOffset", offset))
                    if resp.code == ResponseCode.SUCCESS:
                        out += decode_records(resp.body, name)
                    elif resp.code == ResponseCode.PULL_NOT_FOUND or nxt == offset:
                        break
                    offset = nxt
            return out[:max_num]
        return self._run(go())

    def resend_dead_letters(self, group: str, offset_msg_ids: list[str],
                            topic: str | None = None) -> list[dict[str, Any]]:
        """Re-produce dead letters to their original topic (or ``topic``) as new messages linked to the
        original id; works with no consumer online. One result per id, in order."""
        async def go() -> list[dict[str, Any]]:
            by_addr: dict[str, list[str]] = {}
            results: dict[str, dict[str, Any]] = {}
            for oid in offset_msg_ids:
                try:
                    ip, port, _ = decode_offset_msg_id(oid)
                    by_addr.setdefault(f"{ip}:{port}", []).append(oid)
                except CodecError as exc:
                    results[oid] = {"offsetMsgId": oid, "ok": False, "error": str(exc)}
            for addr, ids in by_addr.items():
                header = {"group": group, **({"topic": topic} if topic else {})}
                try:
                    resp = await self._call(addr, RequestCode.RESEND_DEAD_LETTERS, header,
                                            json.dumps({"offsetMsgIds": ids}).encode())
                    for r in json.loads(resp.body)["results"]:
                        results[r["offsetMsgId"]] = r
                except (ClientError, ConnectionError, TimeoutError) as exc:
                    for oid in ids:
                        results[oid] = {"offsetMsgId": oid, "ok": False, "error": str(exc)}
            return [results[oid] for oid in offset_msg_ids]
        return self._run(go())

    def deliver_delayed(self, broker_addr: str) -> dict[str, Any]:
        """Ask a broker to deliver every delayed message that is due now (what Celery beat calls)."""
        async def go() -> dict[str, Any]:
            return json.loads((await self._call(broker_addr, RequestCode.DELIVER_DELAYED)).body)
        return self._run(go())

    def delay_backlog(self, broker_addr: str) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            return json.loads((await self._call(broker_addr, RequestCode.GET_DELAY_BACKLOG)).body)
        return self._run(go())

    # ------------------------------------------------------------------ store maintenance
    def clean_expired_files(self, broker_addr: str, force: bool = False) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            return json.loads((await self._call(broker_addr, RequestCode.CLEAN_EXPIRED_FILES, {"force": force})).body)
        return self._run(go())

    def check_disk(self, broker_addr: str) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            return json.loads((await self._call(broker_addr, RequestCode.CHECK_DISK)).body)
        return self._run(go())

    # ------------------------------------------------------------------ segment snapshots (Spark jobs)
    async def _broker_addr(self, broker_addr_or_name: str) -> str:
        if ":" in broker_addr_or_name:
            return broker_addr_or_name
        addrs = await self._master_addrs(brokers=[broker_addr_or_name])
        if broker_addr_or_name not in addrs:
            raise ClientError(int(ResponseCode.SYSTEM_ERROR), f"no broker named {broker_addr_or_name}")
        return addrs[broker_addr_or_name]

    def snapshot_segments(self, broker_addr_or_name: str, begin_ms: int | None = None, end_ms: int | None = None,
                          export_dir: str | None = None, *, begin_offset: int | None = None,
                          end_offset: int | None = None, ttl_ms: int | None = None) -> dict[str, Any]:
        """Ask a broker to hard-link the CommitLog segments of a store-time and/or physical-offset range into
        ``<store>/snapshots/<id>/`` (``export_dir``: a name or an absolute path directly under that directory;
        default a new id). Returns the manifest: ``snapshotId``, ``exportDir``, ``segments`` (each ``path``
        absolute, ``fileFromOffset``, ``bound`` = bytes readers may read, ``sealed``, ``firstStoreTimestamp``),
        ``skipped``, ``totalBytes``, ``expiresMs``, ``storeHost``. Call :meth:`release_snapshot` when done;
        the broker removes it anyway after ``ttl_ms`` (default 2 h)."""
        header: dict[str, Any] = {k: v for k, v in {
            "beginTimestamp": begin_ms, "endTimestamp": end_ms, "beginOffset": begin_offset,
            "endOffset": end_offset, "exportDir": export_dir, "ttlMs": ttl_ms}.items() if v is not None}

        async def go() -> dict[str, Any]:
            addr = await self._broker_addr(broker_addr_or_name)
            return json.loads((await self._call(addr, RequestCode.SNAPSHOT_SEGMENTS, header)).body)
        return self._run(go())

    def release_snapshot(self, broker_addr_or_name: str, snapshot_id: str) -> bool:
        """Remove a snapshot's links on the broker; False when it was already gone."""
        async def go() -> bool:
            addr = await self._broker_addr(broker_addr_or_name)
            resp = await self._call(addr, RequestCode.RELEASE_SNAPSHOT, {"snapshotId": snapshot_id})
            return bool(json.loads(resp.body)["released"])
        return self._run(go())
