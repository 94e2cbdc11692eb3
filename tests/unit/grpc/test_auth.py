"""``broker_core/grpc/auth.py``: the proxy's ``AuthorizationHeader`` parsing, ``PlainAccessResource.parse``'s
resources per request message, and ``PlainPermissionManager.validate``'s order."""

from __future__ import annotations

import hmac

import pytest

from broker_core.grpc.auth import check, parse_authorization, required_resources
from broker_core.grpc.stubs import pb, svc
from broker_core.server.acl import AclRefused
from broker_core.server.acl_config import ANY, PUB, SUB, load_plain_acl

RULES = load_plain_acl("""
globalWhiteRemoteAddresses: [10.0.0.*]
accounts:
  - accessKey: app-key-1
    secretKey: app-secret-1
    whiteRemoteAddress: 192.168.1.5
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [orders=PUB|SUB, audit=SUB]
""")
WHEN = "20261128T120000Z"


def md(ak: str = "app-key-1", sk: str = "app-secret-1", when: str = WHEN) -> dict[str, str]:
    sig = hmac.new(sk.encode(), when.encode(), "sha1").hexdigest()
    return {"x-mq-date-time": when,
            "authorization": f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"}


def send(topic: str, ns: str = "") -> object:
    return svc.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic, resource_namespace=ns))])


def test_parse_authorization_as_the_proxy() -> None:
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=ak/x/y, SignedHeaders=x-mq-date-time, Signature=0aFF") == \
        ("ak", b"\x0a\xff")
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=") == ("", b"")
    assert parse_authorization(None) == (None, None)
    assert parse_authorization("MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time") == (None, None)
    for bad, reason in (("MQv2-HMAC-SHA1", "authorization header is incorrect"),
                        ("MQv2 Credential", "authorization keyValues length is incorrect, actual length=1"),
                        ("MQv2 Credential=/", "authorization credential length is incorrect, actual length=0"),
                        ("MQv2 Signature=abc", "authorization signature is not hex")):
        with pytest.raises(AclRefused, match=reason):
            parse_authorization(bad)


def test_resources_per_request() -> None:
    group, topic = pb.Resource(name="g"), pb.Resource(name="t")
    assert required_resources(svc.QueryRouteRequest(topic=topic)) == {"t": ANY}
    assert required_resources(send("t", "ns")) == {"ns%t": PUB}
    assert required_resources(svc.ReceiveMessageRequest(group=group, message_queue=pb.MessageQueue(topic=topic))) \
        == {"%RETRY%g": SUB, "t": SUB}
    assert required_resources(svc.AckMessageRequest(group=group, topic=topic)) == {"%RETRY%g": SUB, "t": SUB}
    assert required_resources(svc.HeartbeatRequest(client_type=pb.PRODUCER)) == {}
    assert required_resources(svc.NotifyClientTerminationRequest()) == {}
    settings = pb.Settings(subscription=pb.Subscription(group=group, subscriptions=[
        pb.SubscriptionEntry(topic=topic)]))
    assert required_resources(svc.TelemetryCommand(settings=settings)) == {"%RETRY%g": SUB, "t": SUB}
    for request, reason in (
            (svc.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER), "Consumer heartbeat doesn't have group"),
            (svc.SendMessageRequest(), "messageCount is zero"),
            (svc.SendMessageRequest(messages=[pb.Message(topic=topic), pb.Message(topic=group)]),
             "messages' topic is not consistent"),
            (svc.TelemetryCommand(settings=pb.Settings()), "doesn't have publishing or subscription")):
        with pytest.raises(AclRefused, match=reason):
            required_resources(request)


def test_validate_order() -> None:
    assert check(RULES, "127.0.0.1", md(), send("orders")) == "app-key-1"
    assert check(RULES, "10.0.0.9", {}, send("closed")) is None  # global white list: nothing else checked
    with pytest.raises(AclRefused, match="header is incorrect"):  # a header that cannot be read: even white-listed
        check(RULES, "10.0.0.9", {"authorization": "nonsense"}, send("orders"))
    with pytest.raises(AclRefused, match="No accessKey is configured"):
        check(RULES, "127.0.0.1", {}, send("orders"))
    with pytest.raises(AclRefused, match="No acl config for other-key"):
        check(RULES, "127.0.0.1", md("other-key"), send("orders"))
    assert check(RULES, "192.168.1.5", md(sk="wrong-secret"), send("closed")) == "app-key-1"  # account's white list
    with pytest.raises(AclRefused, match="Check signature failed for accessKey=app-key-1"):
        check(RULES, "127.0.0.1", md(sk="wrong-secret"), send("orders"))
    with pytest.raises(AclRefused, match="Check signature failed"):  # the date-time is what is signed
        check(RULES, "127.0.0.1", {**md(), "x-mq-date-time": "20261128T120001Z"}, send("orders"))
    assert check(RULES, "127.0.0.1", md(), send("RMQ_SYS_TRACE_TOPIC")) == "app-key-1"
    with pytest.raises(AclRefused, match="No permission for topic:audit"):
        check(RULES, "127.0.0.1", md(), send("audit"))
    with pytest.raises(AclRefused, match="No default permission for topic:closed"):
        check(RULES, "127.0.0.1", md(), send("closed"))
    assert check(RULES, "127.0.0.1", md(), svc.QueryRouteRequest(topic=pb.Resource(name="audit"))) == "app-key-1"
