"""The Python SDK: producers, consumers and the admin client, speaking the broker protocol.

    from broker_core.client import Producer, PushConsumer, Message, ConsumeStatus

    producer = Producer("my-producers", namesrv_addr="127.0.0.1:9876").start()
    result = producer.send(Message("orders", b'{"id": 1}', tags="created", keys="order-1"))
"""

from broker_core.client.admin import AdminClient
from broker_core.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueByCircle
from broker_core.client.consumer import PullConsumer, PullResult, PullStatus, PushConsumer
from broker_core.client.message import (
    ClientError,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
)
from broker_core.client.producer import Producer, select_by_key
from broker_core.client.simple import SimpleConsumer
from broker_core.client.transaction import TransactionProducer, TransactionState
from broker_core.protocol.acl import SessionCredentials

__all__ = [
    "AdminClient", "AllocateMessageQueueAveragely", "AllocateMessageQueueByCircle", "ClientError", "ConsumeStatus",
    "Message", "MessageExt", "MessageQueue", "Producer", "PullConsumer", "PullResult", "PullStatus", "PushConsumer",
    "SendResult", "SendStatus", "SessionCredentials", "SimpleConsumer", "TransactionProducer", "TransactionState",
    "select_by_key",
]
