"""queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, printMsg, sendMessage, consumeMessage
(RocketMQ 4.9's layouts)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker_core.client import ClientError, Message, MessageExt, MessageQueue, Producer, PullConsumer, PullStatus
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.tools.mqadmin.cli import CommandFailed, Context, Opt, UsageError, command, unsupported
from broker_core.tools.mqadmin.commands.common import route_of
from broker_core.tools.mqadmin.fmt import human_ms, message_ext_string, parse_timestamp

TOOLS_GROUP = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP


def mq_string(mq: MessageQueue) -> str:
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


@contextmanager
def pull_consumer(ctx: Context, group: str = TOOLS_GROUP) -> Iterator[PullConsumer]:
    consumer = PullConsumer(group, ctx.admin.namesrv_addrs[0] if len(ctx.admin.namesrv_addrs) == 1
                            else ";".join(ctx.admin.namesrv_addrs), credentials=ctx.credentials).start()
    try:
        yield consumer
    finally:
        consumer.shutdown()


def body_file(msg: MessageExt) -> Path:
    """``/tmp/rocketmq/msgbodys/<msgId>`` as RocketMQ writes it (under the system temp directory)."""
    folder = Path(tempfile.gettempdir()) / "rocketmq" / "msgbodys"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / msg.msg_id
    path.write_bytes(msg.body)
    return path


def print_message(ctx: Context, msg: MessageExt, offset_id: bool = True) -> None:
    """QueryMsgByIdSubCommand.printMsg: the ``%-20s`` block, then the message's track per consumer group."""
    if offset_id:
        ctx.print("%-20s %s%n", "OffsetID:", msg.offset_msg_id)
    ctx.print("%-20s %s%n", "Topic:", msg.topic)
    ctx.print("%-20s %s%n", "Tags:", f"[{msg.tags}]" if msg.tags is not None else "[null]")
    ctx.print("%-20s %s%n", "Keys:", f"[{' '.join(msg.keys)}]" if msg.keys else "[null]")
    ctx.print("%-20s %d%n", "Queue ID:", msg.queue_id)
    ctx.print("%-20s %d%n", "Queue Offset:", msg.queue_offset)
    ctx.print("%-20s %d%n", "CommitLog Offset:", msg.commit_log_offset)
    ctx.print("%-20s %d%n", "Reconsume Times:", msg.reconsume_times)
    ctx.print("%-20s %s%n", "Born Timestamp:", human_ms(msg.born_timestamp))
    ctx.print("%-20s %s%n", "Store Timestamp:", human_ms(msg.store_timestamp))
    ctx.print("%-20s %s%n", "Born Host:", msg.born_host)
    ctx.print("%-20s %s%n", "Store Host:", msg.store_host)
    ctx.print("%-20s %d%n", "System Flag:", msg.sys_flag)
    ctx.print("%-20s %s%n", "Properties:", "{" + ", ".join(f"{k}={v}" for k, v in sorted(msg.properties.items()))
              + "}")
    ctx.print("%-20s %s%n", "Message Body Path:", body_file(msg))
    tracks = message_tracks(ctx, msg)
    if not tracks:
        ctx.print("%n%nWARN: No Consumer")
    else:
        ctx.print("%n%n")
        for group, kind, desc in tracks:
            ctx.print("%s", f"MessageTrack [consumerGroup={group}, trackType={kind}, exceptionDesc={desc}]")


def message_tracks(ctx: Context, msg: MessageExt) -> list[tuple[str, str, str]]:
    """``messageTrackDetail``: each group consuming the topic, and whether it consumed the message."""
    route = route_of(ctx, msg.topic)
    addrs = [b["brokerAddrs"]["0"] for b in route["brokerDatas"] if "0" in b["brokerAddrs"]]
    groups = sorted({g for a in addrs for g in ctx.admin.topic_consumed_by(a, msg.topic)})
    out = []
    for group in groups:
        cc = None
        for a in addrs:
            cc = cc or ctx.admin.consumer_connection(a, group)
        if not cc:
            out.append((group, "NOT_ONLINE", f"CODE:{int(ResponseCode.CONSUMER_NOT_ONLINE)} DESC:the consumer "
                                             f"group[{group}] not online"))
            continue
        if cc.get("consumeType") == "CONSUME_ACTIVELY":
            out.append((group, "PULL", "null"))
            continue
        if cc.get("messageModel") == "BROADCASTING":
            out.append((group, "UNKNOWN", "null"))
            continue
        rows = ctx.admin.consume_stats(group, msg.topic)["offsetTable"]
        committed = next((r["consumerOffset"] for r in rows
                          if r["brokerName"] == msg.broker_name and r["queueId"] == msg.queue_id), -1)
        out.append((group, "CONSUMED" if committed > msg.queue_offset else "NOT_CONSUME_YET", "null"))
    return out


def _consume_directly(ctx: Context, msg: MessageExt) -> None:
    addr = msg.store_host
    header = {"consumerGroup": ctx.req("g"), "clientId": ctx.req("d"), "msgId": msg.offset_msg_id,
              "brokerName": msg.broker_name}
    try:
        resp = ctx.admin.request(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header)
    except ClientError as exc:
        if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise unsupported("CONSUME_MESSAGE_DIRECTLY", RequestCode.CONSUME_MESSAGE_DIRECTLY, addr) from None
        raise
    ctx.print("%s", resp.body.decode())


@command("queryMsgById", "Query Message by Id", [
    Opt("i", "msgId", True, "Message Id", required=True),
    Opt("g", "consumerGroup", True, "consumer group name"),
    Opt("d", "clientId", True, "The consumer's client id"),
    Opt("s", "sendMessage", True, "resend message"),
    Opt("u", "unitName", True, "unit name"),
])
def query_msg_by_id(ctx: Context) -> None:
    for msg_id in (m.strip() for m in ctx.req("i").split(",") if m.strip()):
        try:
            msg = ctx.admin.view_message(msg_id)
        except (ValueError, ClientError) as exc:
            raise CommandFailed(f"no message with the id {msg_id}: {exc}") from None
        if ctx.has("g") and ctx.has("d"):
            _consume_directly(ctx, msg)
        elif ctx.truth("s", False):
            ctx.print("prepare resend msg. originalMsgId=%s", msg_id)
            producer = Producer(f"RESEND_{int(time.time() * 1000)}", ";".join(ctx.admin.namesrv_addrs),
                                credentials=ctx.credentials).start()
            try:
                props = {k: v for k, v in msg.properties.items()}
                r = producer.send(Message(msg.topic, msg.body, properties=props))
            finally:
                producer.shutdown()
            mq = r.message_queue
            ctx.print("%s", f"SendResult [sendStatus={r.status.name}, msgId={r.msg_id}, offsetMsgId="
                            f"{r.offset_msg_id}, messageQueue={mq_string(mq) if mq else 'null'}, "
                            f"queueOffset={r.queue_offset}]")
        else:
            print_message(ctx, msg)


@command("queryMsgByKey", "Query Message by Key", [
    Opt("t", "topic", True, "topic name", required=True),
    Opt("k", "msgKey", True, "Message Key", required=True),
])
def query_msg_by_key(ctx: Context) -> None:
    msgs, _more = ctx.admin.query_message(ctx.req("t"), ctx.req("k"), 64)
    ctx.print("%-50s %4s %40s%n", "#Message ID", "#QID", "#Offset")
    for m in msgs:
        ctx.print("%-50s %4d %40d%n", m.msg_id, m.queue_id, m.queue_offset)


@command("queryMsgByUniqueKey", "Query Message by Unique key", [
    Opt("i", "msgId", True, "Message Id", required=True),
    Opt("g", "consumerGroup", True, "consumer group name"),
    Opt("d", "clientId", True, "The consumer's client id"),
    Opt("t", "topic", True, "The topic of msg", required=True),
    Opt("a", "showAll", False, "Print all message, the limit is 32"),
])
def query_msg_by_unique_key(ctx: Context) -> None:
    msg_id = ctx.req("i")
    msgs, _more = ctx.admin.query_message(ctx.req("t"), msg_id, 32)
    msgs = [m for m in msgs if m.msg_id == msg_id]
    if not msgs:
        raise CommandFailed(f"CODE: {int(ResponseCode.NO_MESSAGE)}  DESC: Query message by key finished, but no "
                            f"message. (the unique key {msg_id} in topic {ctx.req('t')})")
    if ctx.has("g") and ctx.has("d"):
        _consume_directly(ctx, msgs[0])
        return
    for m in msgs if ctx.has("a") else msgs[:1]:
        print_message(ctx, m, offset_id=False)
        ctx.print("%n")


@command("queryMsgByOffset", "Query Message by offset", [
    Opt("t", "topic", True, "topic name", required=True),
    Opt("b", "brokerName", True, "Broker Name", required=True),
    Opt("i", "queueId", True, "Queue Id", required=True),
    Opt("o", "offset", True, "Queue Offset", required=True),
])
def query_msg_by_offset(ctx: Context) -> None:
    mq = MessageQueue(ctx.req("t"), ctx.req("b"), ctx.num("i", 0))
    with pull_consumer(ctx) as consumer:
        res = consumer.pull(mq, ctx.num("o", 0), 1)
    if res.status != PullStatus.FOUND or not res.messages:
        raise CommandFailed(f"no message at offset {ctx.req('o')} of {mq_string(mq)}: {res.status}")
    print_message(ctx, res.messages[0])


def _print_msgs(ctx: Context, msgs: list[MessageExt], charset: str, print_body: bool) -> None:
    for m in msgs:
        body = m.body.decode(charset, errors="replace") if print_body else "NOT PRINT BODY"
        ctx.print("MSGID: %s %s BODY: %s%n", m.msg_id, message_ext_string(m), body)


def _time_opt(ctx: Context, short: str) -> int | None:
    text = ctx.get(short)
    if text is None:
        return None
    try:
        return parse_timestamp(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


@command("printMsg", "Print Message Detail", [
    Opt("t", "topic", True, "topic name", required=True),
    Opt("c", "charsetName ", True, "CharsetName(eg: UTF-8,GBK)"),
    Opt("s", "subExpression ", True, "Subscribe Expression(eg: TagA || TagB)"),
    Opt("b", "beginTimestamp ", True, "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
    Opt("e", "endTimestamp ", True, "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
    Opt("d", "printBody ", True, "print body"),
])
def print_msg(ctx: Context) -> None:
    topic, charset = ctx.req("t"), ctx.get("c") or "UTF-8"
    expr, print_body = ctx.get("s") or "*", ctx.truth("d", True)
    begin, end = _time_opt(ctx, "b"), _time_opt(ctx, "e")
    with pull_consumer(ctx) as consumer:
        for mq in sorted(consumer.fetch_queues(topic)):
            low = consumer.search_offset(mq, begin) if begin is not None else consumer.min_offset(mq)
            high = consumer.search_offset(mq, end) if end is not None else consumer.max_offset(mq)
            ctx.print("minOffset=%s, maxOffset=%s, %s%n", low, high, mq_string(mq))
            offset = low
            while offset < high:
                res = consumer.pull(mq, offset, 32, expr)
                offset = res.next_begin_offset
                if res.status == PullStatus.FOUND:
                    _print_msgs(ctx, res.messages, charset, print_body)
                elif res.status == PullStatus.NO_MATCHED_MSG:
                    ctx.print("%s no matched msg. status=%s, offset=%s%n", mq_string(mq), res.status, offset)
                else:
                    ctx.print("%s print msg finished. status=%s, offset=%s%n", mq_string(mq), res.status, offset)
                    break
            ctx.print("--------------------------------------------------------\n")


@command("sendMessage", "Send a message", [
    Opt("t", "topic", True, "Topic name", required=True),
    Opt("p", "body", True, "UTF-8 string format of the message body", required=True),
    Opt("k", "key", True, "Message keys"),
    Opt("c", "tags", True, "Message tags"),
    Opt("b", "broker", True, "Send message to target broker"),
    Opt("i", "qid", True, "Send message to target queue"),
    Opt("m", "msgTraceEnable", True, "Message Trace Enable, Default: false"),
])
def send_message(ctx: Context) -> None:
    if ctx.has("i") and not ctx.has("b"):
        raise UsageError("Broker name must be set if the queue is chosen!")
    msg = Message(ctx.req("t"), ctx.req("p").encode(), tags=ctx.get("c"), keys=ctx.get("k"))
    producer = Producer(str(int(time.time() * 1000)), ";".join(ctx.admin.namesrv_addrs),
                        credentials=ctx.credentials).start()
    try:
        if ctx.has("b"):
            queue = None
            if ctx.has("i"):
                queue = MessageQueue(msg.topic, ctx.req("b"), ctx.num("i", 0))
            else:
                route = route_of(ctx, msg.topic)
                qd = next((q for q in route["queueDatas"] if q["brokerName"] == ctx.req("b")), None)
                if qd is None:
                    raise CommandFailed(f"the broker {ctx.req('b')} holds no queue of {msg.topic}")
                queue = MessageQueue(msg.topic, ctx.req("b"), int(time.time() * 1000) % qd["writeQueueNums"])
            result = producer.send(msg, queue)
        else:
            result = producer.send(msg)
    finally:
        producer.shutdown()
    ctx.print("%-32s  %-4s  %-20s    %s%n", "#Broker Name", "#QID", "#Send Result", "#MsgId")
    mq = result.message_queue
    ctx.print("%-32s  %-4s  %-20s    %s%n", mq.broker_name if mq else "Unknown", mq.queue_id if mq else "Unknown",
              result.status.name, result.msg_id)


def _pull_range(ctx: Context, consumer: PullConsumer, mq: MessageQueue, low: int, high: int) -> None:
    offset = low
    while offset <= high:
        res = consumer.pull(mq, offset, max(1, min(32, high - offset + 1)))
        offset = res.next_begin_offset
        if res.status == PullStatus.FOUND:
            ctx.print("Consume ok\n")
            _print_msgs(ctx, res.messages, "UTF-8", True)
        elif res.status == PullStatus.NO_MATCHED_MSG:
            ctx.print("%s no matched msg. status=%s, offset=%s\n", mq_string(mq), res.status, offset)
        else:
            ctx.print("%s print msg finished. status=%s, offset=%s\n", mq_string(mq), res.status, offset)
            break


@command("consumeMessage", "Consume message", [
    Opt("t", "topic", True, "Topic name", required=True),
    Opt("b", "brokerName", True, "Broker name"),
    Opt("i", "queueId", True, "Queue Id"),
    Opt("o", "offset", True, "Queue offset"),
    Opt("g", "consumerGroup", True, "Consumer group name"),
    Opt("s", "beginTimestamp ", True, "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
    Opt("e", "endTimestamp ", True, "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
    Opt("c", "MessageNumber", True, "Number of message to be consumed"),
])
def consume_message(ctx: Context) -> None:
    topic, count = ctx.req("t"), ctx.num("c", 128)
    if count <= 0:
        raise UsageError("Please input a positive messageNumber!")
    if ctx.has("i") and not ctx.has("b"):
        raise UsageError("Please set the brokerName before queueId!")
    if ctx.has("o") and not ctx.has("i"):
        raise UsageError("Please set queueId before offset!")
    begin, end = _time_opt(ctx, "s") or 0, _time_opt(ctx, "e") or 0
    now = int(time.time() * 1000)
    if begin > now or end > now:
        raise UsageError("Please set the beginTimestamp/endTimestamp before now!")
    if begin and end and begin > end:
        raise UsageError("Please make sure that the beginTimestamp is less than or equal to the endTimestamp")
    with pull_consumer(ctx, ctx.get("g") or TOOLS_GROUP) as consumer:
        if ctx.has("b") and ctx.has("i"):
            mq = MessageQueue(topic, ctx.req("b"), ctx.num("i", 0))
            low = consumer.search_offset(mq, begin) if begin else consumer.min_offset(mq)
            high = (consumer.search_offset(mq, end) if end else consumer.max_offset(mq))
            offset = ctx.num("o", low)
            if offset > high:
                ctx.print("%s no matched msg, offset=%s\n", mq_string(mq), offset)
                return
            low = max(low, offset)
            if high - low > count:
                ctx.print("The oldler %d message will be provided\n", count)
                high = low + count - 1
            _pull_range(ctx, consumer, mq, low, high)
            return
        left = count
        for mq in sorted(consumer.fetch_queues(topic)):
            if ctx.has("b") and mq.broker_name != ctx.req("b"):
                continue
            if left == 0:
                return
            low = consumer.search_offset(mq, begin) if begin else consumer.min_offset(mq)
            high = consumer.search_offset(mq, end) if end else consumer.max_offset(mq)
            if high - low > left:
                ctx.print("The older %d message of the %d queue will be provided\n", left, mq.queue_id)
                high, left = low + left - 1, 0
            else:
                left -= high - low + 1 if high > low else 0
            _pull_range(ctx, consumer, mq, low, high)
