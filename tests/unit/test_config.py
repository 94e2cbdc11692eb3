from __future__ import annotations

import pytest

from broker_core.codec.properties_file import parse_properties
from broker_core.config import BrokerConfig, ConfigError

# The seeds' sample broker.conf, verbatim (001:L407-431).
SAMPLE_CONF = r"""brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
# namesrvAddr地址
namesrvAddr=127.0.0.1:9876
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
autoCreateTopicEnable=true
# 存储路径
storePathRootDir=E:\\RocketMQ\\data\\rocketmq\\dataDir
# commitLog路径
storePathCommitLog=E:\\RocketMQ\\data\\rocketmq\\dataDir\\commitlog
# 消息队列存储路径
storePathConsumeQueue=E:\\RocketMQ\\data\\rocketmq\\dataDir\\consumequeue
# 消息索引存储路径
storePathIndex=E:\\RocketMQ\\data\\rocketmq\\dataDir\\index
# checkpoint文件路径
storeCheckpoint=E:\\RocketMQ\\data\\rocketmq\\dataDir\\checkpoint
# abort文件存储路径
abortFile=E:\\RocketMQ\\data\\rocketmq\\dataDir\\abort
"""


def test_seed_sample_conf_loads_unchanged(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(SAMPLE_CONF, encoding="utf-8")
    cfg = BrokerConfig.load(path, env={})
    assert cfg.broker_cluster_name == "DefaultCluster"
    assert cfg.broker_name == "broker-a"
    assert cfg.broker_id == 0
    assert cfg.namesrv_addr == "127.0.0.1:9876"
    assert cfg.retention.delete_when == "04" and cfg.retention.delete_when_hours == [4]
    assert cfg.retention.file_reserved_time_hours == 48
    assert cfg.broker_role == "ASYNC_MASTER"
    assert cfg.flush.flush_disk_type == "ASYNC_FLUSH"
    assert cfg.auto_create_topic_enable is True
    assert cfg.store.store_path_root_dir == r"E:\RocketMQ\data\rocketmq\dataDir"
    assert cfg.store.store_path_commit_log == r"E:\RocketMQ\data\rocketmq\dataDir\commitlog"
    assert cfg.store.abort_file == r"E:\RocketMQ\data\rocketmq\dataDir\abort"
    assert cfg.unknown_keys == []
    moved = cfg.with_store_dir(tmp_path / "s")
    assert moved.store.commit_log_dir == tmp_path / "s" / "commitlog"
    assert moved.retention.file_reserved_time_hours == 48


def test_defaults_follow_the_seeds():
    cfg = BrokerConfig()
    assert cfg.store.mapped_file_size_commit_log_bytes == 1024**3
    assert cfg.store.mapped_file_size_consume_queue_bytes == 6_000_000
    assert cfg.retention.file_reserved_time_hours == 72
    assert cfg.retention.delete_when == "04"
    assert cfg.retention.disk_max_used_space_percent == 75
    ret = cfg.retention
    assert (ret.disk_space_clean_forcibly_ratio, ret.disk_space_warning_level_ratio) == (0.85, 0.90)
    assert cfg.store.max_message_size_bytes == 4 * 1024 * 1024
    assert cfg.flush.flush_disk_type == "ASYNC_FLUSH" and cfg.flush.sync_flush_timeout_ms == 5000
    assert cfg.timer.delay_levels_ms[:3] == [1000, 5000, 10_000] and cfg.timer.delay_levels_ms[-1] == 7_200_000
    assert cfg.auto_create_topic_enable is True  # RocketMQ's default


def test_env_overrides_file(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("deleteWhen=04\nfileReservedTime=48\nsomethingElse=1\n")
    cfg = BrokerConfig.load(path, env={"BROKER_CORE_DELETE_WHEN": "03;05", "BROKER_CORE_fileReservedTime": "1.5",
                                       "BROKER_URL": "redis://ignored"})
    assert cfg.retention.delete_when_hours == [3, 5]
    assert cfg.retention.file_reserved_time_hours == 1.5
    assert cfg.unknown_keys == ["somethingElse"]


@pytest.mark.parametrize("text,match", [
    ("flushDiskType=SOMETIMES", "flushDiskType"),
    ("brokerId=zero", "brokerId"),
    ("deleteWhen=25", "deleteWhen"),
    ("messageIndexEnable=yes", "messageIndexEnable"),
    ("mapedFileSizeConsumeQueue=21", "multiple of 20"),
])
def test_bad_values_are_named(tmp_path, text, match):
    path = tmp_path / "broker.conf"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        BrokerConfig.load(path, env={})


def test_properties_syntax():
    parsed = parse_properties("a=1\n! comment\nb : two words  \nc\\=d=3\nlong=x\\\n   y\nu=\\u0041\n")
    assert parsed == {"a": "1", "b": "two words", "c=d": "3", "long": "xy", "u": "A"}
