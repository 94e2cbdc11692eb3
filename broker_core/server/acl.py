"""The broker's ACL check (RocketMQ ACL 1.0, reference §9): a pre-handler hook on the RemotingServer.

:class:`PlainAccessValidator` is called for every request before its handler. While ``aclEnable`` is false it
answers None (go on) at once. While true it validates exactly in ``PlainPermissionManager.validate``'s order:

1. the remote IP matches a ``globalWhiteRemoteAddresses`` pattern -> allow;
2. no ``AccessKey`` (or an empty one) -> refuse; an unknown key -> refuse;
3. the remote IP matches the account's ``whiteRemoteAddress`` -> allow (no signature or permission check);
4. the signature does not match -> refuse;
5. the request only publishes to ``RMQ_SYS_TRACE_TOPIC`` -> allow;
6. an admin-only code from a non-admin account -> refuse; an admin account with no per-resource entries -> allow;
7. every resource the request code needs (:func:`required_resources`) is checked against the account's explicit
   perm, else ``defaultTopicPerm`` (topics) or ``defaultGroupPerm`` (``%RETRY%<group>``) -> refuse on DENY or
   a missing bit.

A refusal answers ``NO_PERMISSION`` (16) with the remark ``org.apache.rocketmq.acl.common.AclException: <reason>``
(RocketMQ 4.9 answers SYSTEM_ERROR through its exception path; 16 is the code clients already know as "no
permission"); a oneway request gets no reply (the server's rule).

Beyond RocketMQ 4.9's table (each only adds checks, never changes what an allowed client sees): batch sends (320)
need PUB on their topic like 310; receive/ack (200050-200053) and offset reset (222) need SUB on the topic and the
group; broker_core's own store-maintenance, resend and snapshot codes are admin-only, and so are the ACL admin
codes 50-54 (RocketMQ 5.3 makes 50-52 admin-only; 53, and 54 which shows secrets, are here too).
READ_SNAPSHOT_SEGMENT (30911) is authorised by the snapshot's read token instead (checked by its handler,
``server/snapshot.py``): the token
comes only in the answer to an admin's signed SNAPSHOT_SEGMENTS, so readers on a Spark cluster need no account
secret, and what they can read is that one snapshot, until it is released or expires.

The file is read at start (a missing or invalid file with ``aclEnable=true`` stops the broker with the reason)
and re-read when its modification time, size or inode changes, looked at most once a second as requests arrive.
A reload that fails keeps the last good rules and logs the reason once per change of the file.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_core.codec.fastjson import loads_fastjson
from broker_core.codec.names import TRACE_TOPIC
from broker_core.config import AclConfig
from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import ACCESS_KEY, signature_matches
from broker_core.protocol.fields import BadRequest
from broker_core.protocol.pop import parse_batch_ack_body
from broker_core.remoting.server import Connection
from broker_core.server.acl_config import (
    PUB,
    SUB,
    Account,
    AclConfigError,
    PlainAclConfig,
    check_permission,
    load_plain_acl,
    normalize_ip,
    retry_topic,
)

log = logging.getLogger(__name__)

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException: "
RELOAD_CHECK_S = 1.0

# Permission.ADMIN_CODE, plus broker_core's own codes that delete files, move messages or expose the store.
ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.CLEAN_EXPIRED_FILES, RequestCode.DELIVER_DELAYED, RequestCode.RESEND_DEAD_LETTERS,
    RequestCode.SNAPSHOT_SEGMENTS, RequestCode.RELEASE_SNAPSHOT,
    # ACL administration: RocketMQ 5.3 makes 50-52 admin-only; 53 and 54 (which shows secrets) are too here
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG})


class AclRefused(Exception):
    """A request the rules refuse; the message is the reason sent in the remark."""


def _group(name: Any) -> str | None:
    return None if name is None else retry_topic(str(name))


def _send(topic: Any, group: Any) -> dict[str, int]:
    if topic is None:
        return {}
    topic = str(topic)
    if topic.startswith("%RETRY%"):  # a consumer's send-back by plain send: needs its group
        return {retry_topic("null" if group is None else str(group)): SUB}
    return {topic: PUB}


def _heartbeat(body: bytes) -> dict[str, int]:
    try:
        doc = loads_fastjson(body) if body else {}
        out: dict[str, int] = {}
        for consumer in (doc.get("consumerDataSet") or []):
            group = _group(consumer.get("groupName"))
            if group is not None:
                out[group] = SUB
            for sub in consumer.get("subscriptionDataSet") or []:
                if sub.get("topic") is not None:
                    out[str(sub["topic"])] = SUB
        return out
    except (AttributeError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise AclRefused(f"cannot read the heartbeat body to check its groups and topics: {exc}") from None


def _needs(h: dict[str, Any], topic: str | None = None, group: str | None = None) -> dict[str, int]:
    out = {}
    if topic is not None and h.get(topic) is not None:
        out[str(h[topic])] = SUB
    if group is not None and h.get(group) is not None:
        out[retry_topic(str(h[group]))] = SUB
    return out


_RESOURCES: dict[int, Callable[[dict[str, Any], bytes], dict[str, int]]] = {
    RequestCode.SEND_MESSAGE: lambda h, b: _send(h.get("topic"), h.get("group")),
    RequestCode.SEND_MESSAGE_V2: lambda h, b: _send(h.get("b"), h.get("a")),
    RequestCode.SEND_BATCH_MESSAGE: lambda h, b: _send(h.get("b", h.get("topic")), h.get("a", h.get("group"))),
    RequestCode.CONSUMER_SEND_MSG_BACK: lambda h, b: _needs(h, group="group"),
    RequestCode.PULL_MESSAGE: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.QUERY_MESSAGE: lambda h, b: _needs(h, "topic"),
    RequestCode.HEART_BEAT: lambda h, b: _heartbeat(b),
    RequestCode.UNREGISTER_CLIENT: lambda h, b: _needs(h, group="consumerGroup"),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: lambda h, b: _needs(h, group="consumerGroup"),
    RequestCode.UPDATE_CONSUMER_OFFSET: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: lambda h, b: _needs(h, "topic", "group"),
    RequestCode.POP_MESSAGE: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.ACK_MESSAGE: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.PEEK_MESSAGE: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.NOTIFICATION: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.POLLING_INFO: lambda h, b: _needs(h, "topic", "consumerGroup"),
    RequestCode.BATCH_ACK_MESSAGE: lambda h, b: _batch_ack(b),
}


def _batch_ack(body: bytes) -> dict[str, int]:
    """SUB on every topic and group a ``BatchAckMessageRequestBody`` acks for."""
    try:
        _, acks = parse_batch_ack_body(body)
    except BadRequest as exc:
        raise AclRefused(f"cannot read the batch ack body to check its groups and topics: {exc}") from None
    out: dict[str, int] = {}
    for a in acks:
        out[a.topic] = SUB
        out[retry_topic(a.group)] = SUB
    return out


def required_resources(code: int, header: dict[str, Any], body: bytes) -> dict[str, int]:
    """``{resource: needed perm}`` of a request (``PlainAccessValidator.parse``); groups as ``%RETRY%<group>``."""
    parse = _RESOURCES.get(code)
    return parse(header, body) if parse is not None else {}


def _describe(resource: str) -> str:
    if resource.startswith("%RETRY%"):
        return f"group:{resource[len('%RETRY%'):]}"
    return f"topic:{resource}"


def check(rules: PlainAclConfig, remote_ip: str, cmd: RemotingCommand) -> None:
    """Raise :class:`AclRefused` when ``rules`` refuse ``cmd`` from ``remote_ip`` (the order is §9.3's)."""
    if any(p.match(remote_ip) for p in rules.global_white):
        return
    h = cmd.header
    key = h.get(ACCESS_KEY)
    if not key:
        raise AclRefused("No accessKey is configured")
    account = rules.accounts.get(str(key))
    if account is None:
        raise AclRefused(f"No acl config for {key}")
    if account.white_remote_address.match(remote_ip):
        return
    if not signature_matches(h, cmd.body, account.secret_key):
        raise AclRefused(f"Check signature failed for accessKey={key}")
    needed = required_resources(cmd.code, h, cmd.body)
    if needed == {TRACE_TOPIC: PUB}:
        return
    check_perms(account, cmd.code, needed)


def check_perms(account: Account, code: int, needed: dict[str, int]) -> None:
    """``PlainPermissionChecker.check``: admin-only codes, then each needed resource (remoting and gRPC)."""
    if code in ADMIN_CODES and not account.admin:
        raise AclRefused(f"Need admin permission for request code={code}, but accessKey={account.access_key} "
                         f"is not")
    if not needed or (account.admin and not account.resource_perms):
        return
    for resource, perm in needed.items():
        owned = account.resource_perms.get(resource)
        if owned is None:
            default = account.default_group_perm if resource.startswith("%RETRY%") else account.default_topic_perm
            if not check_permission(perm, default):
                raise AclRefused(f"No default permission for {_describe(resource)}")
        elif not check_permission(perm, owned):
            raise AclRefused(f"No permission for {_describe(resource)}")


def remote_ip(conn: Connection) -> str:
    host, _, _port = conn.remote.rpartition(":")
    return normalize_ip(host)


class PlainAccessValidator:
    """The hook ``RemotingServer`` calls before each handler (``rpc_hook``): None to go on, or the refusal."""

    def __init__(self, config: AclConfig, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        """``path``: the plain_acl.yml (``BrokerConfig.acl_file_path``: aclFile, else under the store's config)."""
        self.config = config
        self._path = path
        self.clock = clock
        self.rules: PlainAclConfig | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._failed = False  # the last reload failed, on the file as ``_failed_stamp`` showed it
        self._failed_stamp: tuple[int, int, int] | None = None
        self._next_check = 0.0

    @property
    def path(self) -> Path:
        return self._path

    def load(self) -> PlainAclConfig:
        """Read the file now; raises :class:`AclConfigError` (naming the file) if it is missing or invalid."""
        path = self.path
        try:
            st = os.stat(path)
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AclConfigError(f"{path}: cannot read the ACL file: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise AclConfigError(f"{path}: not UTF-8: {exc}") from None
        try:
            rules = load_plain_acl(text)
        except AclConfigError as exc:
            raise AclConfigError(f"{path}: {exc}") from None
        self.rules, self._stamp = rules, (st.st_mtime_ns, st.st_size, st.st_ino)
        log.info("ACL rules loaded from %s: %d accounts, %d global white-list patterns", path, len(rules.accounts),
                 len(rules.global_white))
        return rules

    def _reload_if_changed(self) -> None:
        now = self.clock()
        if now < self._next_check:
            return
        self._next_check = now + RELOAD_CHECK_S
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if self.rules is not None and (stamp == self._stamp or (self._failed and stamp == self._failed_stamp)):
            return
        try:
            self.load()
            self._failed = False
        except AclConfigError as exc:
            self._failed, self._failed_stamp = True, stamp
            kept = "keeping the rules loaded before" if self.rules is not None else "refusing every request"
            log.error("ACL file reload failed, %s: %s", kept, exc)

    def current_rules(self) -> PlainAclConfig:
        """The rules in force, re-read first if the file changed (as before each remoting request); the gRPC
        endpoint checks against these too. :class:`AclRefused` while none could be loaded."""
        self._reload_if_changed()
        if self.rules is None:
            raise AclRefused(f"the ACL file {self.path} could not be loaded")
        return self.rules

    def __call__(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        if not self.config.acl_enable or cmd.code == RequestCode.READ_SNAPSHOT_SEGMENT:  # 30911: see the docstring
            return None
        try:
            check(self.current_rules(), remote_ip(conn), cmd)
        except AclRefused as exc:
            log.info("ACL refused request code %d from %s: %s", cmd.code, conn.remote, exc)
            return cmd.response(ResponseCode.NO_PERMISSION, ACL_EXCEPTION + str(exc))
        return None
