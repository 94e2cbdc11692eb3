"""Admin requests: topics, runtime info, lookups by id and key, group lag, offset reset, store
maintenance (retention now, disk check)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import TYPE_CHECKING

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.bodies import encode_reset_offset_body
from broker_core.protocol.fields import BadRequest, bool_field, int_field, str_field
from broker_core.protocol.validation import topic_error
from broker_core.remoting.server import Connection
from broker_core.server.state import DEFAULT_PERM, TopicConfig
from broker_core.store.message_store import MAX_TIMESTAMP

if TYPE_CHECKING:
    from broker_core.server.controller import BrokerController


def _json(data: object) -> bytes:
    return json.dumps(data, default=str).encode()


def handlers(ctl: BrokerController) -> dict[int, object]:
    store = ctl.store

    async def create_topic(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = cmd.header
        topic = str_field(h, "topic")
        err = topic_error(topic)
        if err:
            return cmd.response(ResponseCode.SYSTEM_ERROR, err)
        read, write = int_field(h, "readQueueNums", 4), int_field(h, "writeQueueNums", 4)
        perm = int_field(h, "perm", DEFAULT_PERM)
        if not (1 <= read <= 1024 and 1 <= write <= 1024) or perm & ~7:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "queue counts must be 1..1024 and perm a 3-bit value")
        before = ctl.topics.upsert(TopicConfig(topic, read, write, perm, bool_field(h, "order")))
        await ctl.register_all()
        return cmd.response(ResponseCode.SUCCESS, "", {"created": before is None})

    async def delete_topic(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        topic = str_field(cmd.header, "topic")
        if ctl.topics.delete(topic) is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        await asyncio.get_running_loop().run_in_executor(None, store.delete_topic, topic)
        ctl.offsets.remove_topic(topic)
        await ctl.register_all()
        return cmd.response(ResponseCode.SUCCESS)

    async def all_topics(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=_json({"topicConfigTable": ctl.topics.wire_table()}))

    async def runtime(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=_json(ctl.runtime_info()))

    async def view_by_id(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID: header ``offset``, the CommitLog physical offset (clients decode it from the
        offset message id) -> the record as stored; SYSTEM_ERROR when there is none."""
        offset = int_field(cmd.header, "offset")
        rec = store.look_message_by_offset(offset)
        raw = store.get_message_bytes(rec.commit_log_offset, rec.store_size) if rec is not None else None
        if not raw:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return cmd.response(ResponseCode.SUCCESS, body=raw)

    async def query(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = cmd.header
        topic, key = str_field(h, "topic"), str_field(h, "key")
        res = await asyncio.get_running_loop().run_in_executor(
            None, store.query_message, topic, key, int_field(h, "maxNum", store.config.default_query_max_num),
            int_field(h, "beginTimestamp", 0), int_field(h, "endTimestamp", MAX_TIMESTAMP))
        index_fields = {"indexLastUpdateTimestamp": res.index_last_update_timestamp,
                        "indexLastUpdatePhyoffset": res.index_last_update_phy_offset}
        if not res.messages:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                                index_fields)
        body = b"".join(store.get_message_bytes(m.commit_log_offset, m.store_size) or b"" for m in res.messages)
        # "truncated" is ours (more matches than maxNum); RocketMQ clients ignore fields they do not know
        return cmd.response(ResponseCode.SUCCESS, "", {**index_fields, "truncated": res.truncated}, body)

    def _queue_rows(topic: str, group: str | None) -> list[dict[str, object]]:
        cfg = ctl.topics.get(topic)
        queues = range(cfg.read_queue_nums) if cfg else store.queue_ids(topic)
        rows = []
        for q in queues:
            max_off = store.get_max_offset_in_queue(topic, q)
            row: dict[str, object] = {"topic": topic, "queueId": q,
                                      "minOffset": store.get_min_offset_in_queue(topic, q), "maxOffset": max_off,
                                      "lastUpdateTimestamp": store.get_queue_store_time(topic, q, max_off - 1)
                                      if max_off else 0}
            if group is not None:
                committed = ctl.offsets.query(group, topic, q)
                row["consumerOffset"] = committed
                row["lag"] = max_off - committed if committed >= 0 else max_off - int(row["minOffset"])  # type: ignore[call-overload]
                row["lastTimestamp"] = (store.get_queue_store_time(topic, q, committed - 1)
                                        if committed > 0 else 0)
            rows.append(row)
        return rows

    async def topic_stats(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        topic = str_field(cmd.header, "topic")
        if ctl.topics.get(topic) is None and not store.queue_ids(topic):
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        return cmd.response(ResponseCode.SUCCESS, body=_json({"offsetTable": _queue_rows(topic, None)}))

    async def consume_stats(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        group = str_field(cmd.header, "consumerGroup")
        topic = cmd.header.get("topic")
        topics = [str(topic)] if topic else ctl.offsets.topics_of(group)
        rows = [row for t in topics for row in _queue_rows(t, group)]
        return cmd.response(ResponseCode.SUCCESS, body=_json({
            "offsetTable": rows, "totalLag": sum(int(r["lag"]) for r in rows),  # type: ignore[call-overload]
            "online": ctl.consumers.client_ids(group)}))

    async def consumer_connections(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        group = str_field(cmd.header, "consumerGroup")
        return cmd.response(ResponseCode.SUCCESS, body=_json({"connections": ctl.consumers.connections(group)}))

    def all_groups(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """Every consumer group this broker knows: a subscription group config (created on first pull or
        heartbeat), committed offsets, or online clients."""
        committed = ctl.offsets.groups()
        names = set(ctl.groups.table) | set(committed) | {g for g, m in ctl.consumers.groups.items() if m}
        return cmd.response(ResponseCode.SUCCESS, body=_json({"groups": {
            g: {"subscriptionGroup": g in ctl.groups.table, "offsetTopics": committed.get(g, []),
                "online": len(ctl.consumers.groups.get(g, {}))} for g in sorted(names)}}))

    async def reset_offset(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = cmd.header
        group, topic = str_field(h, "group"), str_field(h, "topic")
        cfg = ctl.topics.get(topic)
        if cfg is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        offsets: dict[int, int] = {}
        if cmd.body:
            try:
                offsets = {int(q): int(o) for q, o in json.loads(cmd.body)["offsets"].items()}
            except (ValueError, KeyError, TypeError) as exc:
                raise BadRequest(f"bad offsets body: {exc}") from None
        else:
            ts = int_field(h, "timestamp")
            for q in range(cfg.read_queue_nums):
                if ts == -1:
                    offsets[q] = store.get_max_offset_in_queue(topic, q)
                elif ts == 0:
                    offsets[q] = store.get_min_offset_in_queue(topic, q)
                else:
                    offsets[q] = store.get_offset_in_queue_by_time(topic, q, ts)
        for q, o in offsets.items():
            lo, hi = store.get_min_offset_in_queue(topic, q), store.get_max_offset_in_queue(topic, q)
            ctl.offsets.commit(group, topic, q, min(max(o, lo), hi))
        applied = {q: ctl.offsets.query(group, topic, q) for q in offsets}
        ctl.offsets.persist()
        ctl.consumers.notify_reset(group, topic, ctl.config.broker_name, applied, int_field(h, "timestamp", -1),
                                   bool_field(h, "isForce", True))
        return cmd.response(ResponseCode.SUCCESS,
                            body=encode_reset_offset_body(topic, ctl.config.broker_name, applied))

    async def clean(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        force = bool_field(cmd.header, "force")
        report = await asyncio.get_running_loop().run_in_executor(None, store.clean_expired_files, None, force)
        data = dataclasses.asdict(report)
        data["files_deleted"] = report.files_deleted
        return cmd.response(ResponseCode.SUCCESS, body=_json(data))

    async def disk(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=_json(dataclasses.asdict(store.check_disk())))

    async def deliver(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        report = await asyncio.get_running_loop().run_in_executor(None, store.deliver_delayed)
        ctl.trace_delayed_delivery(report)
        return cmd.response(ResponseCode.SUCCESS, body=_json(dataclasses.asdict(report)))

    def delay_backlog(cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=_json({str(k): v for k, v in store.delay_backlog().items()}))

    return {
        RequestCode.DELIVER_DELAYED: deliver, RequestCode.GET_DELAY_BACKLOG: delay_backlog,
        RequestCode.UPDATE_AND_CREATE_TOPIC: create_topic, RequestCode.DELETE_TOPIC_IN_BROKER: delete_topic,
        RequestCode.GET_ALL_TOPIC_CONFIG: all_topics, RequestCode.GET_BROKER_RUNTIME_INFO: runtime,
        RequestCode.VIEW_MESSAGE_BY_ID: view_by_id, RequestCode.QUERY_MESSAGE: query,
        RequestCode.GET_TOPIC_STATS_INFO: topic_stats, RequestCode.GET_CONSUME_STATS: consume_stats,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: consumer_connections,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: all_groups,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: reset_offset, RequestCode.CLEAN_EXPIRED_FILES: clean,
        RequestCode.CHECK_DISK: disk,
    }
