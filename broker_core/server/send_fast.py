"""The broker's fast path for the common send: a SEND_MESSAGE_V2 of one plain message (no batch flag, no
transaction, not to a retry topic) to an existing writable topic and queue, under ASYNC_FLUSH without a slave to
wait for. It reads the V2 letters directly (no V1 map), remembers the born host per connection and the topic-name
check per topic, builds the ``MessageInner`` in one codec call (``codec/send_v2.py``, in C), and answers a stored
message with the response frame encoded at once (same fields, same order as ``produce._send_response``'s; a JSON
request or a refused put gets that function's answer). Anything unusual returns None: the general path in ``produce.py``
decides, with its checks and errors. tests/unit/server/test_send_fast_path.py holds both paths equal.

The send lane (:func:`make_lane`) goes one step further for the commonest read, one whole frame of such a send: the
broker's connection hands it the read's bytes before decoding them, and ``_native.serve_send_v2`` (C) answers it in
one call: the same checks as ``produce.send``, :func:`single_v2` and ``MessageStore.put_message``, in the same order,
the same record stored and the same response frame, without the request object, the dispatch and the handler
frames. It answers only sends to topics :func:`single_v2` has already found valid, on connections whose born host it
has already remembered; anything else, or anything unusual, answers None before anything is stored, and the read
takes the general way. Without the C codec there is no lane. tests/unit/server/test_send_lane.py holds the lane's
answers and records equal to the general path's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.codec.message import host_to_bytes
from broker_core.codec.native import NATIVE
from broker_core.codec.send_v2 import v2_message
from broker_core.codec.wire import SERIALIZE_ROCKETMQ, encode_send_ok
from broker_core.protocol import RemotingCommand
from broker_core.protocol.command import CURRENT_VERSION, LANGUAGE, LANGUAGE_ORDINAL
from broker_core.protocol.validation import RETRY_GROUP_TOPIC_PREFIX, topic_error
from broker_core.remoting.server import Connection
from broker_core.server.state import PERM_WRITE
from broker_core.store import MessageInner, PutMessageResult, PutStatus

if TYPE_CHECKING:
    from broker_core.server.ports import Broker

PUT_OK = PutStatus.PUT_OK
SingleV2 = Callable[[RemotingCommand, Connection, dict[str, str]], "RemotingCommand | bytes | None"]
SendResponse = Callable[["Broker", RemotingCommand, list[PutMessageResult], int], RemotingCommand]
# (the bytes of one read, its connection) -> the answer frame, or None: the read goes the general way
Lane = Callable[[bytes, Connection], "bytes | None"]


def make_single_v2(ctl: Broker, send_response: SendResponse,
                   born_of: Callable[[Connection], tuple[str, int]], valid_names: dict[str, bool]) -> SingleV2:
    """The fast path for ``ctl``: ``send_response`` and ``born_of`` are the general path's own; ``valid_names`` is
    the topic-name check it remembers (shared with :func:`make_lane`)."""
    put_nowait = ctl.store.put_messages_nowait
    language = LANGUAGE_ORDINAL[LANGUAGE]

    def valid_topic(topic: str) -> bool:
        """topic_error(topic) is None, remembered (at most a few times the table's size)."""
        ok = valid_names.get(topic)
        if ok is None:
            ok = topic_error(topic) is None
            if len(valid_names) >= 4 * len(ctl.topics.table) + 64:
                valid_names.clear()
            valid_names[topic] = ok
        return ok

    config = ctl.config

    def single_v2(cmd: RemotingCommand, conn: Connection, h: dict[str, str]) -> RemotingCommand | bytes | None:
        topic = h["b"]
        cfg = ctl.topics.table.get(topic)  # read each time: upserts replace the table
        qtext, btext = h.get("e"), h.get("m")
        if (cfg is None or not cfg.perm & PERM_WRITE or not (valid_names.get(topic) or valid_topic(topic)) or not qtext
                or (btext and btext.lower() == "true")
                or topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or ctl.store.sync_flush
                or config.broker_role == "SYNC_MASTER"):  # ctl.ha.sync_master, inlined
            return None
        born = conn.attributes.get("born")
        if born is None:
            host, port = born_of(conn)
            born = conn.attributes["born"] = (host_to_bytes(host), port)
        msg = v2_message(MessageInner, h, cmd.body, cfg.write_queue_nums, config.broker_cluster_name, born[0],
                         born[1])
        if msg is None:
            return None
        queue_id = msg.queue_id
        results, _ = put_nowait([msg])
        r = results[0]
        if r.status is not PUT_OK or cmd.serialize_type != SERIALIZE_ROCKETMQ:
            if r.ok:
                ctl.stats.put_count += 1
            return send_response(ctl, cmd, results, queue_id)
        ctl.stats.put_count += 1
        return encode_send_ok(cmd.opaque, language, CURRENT_VERSION, r.store_host, r.store_port, r.phy_offset, queue_id,
                              r.queue_offset, config.region_id, "true" if config.trace_on else "false")

    return single_v2


def make_lane(ctl: Broker, valid_names: dict[str, bool]) -> Lane | None:
    """The send lane for ``ctl`` (module docstring), or None without the C codec. ``valid_names`` is
    :func:`make_single_v2`'s. The context tuple's order is ``serve_send_v2``'s (``L_*`` in
    ``codec/_native_c/send_lane.c``)."""
    if NATIVE is None:
        return None
    max_frame = ctl.config.remoting.server_max_frame_bytes
    ctx = (ctl.topics, valid_names, ctl.config, ctl.store, ctl.store.commit_log, ctl.stats, ctl.tracer,
           MessageInner, PutMessageResult, PUT_OK, LANGUAGE_ORDINAL[LANGUAGE], CURRENT_VERSION, max_frame)
    return functools.partial(NATIVE.serve_send_v2, ctx)
