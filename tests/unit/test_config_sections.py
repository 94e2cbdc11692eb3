"""BrokerConfig by concern: the files and GET_BROKER_CONFIG keep RocketMQ's flat keys.

``tests/golden/broker_config_properties.txt`` is GET_BROKER_CONFIG's body as the flat BrokerConfig answered it
(captured before the regrouping, store root ``/golden/store``); the grouped one must answer every line of it
unchanged, and add only the keys of the sections new with RocketMQ 5 (controller mode, metrics).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from broker_core.config import (
    SECRET_KEYS,
    AclConfig,
    BrokerConfig,
    ConfigError,
    ControllerModeConfig,
    FlushConfig,
    MetricsConfig,
)
from broker_core.server.admin import config_properties

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "broker_config_properties.txt"
NEW_SECTIONS = (ControllerModeConfig, MetricsConfig)
ADDED_KEYS = {"forceRegister", "compressedRegister"}  # RocketMQ's registration keys, added after the capture


def _golden() -> dict[str, str]:
    return dict(line.split("=", 1) for line in GOLDEN.read_text().splitlines())


def _new_keys() -> set[str]:
    return {f.metadata["key"] for cls in NEW_SECTIONS for f in dataclasses.fields(cls)} | ADDED_KEYS


def test_get_broker_config_answers_what_the_flat_config_answered() -> None:
    now = config_properties(BrokerConfig().with_store_dir("/golden/store"))
    before = _golden()
    assert {k: now[k] for k in before if k in now} == before
    assert not set(before) - set(now)
    assert _new_keys() <= set(now) - set(before)  # keys added since are RocketMQ's too, each in its section


def test_every_key_sits_in_one_place_and_names_are_unique() -> None:
    keys = BrokerConfig.keys()
    canonical = [k for k in keys.values() if k.canonical]
    assert len({k.name for k in canonical}) == len(canonical)
    assert keys["mappedFileSizeCommitLog"].key == "mappedFileSizeCommitLog"  # an alias, answered under its key
    assert keys["mappedFileSizeCommitLog"].field is keys["mapedFileSizeCommitLog"].field
    assert keys["flushDiskType"].section == "flush" and keys["brokerName"].section == ""
    assert keys["enableControllerMode"].section == "controller" and keys["metricsExporterType"].section == "metrics"


def test_flat_file_keys_land_in_their_sections(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("flushDiskType=SYNC_FLUSH\nhaSendHeartbeatInterval=1234\naclEnable=true\nclusterSecret=s3cret!!\n"
                    "grpcListenPort=8081\nmappedFileSizeCommitLog=65536\nenableControllerMode=true\n"
                    "controllerAddr=127.0.0.1:9878\nmetricsExporterType=PROM\nmetricsPromExporterPort=5558\n")
    cfg = BrokerConfig.load(path, env={"BROKER_CORE_SERVER_MAX_INFLIGHT_PER_CONNECTION": "7"})
    assert cfg.flush.flush_disk_type == "SYNC_FLUSH" and cfg.flush.sync_flush
    assert cfg.ha.ha_send_heartbeat_interval_ms == 1234
    assert cfg.acl.acl_enable and cfg.cluster_secret == "s3cret!!"
    assert cfg.grpc.grpc_listen_port == 8081
    assert cfg.store.mapped_file_size_commit_log_bytes == 65536
    assert cfg.remoting.server_max_inflight == 7
    assert cfg.controller.enable_controller_mode and cfg.controller.controller_addr == "127.0.0.1:9878"
    assert (cfg.metrics.metrics_exporter_type, cfg.metrics.metrics_prom_exporter_port) == ("PROM", 5558)
    assert cfg.get("haSendHeartbeatInterval") == 1234 and cfg.unknown_keys == []


def test_rocketmq5_defaults_of_the_new_sections() -> None:
    cfg = BrokerConfig().with_store_dir("/r")
    c = cfg.controller
    assert (c.enable_controller_mode, c.controller_addr, c.all_ack_in_sync_state_set) == (False, "", False)
    assert (c.in_sync_replicas, c.min_in_sync_replicas, c.ha_max_time_slave_not_catchup_ms) == (1, 1, 15_000)
    assert (c.sync_broker_metadata_period_ms, c.check_sync_state_set_period_ms) == (5000, 5000)
    assert (c.controller_heartbeat_timeout_ms, c.broker_heartbeat_interval_ms) == (10_000, 1000)
    assert c.broker_election_priority == 2**31 - 1
    assert cfg.epoch_file_path == Path("/r/epochFileCheckpoint")
    m = cfg.metrics
    assert (m.metrics_exporter_type, m.metrics_prom_exporter_host) == ("DISABLE", "")
    assert m.metrics_prom_exporter_port == 5557
    with pytest.raises(ConfigError, match="metricsExporterType"):
        BrokerConfig(metrics=MetricsConfig(metrics_exporter_type="SNMP")).validate()


def test_updates_reach_the_section_a_service_holds() -> None:
    cfg = BrokerConfig()
    flush: FlushConfig = cfg.flush  # what the flush services are given
    updates = BrokerConfig.parse_updates({"flushCommitLogLeastPages": "9", "aclEnable": "true", "nope": "1"})
    assert updates == {"flushCommitLogLeastPages": 9, "aclEnable": True}
    for key, value in updates.items():
        cfg.set(key, value)
    assert flush.flush_commit_log_least_pages == 9 and cfg.acl.acl_enable
    assert cfg.acl_enable  # the send lane's read (C, by name) follows the section
    with pytest.raises(ConfigError, match="maxIndexNum"):
        BrokerConfig.parse_updates({"maxIndexNum": "many"})


def test_copies_and_store_dirs_do_not_share_sections() -> None:
    cfg = BrokerConfig(acl=AclConfig(acl_file="/x/acl.yml"))
    moved = cfg.with_store_dir("/elsewhere")
    moved.acl.acl_enable = True
    moved.flush.flush_disk_type = "SYNC_FLUSH"
    assert not cfg.acl.acl_enable and cfg.flush.flush_disk_type == "ASYNC_FLUSH"
    assert moved.store.commit_log_dir == Path("/elsewhere/commitlog") and moved.acl_file_path == Path("/x/acl.yml")
    copy = moved.copy()
    copy.set_field("ha_transfer_batch_size", 1)
    assert moved.ha.ha_transfer_batch_size == 32 * 1024


def test_secrets_are_not_reported() -> None:
    props = config_properties(BrokerConfig(cluster_secret="a-long-secret"))
    assert SECRET_KEYS and not SECRET_KEYS & set(props)
