"""Segment snapshot admin operations (for the Spark trace and search jobs).

- SNAPSHOT_SEGMENTS: header ``beginTimestamp``/``endTimestamp`` (store time, ms), ``beginOffset``/``endOffset``
  (physical), ``exportDir`` (a name or an absolute path directly under ``<store>/snapshots``), ``ttlMs``.
  Answers the manifest (JSON): ``snapshotId``, ``exportDir``, ``segments`` (``path`` absolute, ``fileFromOffset``,
  ``bound``, ``sealed``, ``firstStoreTimestamp``), ``skipped``, ``totalBytes``, ``expiresMs``.
- RELEASE_SNAPSHOT: header ``snapshotId``; answers ``{"released": bool}``.

The broker removes expired snapshots every minute (and before each new one), so a crashed job leaves no
links behind for longer than its TTL.
"""

from __future__ import annotations

import asyncio
import json
import logging

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.server import Connection, Handler
from broker_core.store import DEFAULT_TTL_MS, SegmentSnapshots

log = logging.getLogger(__name__)

EXPIRY_INTERVAL_S = 60.0


def _opt_int(header: dict[str, object], name: str) -> int | None:
    value = header.get(name)
    if value is None or value == "":
        return None
    return int(str(value))


async def expire_snapshots(snaps: SegmentSnapshots, interval_s: float = EXPIRY_INTERVAL_S) -> None:
    """Remove expired snapshots every ``interval_s`` (the controller runs this for the broker's life)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            await loop.run_in_executor(None, snaps.clean_expired)
        except OSError:
            log.exception("cannot clean expired snapshots")
        await asyncio.sleep(interval_s)


class SnapshotProcessor:
    """SNAPSHOT_SEGMENTS and RELEASE_SNAPSHOT over the store's :class:`SegmentSnapshots`."""

    def __init__(self, snaps: SegmentSnapshots) -> None:
        self.snaps = snaps

    def handlers(self) -> dict[int, Handler]:
        snaps = self.snaps

        async def snapshot(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            h = cmd.header
            try:
                begin_ms, end_ms = _opt_int(h, "beginTimestamp"), _opt_int(h, "endTimestamp")
                begin_offset, end_offset = _opt_int(h, "beginOffset"), _opt_int(h, "endOffset")
                ttl_ms = _opt_int(h, "ttlMs") or DEFAULT_TTL_MS
                export = h.get("exportDir")
                manifest = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: snaps.take(snapshot_id=str(export) if export else None, begin_ms=begin_ms,
                                             end_ms=end_ms, begin_offset=begin_offset, end_offset=end_offset,
                                             ttl_ms=ttl_ms))
            except (ValueError, TypeError, FileExistsError) as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
            return cmd.response(ResponseCode.SUCCESS, body=json.dumps(manifest).encode())

        async def release(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            try:
                sid = str(cmd.header.get("snapshotId", ""))
                released = await asyncio.get_running_loop().run_in_executor(None, snaps.release, sid)
            except ValueError as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
            return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"released": released}).encode())

        return {RequestCode.SNAPSHOT_SEGMENTS: snapshot, RequestCode.RELEASE_SNAPSHOT: release}
