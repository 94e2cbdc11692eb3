"""Segment snapshot admin operations (for the Spark trace and search jobs).

- SNAPSHOT_SEGMENTS: header ``beginTimestamp``/``endTimestamp`` (store time, ms), ``beginOffset``/``endOffset``
  (physical), ``exportDir`` (a name or an absolute path directly under ``<store>/snapshots``), ``ttlMs``.
  Answers the manifest (JSON): ``snapshotId``, ``exportDir``, ``segments`` (``path`` absolute, ``fileFromOffset``,
  ``bound``, ``sealed``, ``firstStoreTimestamp``), ``skipped``, ``totalBytes``, ``expiresMs``.
- RELEASE_SNAPSHOT: header ``snapshotId``; answers ``{"released": bool}``.
- READ_SNAPSHOT_SEGMENT: header ``snapshotId``, ``segment`` (a ``fileName`` of the manifest), ``offset``,
  ``length`` (at most :data:`MAX_READ_BYTES`), ``readToken`` (the manifest's); answers the bytes of
  ``[offset, min(offset + length, bound))`` as the body and ``bound`` in the header. The read goes through the
  snapshot's hard link (retention-safe) and never past the bound (see ``broker_core.store.snapshot``); the range
  goes out with ``sendfile`` from the link's open descriptor (``broker_core.remoting.filesend``), never copied
  into Python. NO_PERMISSION for a wrong token, SYSTEM_ERROR for a released or expired snapshot, an unknown
  segment or a bad range. Readers on other hosts (the Spark executors, ``spark_jobs/remote.py``) use it when
  they cannot open the snapshot's files.

The broker removes expired snapshots every minute (and before each new one), so a crashed job leaves no
links behind for longer than its TTL. A TTL is capped at ``snapshotMaxLifetimeMs``, and a snapshot older than
that (by its ``createdMs``, e.g. one taken before the cap was lowered) is removed too, so no client can pin
deleted segments' disk space for longer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.server import Connection, FileRegion, FileResponse, Handler
from broker_core.store import DEFAULT_TTL_MS, SegmentSnapshots

log = logging.getLogger(__name__)

EXPIRY_INTERVAL_S = 60.0
MAX_READ_BYTES = 8 * 1024 * 1024  # one answer stays well under the 16 MiB frame limit


def _opt_int(header: dict[str, object], name: str) -> int | None:
    value = header.get(name)
    if value is None or value == "":
        return None
    return int(str(value))


def remove_over_lifetime(snaps: SegmentSnapshots, max_lifetime_ms: int, now_ms: int | None = None) -> list[str]:
    """Release every snapshot created more than ``max_lifetime_ms`` ago, whatever its own expiry; then remove
    the expired ones. Returns the released ids (logged)."""
    now = snaps.now_ms() if now_ms is None else now_ms
    released = []
    for manifest in snaps.list():
        try:
            sid, created = str(manifest["snapshotId"]), int(manifest["createdMs"])
        except (KeyError, TypeError, ValueError):
            continue
        if created + max_lifetime_ms <= now and snaps.release(sid):
            released.append(sid)
    if released:
        log.warning("released snapshots held past snapshotMaxLifetimeMs=%d: %s", max_lifetime_ms, released)
    snaps.clean_expired(now)
    return released


async def expire_snapshots(snaps: SegmentSnapshots, interval_s: float = EXPIRY_INTERVAL_S,
                           max_lifetime_ms: int | None = None) -> None:
    """Remove expired snapshots (and those past ``max_lifetime_ms``) every ``interval_s`` (the controller runs
    this for the broker's life)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            if max_lifetime_ms is None:
                await loop.run_in_executor(None, snaps.clean_expired)
            else:
                await loop.run_in_executor(None, remove_over_lifetime, snaps, max_lifetime_ms)
        except OSError:
            log.exception("cannot clean expired snapshots")
        await asyncio.sleep(interval_s)


class SnapshotProcessor:
    """SNAPSHOT_SEGMENTS and RELEASE_SNAPSHOT over the store's :class:`SegmentSnapshots`."""

    def __init__(self, snaps: SegmentSnapshots, max_lifetime_ms: int | None = None) -> None:
        self.snaps = snaps
        self.max_lifetime_ms = max_lifetime_ms

    def handlers(self) -> dict[int, Handler]:
        snaps = self.snaps
        cap = self.max_lifetime_ms

        async def snapshot(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
            h = cmd.header
            try:
                begin_ms, end_ms = _opt_int(h, "beginTimestamp"), _opt_int(h, "endTimestamp")
                begin_offset, end_offset = _opt_int(h, "beginOffset"), _opt_int(h, "endOffset")
                ttl_ms = _opt_int(h, "ttlMs") or DEFAULT_TTL_MS
                if cap is not None:
                    ttl_ms = min(ttl_ms, cap)
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

        async def read(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | FileResponse:
            h = cmd.header
            try:
                offset, length = _opt_int(h, "offset") or 0, _opt_int(h, "length") or 0
                if length > MAX_READ_BYTES:
                    raise ValueError(f"length {length} is over {MAX_READ_BYTES}")
                fd, n, bound = await asyncio.get_running_loop().run_in_executor(
                    None, snaps.open_range, str(h.get("snapshotId", "")), str(h.get("segment", "")), offset,
                    length, str(h.get("readToken", "")))
            except PermissionError as exc:
                return cmd.response(ResponseCode.NO_PERMISSION, str(exc))
            except (LookupError, ValueError, TypeError) as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
            resp = cmd.response(ResponseCode.SUCCESS, header={"bound": bound})
            if n == 0:
                os.close(fd)
                return resp
            return FileResponse(resp, FileRegion(fd, offset, n))  # the kernel sends the range (sendfile)

        return {RequestCode.SNAPSHOT_SEGMENTS: snapshot, RequestCode.RELEASE_SNAPSHOT: release,
                RequestCode.READ_SNAPSHOT_SEGMENT: read}
