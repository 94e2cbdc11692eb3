"""TransactionProducer: half message, local transaction, commit or rollback, and answering check-backs.

    def execute(msg, arg):            # your local transaction
        db.insert(arg); return TransactionState.COMMIT_MESSAGE

    def check(msg):                   # the broker asks about an unresolved transaction
        return TransactionState.COMMIT_MESSAGE if db.has(msg.keys[0]) else TransactionState.ROLLBACK_MESSAGE

    producer = TransactionProducer("orders-tx", "127.0.0.1:9876", check).start()
    producer.send_message_in_transaction(Message("orders", b"..."), execute, arg=order)

Consumers see the message only after a commit; a rollback discards it; UNKNOW (or an exception in
``execute``) leaves it to the broker's check-back, which calls ``check`` on a live producer of the group.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from typing import Any

from broker_core.client.message import ClientError, Message, MessageExt, SendResult, decode_message_exts
from broker_core.client.producer import Producer
from broker_core.codec import CodecError
from broker_core.codec.message import PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_PREPARED
from broker_core.codec.message_id import decode_offset_msg_id
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.headers import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from broker_core.remoting.client import run_sync

log = logging.getLogger(__name__)


class TransactionState(enum.Enum):
    """Values are END_TRANSACTION's ``commitOrRollback`` (RocketMQ's MessageSysFlag transaction types)."""

    COMMIT_MESSAGE = TRANSACTION_COMMIT_TYPE
    ROLLBACK_MESSAGE = TRANSACTION_ROLLBACK_TYPE
    UNKNOW = TRANSACTION_NOT_TYPE


Checker = Callable[[MessageExt], TransactionState]
Executor = Callable[[Message, Any], TransactionState]


class TransactionProducer(Producer):
    def __init__(self, group: str, namesrv_addr: str, checker: Checker, **kw: Any) -> None:
        super().__init__(group, namesrv_addr, **kw)
        self.checker = checker

    def start(self) -> TransactionProducer:
        super().start()
        self.instance.notification_handlers.setdefault(int(RequestCode.CHECK_TRANSACTION_STATE), []).append(
            self._on_check)
        return self

    def send_message_in_transaction(self, msg: Message, execute: Executor,
                                    arg: Any = None) -> tuple[SendResult, TransactionState]:
        """Send ``msg`` as a half message, run ``execute(msg, arg)``, then commit or roll back."""
        half = Message(msg.topic, msg.body, msg.tags, msg.keys, {**(msg.properties or {}),
                                                                PROPERTY_TRANSACTION_PREPARED: "true",
                                                                PROPERTY_PRODUCER_GROUP: self.group}, msg.flag)
        result = self.send(half)
        run_sync(self.instance.heartbeat_all())  # the broker must know where to send check-backs
        try:
            state = execute(msg, arg)
        except Exception:
            log.exception("local transaction of %s raised; leaving it to the check-back", result.msg_id)
            state = TransactionState.UNKNOW
        if state is not TransactionState.UNKNOW:
            self._end(result, state)
        return result, state

    def _end(self, result: SendResult, state: TransactionState) -> None:
        assert result.message_queue is not None
        addr = self.instance.broker_addr(result.message_queue.broker_name)
        _, _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        resp = run_sync(self.instance.invoke(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, {
            "producerGroup": self.group, "tranStateTableOffset": result.queue_offset,
            "commitLogOffset": commit_log_offset, "commitOrRollback": state.value, "fromTransactionCheck": False,
            "msgId": result.msg_id, "transactionId": result.msg_id})))
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(resp.code, resp.remark)

    def _on_check(self, cmd: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (header ``tranStateTableOffset, commitLogOffset, msgId, transactionId``;
        the half message as body). Client loop thread: answer on a worker thread, so a slow checker does not
        block I/O."""
        try:
            msgs = decode_message_exts(cmd.body, "")
        except CodecError as exc:
            log.warning("ignoring a transaction check with a malformed body: %s", exc)
            return
        if not msgs or msgs[0].properties.get(PROPERTY_PRODUCER_GROUP) != self.group:
            return
        msg = msgs[0]
        msg.topic = msg.properties.get("REAL_TOPIC", msg.topic)

        def answer() -> None:
            try:
                state = self.checker(msg)
            except Exception:
                log.exception("transaction checker raised for %s", msg.msg_id)
                return
            if state is TransactionState.UNKNOW:
                return
            header = {"producerGroup": self.group, "tranStateTableOffset": cmd.header.get("tranStateTableOffset"),
                      "commitLogOffset": cmd.header.get("commitLogOffset", msg.commit_log_offset),
                      "commitOrRollback": state.value, "fromTransactionCheck": True,
                      "msgId": cmd.header.get("msgId", msg.msg_id), "transactionId": cmd.header.get("transactionId")}

            try:  # the broker that stored the half message asked; its address is the record's store host
                run_sync(self.instance.invoke(msg.store_host, RemotingCommand.request(
                    RequestCode.END_TRANSACTION, header)))
            except (ClientError, ConnectionError, TimeoutError) as exc:
                log.warning("answering the check of %s failed: %s", msg.msg_id, exc)

        threading.Thread(target=answer, name="transaction-check", daemon=True).start()
