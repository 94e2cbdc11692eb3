"""The broker's REGISTER_BROKER request is the one a 4.9 broker sends (reference §2.2)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from broker_core.config import BrokerConfig
from broker_core.protocol import RequestCode
from broker_core.server.controller import BrokerController
from broker_core.server.state import TopicConfig


def test_registration_request(tmp_path: Path) -> None:
    ctl = BrokerController(BrokerConfig().with_store_dir(tmp_path))
    try:
        ctl.topics.upsert(TopicConfig("Orders", 8, 8, 6, True))
        cmd = ctl.registration_request()
        assert cmd.code == RequestCode.REGISTER_BROKER
        h = cmd.header
        assert {k: h[k] for k in ("clusterName", "brokerName", "brokerId", "haServerAddr", "compressed")} == {
            "clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0, "haServerAddr": "",
            "compressed": False}
        assert h["bodyCrc32"] == zlib.crc32(cmd.body) & 0x7FFFFFFF
        body = json.loads(cmd.body)
        assert body["filterServerList"] == []
        wrapper = body["topicConfigSerializeWrapper"]
        assert wrapper["dataVersion"]["counter"] == ctl.topics.data_version
        assert wrapper["topicConfigTable"]["Orders"] == {
            "order": True, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG", "topicName": "Orders",
            "topicSysFlag": 0, "writeQueueNums": 8}
    finally:
        ctl.store.shutdown()
