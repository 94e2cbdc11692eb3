"""Config files in RocketMQ 4.9's form (reference §7.5): written as Java writes them, read from Java's text,
from this product's earlier snake_case files, and from ``.bak`` when the file is damaged."""

from __future__ import annotations

from pathlib import Path

from broker_core.codec.fastjson import loads_fastjson
from broker_core.server.state import (
    ConsumerOffsetManager,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
    TopicConfig,
    TopicConfigManager,
)

# As RocketMQ 4.9 writes them (fastjson PrettyFormat: tabs, unquoted integer keys, odd line breaks).
JAVA_TOPICS = """{
\t"dataVersion":{
\t\t"counter":3,
\t\t"timestamp":1700000000000
\t},
\t"topicConfigTable":{
\t\t"Orders":{
\t\t\t"order":true,
\t\t\t"perm":6,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"MULTI_TAG",
\t\t\t"topicName":"Orders",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t}
\t}
}"""
JAVA_OFFSETS = ('{\n\t"offsetTable":{\n\t\t"Orders@cg":{0:118,1:97,2:0,3:5\n\t\t},\n'
                '\t\t"%RETRY%cg@cg":{0:0\n\t\t}\n\t}\n}')
JAVA_GROUPS = """{"dataVersion":{"counter":1,"timestamp":1700000000000},
"subscriptionGroupTable":{"cg":{"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,
"consumeFromMinEnable":true,"groupName":"cg","notifyConsumerIdsChangedEnable":true,
"retryMaxTimes":3,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}"""


def test_reads_java_files(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text(JAVA_TOPICS)
    (tmp_path / "consumerOffset.json").write_text(JAVA_OFFSETS)
    (tmp_path / "subscriptionGroup.json").write_text(JAVA_GROUPS)
    topics = TopicConfigManager(tmp_path)
    assert topics.get("Orders") == TopicConfig("Orders", 8, 8, 6, True, "MULTI_TAG", 0)
    assert topics.data_version == 3
    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.query("cg", "Orders", 0) == 118 and offsets.query("cg", "Orders", 3) == 5
    assert offsets.query("cg", "%RETRY%cg", 0) == 0 and offsets.query("cg", "Orders", 4) == -1
    groups = SubscriptionGroupManager(tmp_path)
    assert groups.table["cg"] == SubscriptionGroupConfig("cg", consume_broadcast_enable=False, retry_max_times=3)


def test_writes_java_form(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path)
    topics.upsert(TopicConfig("Orders", 8, 8, 6, True))
    text = (tmp_path / "topics.json").read_text()
    assert "\t" in text and ": " not in text
    doc = loads_fastjson(text)
    assert doc["dataVersion"]["counter"] == topics.data_version >= 2 and doc["dataVersion"]["timestamp"] > 0
    assert doc["topicConfigTable"]["Orders"] == {
        "order": True, "perm": 6, "readQueueNums": 8, "topicFilterType": "SINGLE_TAG", "topicName": "Orders",
        "topicSysFlag": 0, "writeQueueNums": 8}
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit("cg", "Orders", 1, 97)
    offsets.commit("cg", "Orders", 0, 118)
    offsets.persist()
    compact = offsets.encode()
    assert compact == '{"offsetTable":{"Orders@cg":{0:118,1:97}}}'  # integer keys bare, as fastjson writes
    assert "0:118" in (tmp_path / "consumerOffset.json").read_text()
    groups = SubscriptionGroupManager(tmp_path)
    groups.get_or_create("cg")
    assert loads_fastjson(groups.encode())["subscriptionGroupTable"]["cg"] == {
        "brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True, "consumeFromMinEnable": True,
        "groupName": "cg", "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16, "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1, "consumeMessageOrderly": False}
    # and it reads back
    assert TopicConfigManager(tmp_path).get("Orders") == topics.get("Orders")
    assert ConsumerOffsetManager(tmp_path).query("cg", "Orders", 1) == 97


def test_reads_earlier_snake_case_files(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text(
        '{"dataVersion": 4, "topicConfigTable": {"T": {"topic_name": "T", "read_queue_nums": 2, '
        '"write_queue_nums": 2, "perm": 6, "order": false}}}')
    (tmp_path / "consumerOffset.json").write_text('{"offsetTable": {"T@g": {"0": 5, "1": 7}}}')
    (tmp_path / "subscriptionGroup.json").write_text(
        '{"subscriptionGroupTable": {"g": {"group_name": "g", "consume_enable": false, "retry_max_times": 2}}}')
    assert TopicConfigManager(tmp_path).get("T") == TopicConfig("T", 2, 2, 6)
    assert TopicConfigManager(tmp_path).data_version == 4
    assert ConsumerOffsetManager(tmp_path).query("g", "T", 1) == 7
    g = SubscriptionGroupManager(tmp_path).table["g"]
    assert not g.consume_enable and g.retry_max_times == 2


def test_damaged_file_falls_back_to_bak(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path)
    topics.upsert(TopicConfig("A"))
    topics.upsert(TopicConfig("B"))  # topics.json.bak now holds the version with A only
    assert "A" in loads_fastjson((tmp_path / "topics.json.bak").read_text())["topicConfigTable"]
    (tmp_path / "topics.json").write_text('{"topicConfigTable":{"A":')  # torn by hand
    loaded = TopicConfigManager(tmp_path)
    assert loaded.get("A") is not None and loaded.get("B") is None
    (tmp_path / "topics.json").write_text("")
    assert TopicConfigManager(tmp_path).get("A") is not None
    assert not (tmp_path / "topics.json.tmp").exists()


def test_unknown_5x_fields_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text(
        '{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":1,"writeQueueNums":1,"perm":6,'
        '"attributes":{},"order":false}}}')
    assert TopicConfigManager(tmp_path).get("T") == TopicConfig("T", 1, 1, 6)


def test_group_table_text_equals_a_full_encode_through_changes(tmp_path: Path) -> None:
    """The 201 body and subscriptionGroup.json are joined from per-group cached text: after creates, replaces,
    batch changes and deletes (names needing escapes included) they equal the wrapper's full encode."""
    from broker_core.codec.fastjson import dumps_fastjson

    groups = SubscriptionGroupManager(tmp_path)

    def same() -> None:
        for pretty in (False, True):
            assert groups.encode(pretty) == dumps_fastjson(groups.wrapper(), pretty)
        assert (tmp_path / "subscriptionGroup.json").read_text() == dumps_fastjson(groups.wrapper(), True)

    same()  # empty table
    for i in range(5):
        groups.upsert(SubscriptionGroupConfig(f"g{i}", retry_max_times=i))
    groups.get_or_create('odd "name"\\é')
    same()
    groups.upsert(SubscriptionGroupConfig("g2", consume_enable=False))  # replaced: its cached text must go
    groups.delete("g3")
    same()
    version = groups.data_version
    groups.change({"g0": SubscriptionGroupConfig("g0", consume_message_orderly=True),
                   "new": SubscriptionGroupConfig("new")}, ["g1", "g4", "absent"])
    assert groups.data_version == version + 1  # one DataVersion step and one file write for the batch
    assert sorted(groups.table) == ["g0", "g2", "new", 'odd "name"\\é']
    same()
    groups.change({}, ["absent"])  # nothing to do: no new version
    assert groups.data_version == version + 1
    reread = SubscriptionGroupManager(tmp_path)
    assert reread.table == groups.table and reread.encode() == groups.encode()
