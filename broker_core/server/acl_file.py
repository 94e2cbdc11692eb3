"""Editing ``plain_acl.yml`` as RocketMQ's ``PlainPermissionManager`` does for the ACL admin codes (50, 51, 53).

Invariants:

1. Every edit is validated as a whole before it is written: the edited document must parse
   (:func:`~broker_core.server.acl_config.parse_plain_acl`), so a write never leaves rules the broker would refuse
   to load.
2. Every write replaces the file atomically: the new text goes to ``<file>.tmp-<pid>`` in the same directory,
   is flushed and ``fsync``-ed, then renamed over the file and the directory is ``fsync``-ed. A crash leaves the
   old file or the new one, never a mix (a stray temp file at most, which is never read).
3. Each write sets ``dataVersion: [{counter: old + 1, timestamp: now}]`` (the version ``GET_BROKER_CLUSTER_ACL_INFO``
   reports, so a console can tell brokers out of step).

Account updates follow ``updateAccessConfig``: fields absent from the request keep their old values; the updated
account moves to the end of ``accounts``; keys are written in RocketMQ's order (accessKey, secretKey,
whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm, topicPerms, groupPerms). Block-style YAML, as
SnakeYAML's ``dumpAsMap``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import yaml

from broker_core.server.acl_config import MIN_KEY_LENGTH, AclConfigError, parse_plain_acl

VALID_PERMS = ("DENY", "PUB", "SUB", "PUB|SUB", "SUB|PUB")
ACCOUNT_KEYS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm", "defaultGroupPerm",
                "topicPerms", "groupPerms")


def read_doc(path: Path) -> dict[str, Any]:
    """The file as a YAML mapping ({} when it does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict):
        raise AclConfigError(f"{path}: not a mapping")
    return doc


def data_version(doc: dict[str, Any]) -> dict[str, int]:
    """``{"counter", "timestamp"}`` of the document's ``dataVersion`` (0, 0 when it has none)."""
    raw = doc.get("dataVersion")
    first = raw[0] if isinstance(raw, list) and raw and isinstance(raw[0], dict) else raw
    if not isinstance(first, dict):
        return {"counter": 0, "timestamp": 0}
    return {"counter": int(first.get("counter") or 0), "timestamp": int(first.get("timestamp") or 0)}


def write_doc(path: Path, doc: dict[str, Any], now_ms: int | None = None) -> dict[str, int]:
    """Bump ``dataVersion``, check the rules, and replace the file atomically (see the module's invariants);
    returns the new version."""
    version = {"counter": data_version(doc)["counter"] + 1,
               "timestamp": int(time.time() * 1000) if now_ms is None else now_ms}
    doc = {**{k: v for k, v in doc.items() if k != "dataVersion"}, "dataVersion": [version]}
    parse_plain_acl(doc)  # invariant 1
    text = yaml.safe_dump(doc, default_flow_style=False, sort_keys=False, allow_unicode=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return version


def _perm(value: str, what: str) -> str:
    if value.strip() not in VALID_PERMS:
        raise AclConfigError(f"{what} must be one of {', '.join(VALID_PERMS)}, got {value!r}")
    return value.strip()


def _perm_items(csv: str, what: str) -> list[str]:
    """``a=PUB,b=SUB`` -> ``["a=PUB", "b=SUB"]``, each permission checked."""
    out = []
    for item in (i.strip() for i in csv.split(",")):
        if not item:
            continue
        name, sep, perm = item.partition("=")
        if not sep or not name.strip():
            raise AclConfigError(f"{what} item {item!r} is not name=PERM")
        out.append(f"{name.strip()}={_perm(perm, f'{what} of {name.strip()}')}")
    return out


def update_account(doc: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The document with the account of ``fields["accessKey"]`` created or updated (request header fields of
    ``CreateAccessConfigRequestHeader``: text; ``topicPerms``/``groupPerms`` as CSV)."""
    key = str(fields.get("accessKey") or "")
    if len(key) < MIN_KEY_LENGTH:
        raise AclConfigError("The accessKey should be longer than 6")  # RocketMQ's wording (AclUtils)
    accounts = [a for a in (doc.get("accounts") or []) if isinstance(a, dict)]
    old = next((a for a in accounts if str(a.get("accessKey")) == key), None)
    new: dict[str, Any] = dict(old or {"accessKey": key})
    secret = fields.get("secretKey")
    if secret not in (None, ""):
        if len(str(secret)) < MIN_KEY_LENGTH:
            raise AclConfigError("The secretKey should be longer than 6")
        new["secretKey"] = str(secret)
    elif old is None:
        raise AclConfigError("The secretKey should be longer than 6")
    if fields.get("whiteRemoteAddress") is not None:
        new["whiteRemoteAddress"] = str(fields["whiteRemoteAddress"])
    if fields.get("admin") not in (None, ""):
        new["admin"] = str(fields["admin"]).strip().lower() == "true"
    new.setdefault("admin", False)
    for name in ("defaultTopicPerm", "defaultGroupPerm"):
        if fields.get(name) not in (None, ""):
            new[name] = _perm(str(fields[name]), name)
    for name in ("topicPerms", "groupPerms"):
        if fields.get(name) is not None:
            new[name] = _perm_items(str(fields[name]), name)
    ordered = {k: new[k] for k in ACCOUNT_KEYS if k in new}
    ordered.update({k: v for k, v in new.items() if k not in ordered})
    rest = [a for a in accounts if a is not old]
    return {**doc, "accounts": [*rest, ordered]}


def delete_account(doc: dict[str, Any], access_key: str) -> dict[str, Any] | None:
    """The document without ``access_key``'s account; None when there is no such account."""
    accounts = [a for a in (doc.get("accounts") or []) if isinstance(a, dict)]
    kept = [a for a in accounts if str(a.get("accessKey")) != access_key]
    if len(kept) == len(accounts):
        return None
    return {**doc, "accounts": kept}


def set_global_white(doc: dict[str, Any], addrs_csv: str) -> dict[str, Any]:
    """The document with ``globalWhiteRemoteAddresses`` replaced by the comma-separated patterns."""
    return {**doc, "globalWhiteRemoteAddresses": [a.strip() for a in addrs_csv.split(",") if a.strip()]}


def cluster_acl_config(doc: dict[str, Any]) -> dict[str, Any]:
    """``AclConfig`` as GET_BROKER_CLUSTER_ACL_CONFIG (54) answers it: ``globalWhiteAddrs`` and
    ``plainAccessConfigs`` (each ``PlainAccessConfig``: accessKey, secretKey, whiteRemoteAddress, admin,
    defaultTopicPerm, defaultGroupPerm, topicPerms, groupPerms)."""
    configs = []
    for a in doc.get("accounts") or []:
        if not isinstance(a, dict):
            continue
        configs.append({"accessKey": a.get("accessKey"), "admin": bool(a.get("admin", False)),
                        "defaultGroupPerm": a.get("defaultGroupPerm"), "defaultTopicPerm": a.get("defaultTopicPerm"),
                        "groupPerms": [str(p) for p in a.get("groupPerms") or []],
                        "secretKey": a.get("secretKey"),
                        "topicPerms": [str(p) for p in a.get("topicPerms") or []],
                        "whiteRemoteAddress": a.get("whiteRemoteAddress")})
    return {"globalWhiteAddrs": [str(p) for p in doc.get("globalWhiteRemoteAddresses") or []],
            "plainAccessConfigs": configs}
