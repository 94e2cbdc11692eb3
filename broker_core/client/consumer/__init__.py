"""Consumers: :class:`PullConsumer` (the application manages offsets) and :class:`PushConsumer` (pull-based,
rebalanced, with flow control and committed offsets). ``base`` holds what both share, ``process_queue`` a pushed
queue's cache."""

from broker_core.client.consumer.base import (
    CONSUME_FROM_FIRST,
    CONSUME_FROM_LAST,
    CONSUME_FROM_TIMESTAMP,
    PullResult,
    PullStatus,
    _ConsumerBase,
    decode_records,
    subscription_data,
)
from broker_core.client.consumer.process_queue import Listener, ProcessQueue
from broker_core.client.consumer.pull import PullConsumer
from broker_core.client.consumer.push import PushConsumer

__all__ = ["CONSUME_FROM_FIRST", "CONSUME_FROM_LAST", "CONSUME_FROM_TIMESTAMP", "Listener", "ProcessQueue",
           "PullConsumer", "PullResult", "PullStatus", "PushConsumer", "_ConsumerBase", "decode_records",
           "subscription_data"]
