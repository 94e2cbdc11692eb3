"""An in-memory stand-in for ``broker_core.client.AdminClient``: the topic and route methods the console's
services and selectors call, with the real client's return shapes and errors (``ClientError`` with
``TOPIC_NOT_EXIST`` for a topic without a route). A working model, not a recording mock: state changes persist
between calls, so a test checks outcomes through the same reads the console makes."""

from __future__ import annotations

from typing import Any

from broker_core.client import ClientError
from broker_core.protocol import ResponseCode


class FakeAdmin:
    def __init__(self, brokers: dict[str, str], cluster: str = "DefaultCluster") -> None:
        self.brokers = dict(brokers)
        self.cluster = cluster
        self.topics: dict[str, dict[str, tuple[int, int, int]]] = {}  # topic -> broker -> (read, write, perm)
        self.version = 0  # bumped by every topic change, as a broker's topic-config DataVersion
        self.topic_list_calls = 0

    def cluster_info(self) -> dict[str, Any]:
        return {"brokerAddrTable": {name: {"brokerAddrs": {"0": addr}, "brokerName": name, "cluster": self.cluster}
                                    for name, addr in sorted(self.brokers.items())},
                "clusterAddrTable": {self.cluster: sorted(self.brokers)}}

    def topic_list(self) -> list[str]:
        self.topic_list_calls += 1
        return sorted(self.topics)

    def topic_config_versions(self) -> dict[str, Any]:
        return {"cluster": self.cluster_info()["brokerAddrTable"],
                "versions": {addr: {"counter": self.version, "timestamp": 0} for addr in self.brokers.values()}}

    def auto_created_topics(self) -> set[str]:
        return set()  # every topic here was created through the admin API

    def topic_route(self, topic: str) -> dict[str, Any]:
        held = self.topics.get(topic)
        if not held:
            raise ClientError(int(ResponseCode.TOPIC_NOT_EXIST), f"No topic route info in name server for the "
                                                                 f"topic: {topic}")
        return {"brokerDatas": [{"brokerAddrs": {"0": self.brokers[b]}, "brokerName": b, "cluster": self.cluster}
                                for b in sorted(held)],
                "filterServerTable": {},
                "queueDatas": [{"brokerName": b, "perm": p, "readQueueNums": r, "topicSysFlag": 0,
                                "topicSynFlag": 0, "writeQueueNums": w} for b, (r, w, p) in sorted(held.items())]}

    def create_topic(self, topic: str, read_queue_nums: int = 4, write_queue_nums: int = 4, perm: int = 6, *,
                     cluster: str | None = None, brokers: list[str] | None = None, order: bool = False) -> list[str]:
        targets = sorted(brokers) if brokers else sorted(self.brokers)
        if not targets or any(b not in self.brokers for b in targets):
            raise ClientError(int(ResponseCode.SYSTEM_ERROR), "no broker matches the selection")
        for b in targets:
            self.topics.setdefault(topic, {})[b] = (read_queue_nums, write_queue_nums, perm)
        self.version += 1
        return targets

    update_topic = create_topic

    def delete_topic(self, topic: str) -> None:
        if self.topics.pop(topic, None) is not None:
            self.version += 1

    def topic_stats(self, topic: str) -> list[dict[str, Any]]:
        return [{"brokerName": b, "topic": topic, "queueId": q, "minOffset": 0, "maxOffset": 0,
                 "lastUpdateTimestamp": 0}
                for b, (_r, w, _p) in sorted(self.topics.get(topic, {}).items()) for q in range(w)]
