"""Request and response codes, named and numbered after RocketMQ's ``RequestCode`` / ``ResponseCode``."""

from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    """Codes a request carries. Client -> broker, broker admin and name server codes are RocketMQ 4.9's; the
    receive/ack codes are RocketMQ 5's; broker_core's own admin operations (store maintenance, delivery, trace
    events, snapshots) are in :data:`OWN_CODE_BLOCK`, see there."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    # ACL 1.0 admin (plain_acl.yml; server/acl_admin.py)
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    # name server
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221  # broker -> client
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    VIEW_BROKER_STATS_DATA = 315
    GET_BROKER_CONSUME_STATS = 317
    QUERY_DATA_VERSION = 322
    SEND_BATCH_MESSAGE = 320
    ADD_WRITE_PERM_OF_BROKER = 327
    DELETE_EXPIRED_COMMITLOG = 329
    # RocketMQ 5 receive/ack (POP)
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    BATCH_ACK_MESSAGE = 200151
    # broker_core's own admin operations, in OWN_CODE_BLOCK (30900-30911 were 900-911 before RocketMQ 5's clash)
    CLEAN_EXPIRED_FILES = 30900
    CHECK_DISK = 30901
    DELIVER_DELAYED = 30903
    GET_DELAY_BACKLOG = 30904
    RESEND_DEAD_LETTERS = 30907
    REPORT_CONSUME_TRACE = 30908
    SNAPSHOT_SEGMENTS = 30909
    RELEASE_SNAPSHOT = 30910
    READ_SNAPSHOT_SEGMENT = 30911  # a byte range of a snapshot's segment, for readers on other hosts (Spark)


OWN_CODE_BLOCK = range(30900, 31000)
"""The request codes broker_core reserves for its own operations; every other :class:`RequestCode` is RocketMQ's.

They were 900-911 until RocketMQ 5 was checked: its ``RequestCode`` (remoting/.../protocol/RequestCode.java) gives
901-908 to GET_BROKER_MEMBER_GROUP, ADD_BROKER, REMOVE_BROKER, BROKER_HEARTBEAT, NOTIFY_MIN_BROKER_ID_CHANGE,
EXCHANGE_BROKER_HA_INFO, GET_BROKER_HA_STATUS and RESET_MASTER_FLUSH_OFFSET, so a RocketMQ 5 admin tool asking for
the HA status (907) reached the dead-letter resend. Every number below 32768 that RocketMQ uses on any branch of
apache/rocketmq (4.x and 5.x: 10-61, 100-106, 200-225, 300-422, 513-666, 901-908, 1000-1019, 1217, 2001-2041,
3001-3010, 3442-3543, 4000-4009) is far below this block; above 32767 it uses 200050-200151 (POP). The block
stays below 32768 because the ROCKETMQ serialize type carries the code in a signed 2-byte field (the JSON type
in a Java int): a larger code would push every request onto the JSON fallback, and ``spark_jobs.remote``, which
writes binary headers only, could not send READ_SNAPSHOT_SEGMENT at all. Each own code is its old number + 30000,
so logs and notes that name the old ones still map. RocketMQ's own codes that this broker does not serve (901-908
among them) get REQUEST_CODE_NOT_SUPPORTED."""


class ResponseCode(enum.IntEnum):
    """RocketMQ 4.9's ``ResponseCode`` (with ``RemotingSysResponseCode``); nothing else is ever sent."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    FLOW_CONTROL = 215
