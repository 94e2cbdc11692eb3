"""The ``plain_acl.yml`` model (RocketMQ ACL 1.0, reference §9.1): accounts, permissions and address patterns.

File schema (YAML)::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ          # longer than 6 characters
        secretKey: 12345678          # longer than 6 characters
        whiteRemoteAddress:          # blank matches nothing
        admin: false
        defaultTopicPerm: DENY       # DENY | PUB | SUB | PUB|SUB | SUB|PUB; anything else is DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY]     # stored as the resource %RETRY%groupA

Address patterns (``RemoteAddressStrategyFactory``): ``*``, ``*.*.*.*`` and ``*:*:*:*:*:*:*:*`` match every
address; a blank pattern matches none; ``a.b.c.{1,2}`` and ``a,b`` lists match each address listed;
``a.b.c.*``, ``a.b.*.*``, ``a.b.c.1-200`` and ``a.b.1-20.*`` match a range of one octet; anything else is one
exact address. A pattern that breaks these forms makes the whole file invalid (:class:`AclConfigError`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import yaml

from broker_core.codec.names import RETRY_GROUP_TOPIC_PREFIX
from broker_core.config import ConfigError

# Permission bits (``Permission``)
DENY = 1
ANY = 2
PUB = 4
SUB = 8
_PERMS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
MIN_KEY_LENGTH = 7  # AclUtils: keys must be longer than 6 characters


class AclConfigError(ConfigError):
    """A ``plain_acl.yml`` that cannot be used; names the entry at fault."""


def parse_perm(text: object) -> int:
    """``Permission.parsePermFromString``: ``PUB``, ``SUB``, ``PUB|SUB``/``SUB|PUB``; anything else DENY."""
    return _PERMS.get(str(text).strip(), DENY) if text is not None else DENY


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``: DENY owns nothing; ANY needs PUB or SUB; else a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def normalize_ip(host: str) -> str:
    """The address text patterns compare against: brackets gone, IPv4-mapped IPv6 as IPv4, IPv6 compressed."""
    host = host.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _octet(text: str, pattern: str) -> int:
    if not text.strip().isdigit() or not 0 <= int(text) <= 255:
        raise AclConfigError(f"address pattern {pattern!r}: {text!r} is not a number from 0 to 255")
    return int(text)


@dataclass(frozen=True)
class AddressPattern:
    """One white-list entry. ``kind``: ``all``, ``none``, ``set`` (exact addresses) or ``range`` (``head``
    octets exact, the next octet from ``start`` to ``end``, any later octets free)."""

    text: str
    kind: str
    addresses: frozenset[str] = frozenset()
    head: tuple[int, ...] = ()
    start: int = 0
    end: int = 0

    @classmethod
    def parse(cls, text: object) -> AddressPattern:
        raw = "" if text is None else str(text).strip()
        if not raw:
            return cls(raw, "none")
        if raw in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
            return cls(raw, "all")
        if raw.endswith("}"):
            prefix, brace, rest = raw.rpartition("{")
            sep = ":" if ":" in prefix else "."
            if not brace or not prefix.endswith(sep) or (sep == "." and prefix.count(".") != 3):
                raise AclConfigError(f"address pattern {raw!r}: a {{a,b}} list must be the last part of an address")
            return cls._exact(raw, [prefix + item.strip() for item in rest[:-1].split(",") if item.strip()])
        if "," in raw:
            return cls._exact(raw, [item.strip() for item in raw.split(",") if item.strip()])
        if "*" in raw or "-" in raw:
            return cls._range(raw)
        return cls._exact(raw, [raw])

    @classmethod
    def _exact(cls, raw: str, items: list[str]) -> AddressPattern:
        out = set()
        for item in items:
            try:
                out.add(normalize_ip(str(ipaddress.ip_address(item.strip("[]")))))
            except ValueError:
                raise AclConfigError(f"address pattern {raw!r}: {item!r} is not an IP address") from None
        return cls(raw, "set", frozenset(out))

    @classmethod
    def _range(cls, raw: str) -> AddressPattern:
        parts = raw.split(".")
        if len(parts) != 4:
            raise AclConfigError(f"address pattern {raw!r}: a range needs four dot-separated parts (a.b.c.1-200)")
        parts = [p.strip() for p in parts]
        i = next(n for n, p in enumerate(parts) if p == "*" or "-" in p)  # one exists: the caller saw * or -
        part = parts[i]
        if i == 0:
            raise AclConfigError(f"address pattern {raw!r}: the first octet must be a number")
        head = tuple(_octet(p, raw) for p in parts[:i])
        if part == "*":
            start, end = 0, 255
        else:
            lo, _, hi = part.partition("-")
            start, end = _octet(lo, raw), _octet(hi, raw)
            if start > end:
                raise AclConfigError(f"address pattern {raw!r}: range {part} runs backwards")
        if any(p != "*" for p in parts[i + 1:]):
            raise AclConfigError(f"address pattern {raw!r}: the parts after a range must be *")
        return cls(raw, "range", head=head, start=start, end=end)

    def match(self, ip: str) -> bool:
        if self.kind == "all":
            return True
        if self.kind == "none":
            return False
        if self.kind == "set":
            return ip in self.addresses
        parts = ip.split(".")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            return False
        n = len(self.head)
        return tuple(int(p) for p in parts[:n]) == self.head and self.start <= int(parts[n]) <= self.end


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    white_remote_address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    resource_perms: dict[str, int] = field(default_factory=dict)  # topics, and groups as %RETRY%<group>


@dataclass(frozen=True)
class PlainAclConfig:
    global_white: tuple[AddressPattern, ...]
    accounts: dict[str, Account]


def _perm_list(entries: object, what: str, key: str) -> dict[str, int]:
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise AclConfigError(f"account {key!r}: {what}Perms must be a list like [name=PUB|SUB]")
    out = {}
    for item in entries:
        name, sep, perm = str(item).partition("=")
        if not sep or not name.strip() or "=" in perm:
            raise AclConfigError(f"Parse resource permission failed for {what}:{item} (account {key!r})")
        resource = name.strip() if what == "topic" else retry_topic(name.strip())
        out[resource] = parse_perm(perm)
    return out


def _bool(value: object) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _account(raw: object, index: int) -> Account:
    if not isinstance(raw, dict):
        raise AclConfigError(f"accounts[{index}] must be a mapping")
    key = str(raw.get("accessKey") or "")
    secret = str(raw.get("secretKey") or "")
    if len(key) < MIN_KEY_LENGTH:
        raise AclConfigError(f"accounts[{index}]: the accessKey={key!r} cannot be null and length should be "
                             f"longer than 6")
    if len(secret) < MIN_KEY_LENGTH:
        raise AclConfigError(f"account {key!r}: the secretKey cannot be null and length should be longer than 6")
    perms = {**_perm_list(raw.get("topicPerms"), "topic", key), **_perm_list(raw.get("groupPerms"), "group", key)}
    return Account(key, secret, AddressPattern.parse(raw.get("whiteRemoteAddress")), _bool(raw.get("admin")),
                   parse_perm(raw.get("defaultTopicPerm")), parse_perm(raw.get("defaultGroupPerm")), perms)


def parse_plain_acl(doc: Any) -> PlainAclConfig:
    """The model of a loaded YAML document; :class:`AclConfigError` names what is wrong."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise AclConfigError("plain_acl.yml must be a mapping with globalWhiteRemoteAddresses and accounts")
    white = doc.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white, list):
        raise AclConfigError("globalWhiteRemoteAddresses must be a list of address patterns")
    raw_accounts = doc.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclConfigError("accounts must be a list")
    accounts: dict[str, Account] = {}
    for i, raw in enumerate(raw_accounts):
        account = _account(raw, i)
        if account.access_key in accounts:
            raise AclConfigError(f"the accessKey {account.access_key!r} is repeated")
        accounts[account.access_key] = account
    return PlainAclConfig(tuple(AddressPattern.parse(p) for p in white if p is not None), accounts)


def load_plain_acl(text: str) -> PlainAclConfig:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"not valid YAML: {exc}") from None
    return parse_plain_acl(doc)
