"""The broker's ACL decisions in process: validation order (reference §9.3), resources per request code, admin
codes, and the hook's file reload with an injected clock (the wire tests are tests/integration/test_acl.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from broker_core.config import AclConfig, BrokerConfig
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import SessionCredentials, sign_command
from broker_core.server.acl import AclRefused, PlainAccessValidator, check, required_resources
from broker_core.server.acl_config import PUB, SUB, load_plain_acl

RULES = load_plain_acl("""
globalWhiteRemoteAddresses: [10.9.9.*]
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [orders=PUB, audit=PUB|SUB]
  - accessKey: consumer1
    secretKey: consumer-secret
    whiteRemoteAddress: 10.1.1.1
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: [secret=DENY]
    groupPerms: [other=DENY]
  - accessKey: admin-all
    secretKey: admin-secret
    admin: true
""")
PRODUCER = SessionCredentials("producer1", "producer-secret")
CONSUMER = SessionCredentials("consumer1", "consumer-secret")
ADMIN = SessionCredentials("admin-all", "admin-secret")
IP = "127.0.0.1"


def req(code: int, header: dict[str, Any], body: bytes = b"",
        creds: SessionCredentials | None = None) -> RemotingCommand:
    cmd = RemotingCommand.request(code, header, body)
    return sign_command(cmd, creds) if creds else cmd


def reason(cmd: RemotingCommand, ip: str = IP) -> str | None:
    try:
        check(RULES, ip, cmd)
    except AclRefused as exc:
        return str(exc)
    return None


def send(topic: str, creds: SessionCredentials | None = PRODUCER, group: str = "pg") -> RemotingCommand:
    return req(RequestCode.SEND_MESSAGE_V2, {"a": group, "b": topic, "e": 0}, b"body", creds)


def test_order_global_white_list_then_access_key_then_signature() -> None:
    assert reason(send("orders", None), ip="10.9.9.200") is None  # 1: globally white-listed, unsigned
    assert reason(send("orders", None)) == "No accessKey is configured"  # 2
    assert reason(send("orders", SessionCredentials("nobody1", "whatever-secret"))) == "No acl config for nobody1"
    assert reason(send("orders", SessionCredentials("producer1", "wrong-secret"))) == \
        "Check signature failed for accessKey=producer1"  # 4
    assert reason(send("orders")) is None
    # 3: the account's own white list skips the signature and every permission
    forged = req(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "secret", "AccessKey": "consumer1",
                                               "Signature": "bogus"})
    assert reason(forged, ip="10.1.1.1") is None
    assert reason(forged, ip="10.1.1.2") == "Check signature failed for accessKey=consumer1"


def test_topic_permissions_for_send_and_pull() -> None:
    assert reason(send("audit")) is None
    assert reason(send("elsewhere")) == "No default permission for topic:elsewhere"
    assert reason(send("orders", CONSUMER)) == "No default permission for topic:orders"  # SUB only
    pull = {"consumerGroup": "cg", "topic": "orders", "queueId": 0, "queueOffset": 0}
    assert reason(req(RequestCode.PULL_MESSAGE, pull, creds=CONSUMER)) is None
    assert reason(req(RequestCode.PULL_MESSAGE, {**pull, "topic": "secret"}, creds=CONSUMER)) == \
        "No permission for topic:secret"
    assert reason(req(RequestCode.PULL_MESSAGE, {**pull, "consumerGroup": "other"}, creds=CONSUMER)) == \
        "No permission for group:other"
    assert reason(req(RequestCode.PULL_MESSAGE, pull, creds=PRODUCER)) == "No permission for topic:orders"  # PUB


def test_batch_send_needs_pub_too() -> None:
    batch = {"a": "pg", "b": "elsewhere", "e": 0}
    assert reason(req(RequestCode.SEND_BATCH_MESSAGE, batch, b"x", PRODUCER)) == \
        "No default permission for topic:elsewhere"


def test_retry_topic_send_needs_the_group() -> None:
    assert required_resources(RequestCode.SEND_MESSAGE_V2, {"a": "cg", "b": "%RETRY%cg"}, b"") == {"%RETRY%cg": SUB}
    assert reason(send("%RETRY%cg", CONSUMER, group="cg")) is None
    assert reason(send("%RETRY%other", CONSUMER, group="other")) == "No permission for group:other"


def test_heartbeat_checks_every_group_and_subscription() -> None:
    body = json.dumps({"clientID": "c", "producerDataSet": [], "consumerDataSet": [
        {"groupName": "cg", "subscriptionDataSet": [{"topic": "orders"}, {"topic": "%RETRY%cg"}]}]}).encode()
    assert required_resources(RequestCode.HEART_BEAT, {}, body) == {"%RETRY%cg": SUB, "orders": SUB}
    assert reason(req(RequestCode.HEART_BEAT, {}, body, CONSUMER)) is None
    assert reason(req(RequestCode.HEART_BEAT, {}, body.replace(b"orders", b"secret"), CONSUMER)) == \
        "No permission for topic:secret"
    assert "heartbeat body" in str(reason(req(RequestCode.HEART_BEAT, {}, b"[1]", CONSUMER)))
    producer_only = json.dumps({"clientID": "p", "producerDataSet": [{"groupName": "pg"}]}).encode()
    assert reason(req(RequestCode.HEART_BEAT, {}, producer_only, PRODUCER)) is None


@pytest.mark.parametrize("code", [17, 25, 215, 200, 207, 30900, 30907, 30909])
def test_admin_codes_need_an_admin_account(code: int) -> None:
    header = {"topic": "orders", "groupName": "cg"}
    assert reason(req(code, header, creds=PRODUCER)) == \
        f"Need admin permission for request code={code}, but accessKey=producer1 is not"
    assert reason(req(code, header, creds=ADMIN)) is None


def test_admin_without_resource_entries_may_do_anything_and_others_only_steps_1_to_4() -> None:
    pull = {"consumerGroup": "any", "topic": "any", "queueId": 0}
    assert reason(req(RequestCode.PULL_MESSAGE, pull, creds=ADMIN)) is None
    assert reason(req(RequestCode.GET_BROKER_RUNTIME_INFO, {}, creds=PRODUCER)) is None  # no resource needed


def test_trace_topic_publish_is_always_allowed() -> None:
    assert required_resources(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "RMQ_SYS_TRACE_TOPIC"}, b"") == \
        {"RMQ_SYS_TRACE_TOPIC": PUB}
    assert reason(send("RMQ_SYS_TRACE_TOPIC", CONSUMER)) is None


class FakeConn:
    remote = "127.0.0.1:50000"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, text: str, mtime: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(mtime, mtime))


def test_hook_reloads_changed_file_and_keeps_the_last_good_one(tmp_path: Path, caplog: Any) -> None:
    cfg = BrokerConfig(cluster_secret="cluster-secret", acl=AclConfig(acl_enable=True)).with_store_dir(tmp_path)
    path = cfg.acl_file_path
    path.parent.mkdir(parents=True)
    write(path, "accounts: [{accessKey: producer1, secretKey: producer-secret, defaultTopicPerm: PUB}]", 10**18)
    clock = Clock()
    hook = PlainAccessValidator(cfg.acl, cfg.acl_file_path, clock)
    hook.load()
    conn: Any = FakeConn()
    assert hook(send("t1"), conn) is None
    write(path, "globalWhiteRemoteAddresses: ['127.0.0.*']", 10**18 + 10**9)
    assert hook(send("t1", None), conn) is not None  # not looked at again within a second
    clock.now += 1.5
    assert hook(send("t1", None), conn) is None  # the new file: 127.0.0.* is white-listed
    write(path, "accounts: [unclosed", 10**18 + 2 * 10**9)
    clock.now += 1.5
    assert hook(send("t1", None), conn) is None  # the broken file is refused; the last good rules stay
    assert "ACL file reload failed, keeping the rules loaded before" in caplog.text
    write(path, "accounts: []", 10**18 + 3 * 10**9)
    clock.now += 1.5
    assert hook(send("t1", None), conn) is not None  # a good file again: loaded, 127.0.0.1 no longer white-listed
    cfg.acl.acl_enable = False
    assert hook(send("t1", None), conn) is None  # off: nothing is checked


def test_refusal_is_no_permission_with_the_acl_exception_remark(tmp_path: Path) -> None:
    cfg = BrokerConfig().with_store_dir(tmp_path)
    cfg.acl.acl_enable = True
    cfg.acl_file_path.parent.mkdir(parents=True)
    cfg.acl_file_path.write_text("accounts: []")
    hook = PlainAccessValidator(cfg.acl, cfg.acl_file_path, Clock())
    hook.load()
    resp = hook(send("t1", None), FakeConn())  # type: ignore[arg-type]
    assert resp is not None and resp.code == ResponseCode.NO_PERMISSION and resp.is_response
    assert resp.remark == "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
