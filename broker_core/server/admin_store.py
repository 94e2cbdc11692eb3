"""Admin requests that read messages or maintain the store: 12 QUERY_MESSAGE and 33 VIEW_MESSAGE_BY_ID (RocketMQ's
headers and bodies), RocketMQ's 306 CLEAN_EXPIRED_CONSUMEQUEUE and 329 DELETE_EXPIRED_COMMITLOG, and this broker's
own maintenance codes (30900-30904): retention now, disk check, delayed
delivery, delay backlog (JSON bodies)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.fields import bool_field, int_field, str_field
from broker_core.remoting.server import Connection, Handler
from broker_core.server.admin import json_body
from broker_core.store import MAX_TIMESTAMP

if TYPE_CHECKING:
    from broker_core.server.ports import Broker


class StoreAdminProcessor:
    def __init__(self, ctl: Broker) -> None:
        self.ctl = ctl
        self.store = ctl.store

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_by_id, RequestCode.QUERY_MESSAGE: self.query,
            RequestCode.CLEAN_EXPIRED_FILES: self.clean, RequestCode.CHECK_DISK: self.disk,
            RequestCode.DELIVER_DELAYED: self.deliver, RequestCode.GET_DELAY_BACKLOG: self.delay_backlog,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_cq,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
        }

    # ------------------------------------------------------------------ messages
    def view_by_id(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """33: header ``offset``, the CommitLog physical offset (clients decode it from the offset message id)
        -> the record as stored; SYSTEM_ERROR when there is none."""
        store = self.store
        offset = int_field(cmd.header, "offset")
        rec = store.look_message_by_offset(offset)
        raw = store.get_message_bytes(rec.commit_log_offset, rec.store_size) if rec is not None else None
        if not raw:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return cmd.response(ResponseCode.SUCCESS, body=raw)

    async def query(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """12: ``topic, key, maxNum, beginTimestamp, endTimestamp`` -> the records; 22 when none matches.
        ``maxNum`` is capped at ``maxMsgsNumBatch`` (as RocketMQ's ``queryMessage``); ``truncated`` says more
        matched."""
        store = self.store
        h = cmd.header
        topic, key = str_field(h, "topic"), str_field(h, "key")
        max_num = int_field(h, "maxNum", store.store_config.default_query_max_num)
        max_num = min(max_num if max_num > 0 else store.store_config.default_query_max_num,
                      self.ctl.config.max_msgs_num_batch)
        res = await asyncio.get_running_loop().run_in_executor(
            None, store.query_message, topic, key, max_num,
            int_field(h, "beginTimestamp", 0), int_field(h, "endTimestamp", MAX_TIMESTAMP))
        index_fields = {"indexLastUpdateTimestamp": res.index_last_update_timestamp,
                        "indexLastUpdatePhyoffset": res.index_last_update_phy_offset}
        if not res.messages:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                index_fields)
        body = b"".join(store.get_message_bytes(m.commit_log_offset, m.store_size) or b"" for m in res.messages)
        # "truncated" is ours (more matches than maxNum); RocketMQ clients ignore fields they do not know
        return cmd.response(ResponseCode.SUCCESS, "", {**index_fields, "truncated": res.truncated}, body)

    # ------------------------------------------------------------------ RocketMQ's maintenance codes
    async def clean_expired_cq(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """306: destroy the ConsumeQueues whose messages retention has all deleted (RocketMQ's
        ``cleanExpiredConsumerQueue``); always SUCCESS."""
        await asyncio.get_running_loop().run_in_executor(None, self.store.clean_expired_consume_queues)
        return cmd.response(ResponseCode.SUCCESS)

    def delete_expired_commit_log(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """329: the next retention pass deletes expired CommitLog files whatever the hour (RocketMQ's
        ``executeDeleteFilesManually``); always SUCCESS."""
        self.store.execute_delete_files_manually()
        return cmd.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ this broker's maintenance codes
    async def clean(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        force = bool_field(cmd.header, "force")
        report = await asyncio.get_running_loop().run_in_executor(None, self.store.clean_expired_files, None, force)
        data = dataclasses.asdict(report)
        data["files_deleted"] = report.files_deleted
        return cmd.response(ResponseCode.SUCCESS, body=json_body(data))

    def disk(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=json_body(dataclasses.asdict(self.store.check_disk())))

    async def deliver(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        report = await asyncio.get_running_loop().run_in_executor(None, self.store.deliver_delayed)
        self.ctl.trace_delayed_delivery(report)
        return cmd.response(ResponseCode.SUCCESS, body=json_body(dataclasses.asdict(report)))

    def delay_backlog(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS,
                            body=json_body({str(k): v for k, v in self.store.delay_backlog().items()}))
