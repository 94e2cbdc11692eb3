"""RocketMQ ACL 1.0 (``plain_acl.yml``) on the gRPC endpoint, as Apache's proxy checks it (RocketMQ 5.0-5.3
``proxy/.../grpc/interceptor/AuthenticationInterceptor`` with ``acl/.../plain/PlainAccessResource.parse(
GeneratedMessageV3, AuthenticationHeader)`` and ``PlainPermissionManager.validate``).

The rules are the remoting hook's (:class:`broker_core.server.acl.PlainAccessValidator`, ``ctl.acl``): one file,
one loaded model, reloaded on change and by the ACL admin codes 50-54. Idle while ``aclEnable`` is false.

Every request message (each command of a Telemetry stream too) is checked before its handler sees it:

1. parse: the ``authorization`` metadata ``MQv2-HMAC-SHA1 Credential=<ak>[/...], SignedHeaders=x-mq-date-time,
   Signature=<hex>`` (``AuthorizationHeader``: the method, then ``,``-separated ``k=v`` items, each of which must
   have a ``=``; the signature must be hex), and the resources the request names (below); a request it cannot
   read is refused here, before any white list;
2. the remote IP matches ``globalWhiteRemoteAddresses`` -> allow;
3. no access key -> refuse; unknown key -> refuse; the account's ``whiteRemoteAddress`` -> allow;
4. ``HmacSHA1(secretKey, x-mq-date-time value)`` differs from the signature -> refuse (the time is not
   otherwise checked, as in ACL 1.0);
5. ``RMQ_SYS_TRACE_TOPIC`` needed with PUB -> allow; else each resource against the account's perms
   (:func:`broker_core.server.acl.check_perms`, the remoting rules and messages).

Resources (groups as ``%RETRY%<group>``, names as ``<namespace>%<name>`` when the Resource has a namespace):
QueryRoute ANY on the topic; Heartbeat of a push or simple consumer SUB on its group (none: refused);
SendMessage PUB on its topic (every message the same topic); ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue and QueryAssignment SUB on group and topic; EndTransaction PUB on the topic;
Telemetry Settings PUB on each publishing topic, SUB on the subscription's group and topics (neither: refused);
NotifyClientTermination SUB on its group when named. Beyond the proxy (it checks only the signature of these):
PullMessage, UpdateOffset and GetOffset need SUB on group and topic, QueryOffset SUB on the topic,
RecallMessage PUB on the topic.

A refusal ends the call with gRPC status ``PERMISSION_DENIED``, as the proxy's (``StatusRuntimeException(
Status.PERMISSION_DENIED)``); the proxy gives no description, this broker gives the ``AclException`` reason.
Where the proxy fails with a NullPointerException (INTERNAL), i.e. no ``authorization`` or no ``x-mq-date-time``
metadata, this broker takes the key as absent or the signed text as empty, and refuses unless white-listed.
"""

from __future__ import annotations

import binascii
import hmac
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc

from broker_core.codec.names import TRACE_TOPIC
from broker_core.grpc.stubs import pb
from broker_core.protocol import RequestCode
from broker_core.server.acl import AclRefused, check_perms
from broker_core.server.acl_config import ANY, PUB, SUB, PlainAclConfig, normalize_ip, retry_topic

if TYPE_CHECKING:
    from broker_core.server.acl import PlainAccessValidator

log = logging.getLogger(__name__)

# RequestMapping: the remoting code each request message stands for (none is an admin code)
_CODES = {
    "QueryRouteRequest": RequestCode.GET_ROUTEINFO_BY_TOPIC,
    "QueryAssignmentRequest": RequestCode.GET_ROUTEINFO_BY_TOPIC,
    "HeartbeatRequest": RequestCode.HEART_BEAT, "SendMessageRequest": RequestCode.SEND_MESSAGE_V2,
    "ReceiveMessageRequest": RequestCode.PULL_MESSAGE, "AckMessageRequest": RequestCode.UPDATE_CONSUMER_OFFSET,
    "EndTransactionRequest": RequestCode.END_TRANSACTION,
    "NotifyClientTerminationRequest": RequestCode.UNREGISTER_CLIENT,
    "ChangeInvisibleDurationRequest": RequestCode.CONSUMER_SEND_MSG_BACK,
}


def _java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split`` for a literal separator: trailing empty strings dropped (not for ``""``)."""
    parts = text.split(sep)
    if text == "":
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_authorization(value: str | None) -> tuple[str | None, bytes | None]:
    """``AuthorizationHeader``: (access key, signature bytes); :class:`AclRefused` when it cannot be read."""
    if value is None:
        return None, None
    method_rest = value.split(" ", 1)
    if len(method_rest) != 2:
        raise AclRefused("authorization header is incorrect")
    key: str | None = None
    signature: bytes | None = None
    for item in _java_split(method_rest[1], ","):
        kv = item.strip().split("=", 1)
        if len(kv) != 2:
            raise AclRefused(f"authorization keyValues length is incorrect, actual length={len(kv)}")
        if kv[0] == "Credential":
            credential = _java_split(kv[1], "/")
            if not credential:
                raise AclRefused("authorization credential length is incorrect, actual length=0")
            key = credential[0]
        elif kv[0] == "Signature":
            try:
                signature = binascii.unhexlify(kv[1])
            except (binascii.Error, ValueError) as exc:
                raise AclRefused(f"authorization signature is not hex: {exc}") from None
    return key, signature


def _name(resource: Any) -> str:
    """``NamespaceUtil.wrapNamespace(resource_namespace, name)``."""
    ns, name = resource.resource_namespace, resource.name
    if not ns or not name or name.startswith(ns + "%"):
        return str(name)
    return f"{ns}%{name}"


def _settings(cmd: Any, out: dict[str, int]) -> None:
    if not cmd.HasField("settings"):
        return
    settings = cmd.settings
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            out[_name(topic)] = PUB
    if settings.HasField("subscription"):
        out[retry_topic(_name(settings.subscription.group))] = SUB
        for entry in settings.subscription.subscriptions:
            out[_name(entry.topic)] = SUB
    if not settings.HasField("publishing") and not settings.HasField("subscription"):
        raise AclRefused("settings command doesn't have publishing or subscription")


def required_resources(request: Any) -> dict[str, int]:
    """``{resource: needed perm}`` of one request message, by its type (the module docstring's table)."""
    kind = request.DESCRIPTOR.name
    out: dict[str, int] = {}

    def group_and_topic(group: Any, topic: Any) -> None:
        out[retry_topic(_name(group))] = SUB
        out[_name(topic)] = SUB

    if kind == "HeartbeatRequest":
        if request.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
            if not request.HasField("group"):
                raise AclRefused("Consumer heartbeat doesn't have group")
            out[retry_topic(_name(request.group))] = SUB
    elif kind == "SendMessageRequest":
        if not request.messages:
            raise AclRefused("SendMessageRequest, messageCount is zero")
        topic = request.messages[0].topic
        if any(m.topic != topic for m in request.messages):
            raise AclRefused("SendMessageRequest, messages' topic is not consistent")
        out[_name(topic)] = PUB
    elif kind in ("ReceiveMessageRequest", "PullMessageRequest", "UpdateOffsetRequest", "GetOffsetRequest"):
        group_and_topic(request.group, request.message_queue.topic)
    elif kind in ("AckMessageRequest", "ForwardMessageToDeadLetterQueueRequest", "QueryAssignmentRequest",
                  "ChangeInvisibleDurationRequest"):
        group_and_topic(request.group, request.topic)
    elif kind in ("EndTransactionRequest", "RecallMessageRequest"):
        out[_name(request.topic)] = PUB
    elif kind == "QueryOffsetRequest":
        out[_name(request.message_queue.topic)] = SUB
    elif kind == "TelemetryCommand":
        _settings(request, out)
    elif kind == "NotifyClientTerminationRequest":
        if request.group.name.strip():
            out[retry_topic(_name(request.group))] = SUB
    elif kind == "QueryRouteRequest":
        out[_name(request.topic)] = ANY
    return out


def check(rules: PlainAclConfig, remote_ip: str, metadata: dict[str, str], request: Any) -> str | None:
    """Raise :class:`AclRefused` when ``rules`` refuse ``request``; the access key it was allowed as (None: a
    white-listed address)."""
    key, signature = parse_authorization(metadata.get("authorization"))
    content = (metadata.get("x-mq-date-time") or "").encode("utf-8")
    needed = required_resources(request)
    if any(p.match(remote_ip) for p in rules.global_white):
        return None
    if key is None:
        raise AclRefused("No accessKey is configured")
    account = rules.accounts.get(key)
    if account is None:
        raise AclRefused(f"No acl config for {key}")
    if account.white_remote_address.match(remote_ip):
        return key
    expected = hmac.digest(account.secret_key.encode("utf-8"), content, "sha1")
    if signature is None or not hmac.compare_digest(expected, signature):
        raise AclRefused(f"Check signature failed for accessKey={key}")
    if needed.get(TRACE_TOPIC) == PUB:
        return key
    check_perms(account, _CODES.get(request.DESCRIPTOR.name, RequestCode.HEART_BEAT), needed)
    return key


def peer_ip(context: Any) -> str:
    """``ipv4:127.0.0.1:5555`` / ``ipv6:[::1]:5555`` -> the address white lists compare against."""
    peer = str(context.peer() or "")
    host = peer.split(":", 1)[1] if ":" in peer else peer
    return normalize_ip(host.rpartition(":")[0] or host)


class GrpcAuthenticator:
    """The gRPC side of the broker's ACL, over the remoting hook's rules (``ctl.acl``)."""

    def __init__(self, validator: PlainAccessValidator) -> None:
        self.validator = validator

    def refusal(self, request: Any, context: Any) -> str | None:
        """None when ``request`` may go on (or ACL is off); else the reason it is refused."""
        if not self.validator.config.acl_enable:
            return None
        metadata = {str(k).lower(): str(v) for k, v in (context.invocation_metadata() or ())}
        try:
            check(self.validator.current_rules(), peer_ip(context), metadata, request)
        except AclRefused as exc:
            log.info("ACL refused gRPC %s from %s: %s", request.DESCRIPTOR.name, context.peer(), exc)
            return str(exc)
        return None

    async def check(self, request: Any, context: Any) -> None:
        """Ends the call with PERMISSION_DENIED when ``request`` is refused (``context.abort`` raises)."""
        reason = self.refusal(request, context)
        if reason is not None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, reason)

    def guard(self, requests: AsyncIterator[Any], context: Any) -> GuardedStream:
        return GuardedStream(self, requests, context)


class GuardedStream:
    """A request stream checked message by message: it ends at the first refused one, whose reason is then
    ``refused`` (the handler aborts the call with it once its reader stopped)."""

    def __init__(self, auth: GrpcAuthenticator, requests: AsyncIterator[Any], context: Any) -> None:
        self.auth, self.requests, self.context = auth, requests, context
        self.refused: str | None = None

    async def __aiter__(self) -> AsyncIterator[Any]:
        async for request in self.requests:
            self.refused = self.auth.refusal(request, self.context)
            if self.refused is not None:
                return
            yield request
