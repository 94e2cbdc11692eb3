"""Broker ACL 1.0 administration from the console: an account created, updated or deleted, or the global white
list replaced, on every broker of a cluster (masters and slaves, as rocketmq-dashboard does), with each broker's
own result. Audited (``acl.account.update``, ``acl.account.delete``, ``acl.global_white``) with the per-broker
results and never a secret. A secret the console generates is returned once, in the answer, and kept nowhere."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from console import broker_client
from console.errors import bad_request
from console.services.audit import audited

PERMS = ("DENY", "PUB", "SUB", "PUB|SUB")
GENERATED_SECRET_BYTES = 18  # 24 URL-safe characters
MIN_KEY_LENGTH = 7  # RocketMQ AclUtils: keys longer than 6 characters (the brokers check it too)


@dataclass
class AccountInput:
    access_key: str
    secret_key: str = ""  # blank: keep the current one (update) or generate one (new account)
    admin: bool = False
    white_remote_address: str = ""
    default_topic_perm: str = "DENY"
    default_group_perm: str = "SUB"
    topic_perms: list[str] = field(default_factory=list)  # name=PERM
    group_perms: list[str] = field(default_factory=list)


def _check_perm_items(items: list[str], what: str) -> None:
    for item in items:
        name, sep, perm = item.partition("=")
        if not sep or not name.strip() or perm.strip() not in PERMS:
            raise bad_request("invalid_perm", f"{what} item {item!r} must be name=DENY|PUB|SUB|PUB|SUB")


def _targets(cluster: str | None) -> list[str]:
    addrs = list(broker_client.admin().acl_brokers(cluster))
    if not addrs:
        raise bad_request("no_brokers", f"no broker in cluster {cluster!r}")
    return addrs


def _summary(results: dict[str, str | None]) -> dict[str, Any]:
    return {"results": [{"addr": a, "ok": e is None, "error": e} for a, e in results.items()],
            "ok": all(e is None for e in results.values())}


def save_account(user: Any, cluster: str | None, account: AccountInput, *, new: bool) -> dict[str, Any]:
    """Create (``new``) or update the account on every broker of ``cluster``: the per-broker results, and the
    secret when this call set one (``secret``, shown once)."""
    if len(account.access_key) < MIN_KEY_LENGTH:
        raise bad_request("invalid_access_key", "the access key must be longer than 6 characters")
    for p in (account.default_topic_perm, account.default_group_perm):
        if p not in PERMS:
            raise bad_request("invalid_perm", f"default permission {p!r} must be one of {', '.join(PERMS)}")
    _check_perm_items(account.topic_perms, "topic permission")
    _check_perm_items(account.group_perms, "group permission")
    secret = account.secret_key or (secrets.token_urlsafe(GENERATED_SECRET_BYTES) if new else "")
    if secret and len(secret) < MIN_KEY_LENGTH:
        raise bad_request("invalid_secret_key", "the secret key must be longer than 6 characters")
    header: dict[str, Any] = {
        "accessKey": account.access_key, "secretKey": secret or None, "admin": account.admin,
        "whiteRemoteAddress": account.white_remote_address, "defaultTopicPerm": account.default_topic_perm,
        "defaultGroupPerm": account.default_group_perm, "topicPerms": ",".join(account.topic_perms),
        "groupPerms": ",".join(account.group_perms)}
    admin = broker_client.admin()
    addrs = _targets(cluster)
    before = {"cluster": cluster, "access_key": account.access_key, "new": new, "secret_set": bool(secret),
              **{k: v for k, v in header.items() if k not in ("accessKey", "secretKey")}}
    with audited(user, "acl.account.update", account.access_key, before) as entry:
        out = _summary(admin.acl_everywhere(addrs, lambda a: admin.acl_update_account(a, header)))
        entry.after, entry.ok = out, out["ok"]
    return {**out, "access_key": account.access_key, "secret": secret or None}


def delete_account(user: Any, cluster: str | None, access_key: str) -> dict[str, Any]:
    admin = broker_client.admin()
    addrs = _targets(cluster)
    with audited(user, "acl.account.delete", access_key, {"cluster": cluster}) as entry:
        out = _summary(admin.acl_everywhere(addrs, lambda a: admin.acl_delete_account(a, access_key)))
        entry.after, entry.ok = out, out["ok"]
    return out


def set_global_white(user: Any, cluster: str | None, patterns: list[str]) -> dict[str, Any]:
    admin = broker_client.admin()
    addrs = _targets(cluster)
    with audited(user, "acl.global_white", cluster or "", {"patterns": patterns}) as entry:
        out = _summary(admin.acl_everywhere(addrs, lambda a: admin.acl_set_global_white(a, patterns)))
        entry.after, entry.ok = out, out["ok"]
    return out
