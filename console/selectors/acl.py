"""Broker ACL 1.0 as the console shows it: per cluster, each broker's ACL-config version (52) and a digest of its
rules (54), so brokers out of step stand out, and the accounts and global white list as the first answering
broker holds them. Secrets are never returned here: the console shows a secret only once, in the answer to the
request that set it (:mod:`console.services.acl`)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from broker_core.client import ClientError
from console import broker_client
from console.selectors.messages import iso_ms


def clusters() -> list[str]:
    """The cluster names the name server knows."""
    info = broker_client.admin().cluster_info()
    return sorted(info.get("clusterAddrTable", {}))


def _digest(cfg: dict[str, Any]) -> str:
    """A short digest of a broker's rules (accounts with their secrets, global white list): equal rules, equal
    digest, whatever the order of accounts."""
    accounts = sorted(cfg.get("plainAccessConfigs") or [], key=lambda a: str(a.get("accessKey")))
    canon = json.dumps({"accounts": accounts, "white": sorted(cfg.get("globalWhiteAddrs") or [])}, sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


def account_view(raw: dict[str, Any]) -> dict[str, Any]:
    """One ``PlainAccessConfig`` without its secret."""
    return {"access_key": raw.get("accessKey"), "admin": bool(raw.get("admin")),
            "white_remote_address": raw.get("whiteRemoteAddress") or "",
            "default_topic_perm": raw.get("defaultTopicPerm") or "DENY",
            "default_group_perm": raw.get("defaultGroupPerm") or "DENY",
            "topic_perms": list(raw.get("topicPerms") or []), "group_perms": list(raw.get("groupPerms") or [])}


def acl_overview(cluster: str | None) -> dict[str, Any]:
    """``brokers`` (address, name, version counter and time, file, rules digest, or ``error``), ``in_step``
    (every broker answered with the same rules), ``accounts`` and ``global_white`` (from the first broker that
    answered), ``cluster``."""
    admin = broker_client.admin()
    cluster = cluster or next(iter(clusters()), None)
    brokers, first = [], None
    for addr, name in admin.acl_brokers(cluster).items():
        row: dict[str, Any] = {"addr": addr, "broker_name": name, "counter": None, "updated": None, "file": None,
                               "digest": None, "error": None}
        try:
            version = admin.acl_version(addr)
            cfg = admin.acl_config(addr)
        except (ClientError, ConnectionError, TimeoutError) as exc:
            row["error"] = str(exc) or type(exc).__name__
        else:
            row.update(counter=version["counter"], updated=iso_ms(version["timestamp"]), file=version["file"],
                       digest=_digest(cfg))
            first = first or cfg
        brokers.append(row)
    digests = {b["digest"] for b in brokers}
    counters = {b["counter"] for b in brokers}
    # the rules most brokers hold; with no strict majority every broker is out of step
    majority = max(digests, key=lambda d: sum(b["digest"] == d for b in brokers)) if brokers else None
    if sum(b["digest"] == majority for b in brokers) * 2 <= len(brokers) and len(digests) > 1:
        majority = None
    for b in brokers:
        b["in_step"] = b["error"] is None and b["digest"] == majority
    return {"cluster": cluster, "brokers": brokers,
            "in_step": bool(brokers) and len(digests) == 1 and None not in digests and len(counters) == 1,
            "accounts": [account_view(a) for a in (first or {}).get("plainAccessConfigs") or []],
            "global_white": list((first or {}).get("globalWhiteAddrs") or [])}
