"""Well-known names, defined once (a stdlib-only leaf every layer may import): RocketMQ's system topics and
topic prefixes, reserved groups, and the message property names (upstream ``MessageConst``, ``MixAll``,
``TopicValidator``), plus the few this product adds (marked "ours")."""

from __future__ import annotations

# Topics and prefixes (upstream TopicValidator / MixAll)
DEFAULT_TOPIC = "TBW102"  # the template clients fall back to for a topic that does not exist yet
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SYSTEM_TOPICS = frozenset({SCHEDULE_TOPIC, TRACE_TOPIC, DEFAULT_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC})

# Reserved groups
TRANSACTION_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
ADMIN_GROUP = "broker_core_admin"  # ours: the console's browsing and admin reads (not a delivery)

# Property names (upstream MessageConst)
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CLUSTER = "CLUSTER"
# RocketMQ 5 timer messages (MessageConst): deliver at this epoch ms, or this many seconds / ms after the send
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_PROPERTIES = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)
TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC: timer records wait here (queue 0)
# ours: where a delayed message came from, and why and when a message was dead-lettered or resent
PROPERTY_SCHEDULE_ORIGIN = "SCHEDULE_ORIGIN"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_REASON = "DLQ_REASON"
PROPERTY_DLQ_TIMESTAMP = "DLQ_TIMESTAMP"
PROPERTY_RESEND_FROM_DLQ = "RESEND_FROM_DLQ"
