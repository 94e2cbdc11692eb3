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


def test_compressed_registration_is_upstream_encode_and_the_name_server_reads_it(tmp_path: Path) -> None:
    import struct

    from broker_core.namesrv.server import _registration_body
    from broker_core.server import registration

    cfg = BrokerConfig().with_store_dir(tmp_path)
    cfg.compressed_register = True
    ctl = BrokerController(cfg)
    try:
        ctl.topics.upsert_many([TopicConfig(f"T{i}", 8, 4, 6, False, "MULTI_TAG") for i in range(3)])
        cmd = ctl.registration_request()
        assert cmd.header["compressed"] is True and cmd.header["bodyCrc32"] == zlib.crc32(cmd.body) & 0x7FFFFFFF
        raw = zlib.decompress(cmd.body)
        n = struct.unpack(">i", raw[:4])[0]
        assert json.loads(raw[4:4 + n]) == {"counter": ctl.topics.data_version,
                                            "timestamp": ctl.topics.data_version_ts}
        assert b"\x00\x00\x00\x12T1 8 4 6 MULTI_TAG" in raw and raw.endswith(b"\x00\x00\x00\x02[]")
        table, version = _registration_body(cmd.body, compressed=True)
        assert table["T2"]["writeQueueNums"] == 4 and table["T2"]["readQueueNums"] == 8
        assert set(table) == set(ctl.topics.table) and version == json.loads(raw[4:4 + n])
        # QUERY_DATA_VERSION: the broker's DataVersion out, the name server's "changed" and its own back in
        query = registration.query_data_version(cfg, "127.0.0.1:1", registration.data_version(ctl.topics))
        assert query.code == RequestCode.QUERY_DATA_VERSION and json.loads(query.body)["counter"] == \
            ctl.topics.data_version
        held = registration.data_version(ctl.topics)
        same = query.response(0, header={"changed": False}, body=json.dumps(held).encode())
        assert not registration.name_server_changed(same, held)
        assert registration.name_server_changed(query.response(0, header={"changed": True}), held)
        older = query.response(0, header={"changed": False}, body=json.dumps({**held, "counter": 1}).encode())
        assert registration.name_server_changed(older, held)
    finally:
        ctl.store.shutdown()
