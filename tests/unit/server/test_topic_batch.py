"""UPDATE_AND_CREATE_TOPIC_LIST (18): each TopicConfig of the list checked as code 17 checks its header."""

from __future__ import annotations

import pytest

from broker_core.server.topic_batch import topic_config


def test_an_entry_becomes_a_topic_config() -> None:
    cfg = topic_config({"topicName": "Orders", "readQueueNums": 8, "writeQueueNums": "4", "perm": 6, "order": True,
                        "topicFilterType": "MULTI_TAG", "topicSysFlag": 1, "attributes": {"+message.type": "FIFO"}},
                       "DefaultCluster")
    assert (cfg.topic_name, cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == ("Orders", 8, 4, 6)
    assert (cfg.order, cfg.topic_filter_type, cfg.topic_sys_flag) == (True, "MULTI_TAG", 1)
    assert topic_config({"topicName": "Plain"}, "C").read_queue_nums == 16  # TopicConfig's Java default


@pytest.mark.parametrize(("entry", "error"), [
    ({"topicName": "bad name!"}, "topic"),
    ({"topicName": "DefaultCluster"}, "conflict with system reserved words"),
    ({"topicName": "T", "readQueueNums": 0}, "queue counts"),
    ({"topicName": "T", "writeQueueNums": 2000}, "queue counts"),
    ({"topicName": "T", "perm": 16}, "perm"),
    ({"topicName": "T", "readQueueNums": "eight"}, "readQueueNums must be an integer"),
    ({"topicName": "T", "topicFilterType": "SQL"}, "topicFilterType"),
    ("T", "object"),
])
def test_a_bad_entry_is_refused_with_its_reason(entry: object, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        topic_config(entry, "DefaultCluster")
