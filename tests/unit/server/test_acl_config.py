"""The plain_acl.yml model: address patterns (reference §9.1), permission strings and bits, account checks."""

from __future__ import annotations

import pytest

from broker_core.server.acl_config import (
    ANY,
    DENY,
    PUB,
    SUB,
    AclConfigError,
    AddressPattern,
    check_permission,
    load_plain_acl,
    normalize_ip,
    parse_perm,
)


@pytest.mark.parametrize(("pattern", "inside", "outside"), [
    ("*", ["10.1.2.3", "::1"], []),
    ("*.*.*.*", ["192.168.0.1"], []),
    ("*:*:*:*:*:*:*:*", ["127.0.0.1"], []),
    ("", [], ["127.0.0.1", "10.0.0.1"]),
    ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1", "10.168.0.1"]),
    ("192.168.*.*", ["192.168.0.1", "192.168.200.9"], ["192.169.0.1"]),
    ("10.*.*.*", ["10.0.0.0", "10.255.1.2"], ["11.0.0.1"]),
    ("192.168.1.1-200", ["192.168.1.1", "192.168.1.200"], ["192.168.1.0", "192.168.1.201", "192.168.2.5"]),
    ("10.1.5-9.*", ["10.1.5.0", "10.1.9.255"], ["10.1.4.255", "10.1.10.0"]),
    ("192.168.0.{1,2,10}", ["192.168.0.1", "192.168.0.2", "192.168.0.10"], ["192.168.0.3", "192.168.0.100"]),
    ("10.0.0.1,10.0.0.7", ["10.0.0.1", "10.0.0.7"], ["10.0.0.2"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2", "127.0.0.10"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
])
def test_address_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    p = AddressPattern.parse(pattern)
    for ip in inside:
        assert p.match(normalize_ip(ip)), (pattern, ip)
    for ip in outside:
        assert not p.match(normalize_ip(ip)), (pattern, ip)


@pytest.mark.parametrize("bad", ["192.168.0.300", "192.168.*", "*.168.0.1", "192.168.9-1.*", "192.168.1-2.3",
                                 "10.0.{1,2}", "not-an-ip", "192.168.0.{1,x}"])
def test_bad_address_patterns_are_refused(bad: str) -> None:
    with pytest.raises(AclConfigError, match="address pattern"):
        AddressPattern.parse(bad)


def test_ipv4_mapped_and_bracketed_addresses_normalise() -> None:
    assert normalize_ip("::ffff:10.1.2.3") == "10.1.2.3"
    assert normalize_ip("[::1]") == "::1"


@pytest.mark.parametrize(("text", "perm"), [("PUB", PUB), ("SUB", SUB), ("PUB|SUB", PUB | SUB),
                                            ("SUB|PUB", PUB | SUB), (" DENY ", DENY), ("pub", DENY),
                                            ("ANY", DENY), (None, DENY), ("", DENY)])
def test_parse_perm(text: str | None, perm: int) -> None:
    assert parse_perm(text) == perm


def test_check_permission_bits() -> None:
    assert check_permission(PUB, PUB) and check_permission(SUB, PUB | SUB)
    assert not check_permission(SUB, PUB) and not check_permission(PUB, SUB)
    assert not check_permission(PUB, DENY | PUB)  # DENY wins
    assert check_permission(ANY, SUB) and not check_permission(ANY, DENY)


ACL = """
globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def test_the_reference_sample_loads() -> None:
    rules = load_plain_acl(ACL)
    assert [p.text for p in rules.global_white] == ["10.10.103.*", "192.168.0.*"]
    a = rules.accounts["RocketMQ"]
    assert (a.secret_key, a.admin, a.default_topic_perm, a.default_group_perm) == ("12345678", False, DENY, SUB)
    assert a.resource_perms == {"topicA": DENY, "topicB": PUB | SUB, "topicC": SUB, "%RETRY%groupA": DENY,
                                "%RETRY%groupB": PUB | SUB, "%RETRY%groupC": SUB}
    assert not a.white_remote_address.match("127.0.0.1")  # blank matches nothing
    b = rules.accounts["rocketmq2"]
    assert b.admin and b.resource_perms == {} and b.default_topic_perm == DENY
    assert b.white_remote_address.match("192.168.1.7")


@pytest.mark.parametrize(("text", "message"), [
    ("accounts: [{accessKey: short, secretKey: 12345678}]", "longer than 6"),
    ("accounts: [{accessKey: RocketMQ, secretKey: 123}]", "secretKey"),
    ("accounts: [{accessKey: RocketMQ, secretKey: 12345678, topicPerms: [topicA]}]", "Parse resource permission"),
    ("accounts: [{accessKey: RocketMQ, secretKey: 12345678}, {accessKey: RocketMQ, secretKey: 87654321}]",
     "repeated"),
    ("globalWhiteRemoteAddresses: [1.2.3.999]", "address pattern"),
    ("accounts: {accessKey: RocketMQ}", "accounts must be a list"),
    ("accounts: [unclosed", "not valid YAML"),
    ("- just a list", "must be a mapping"),
])
def test_invalid_files_say_why(text: str, message: str) -> None:
    with pytest.raises(AclConfigError, match=message):
        load_plain_acl(text)


def test_empty_file_has_no_accounts() -> None:
    rules = load_plain_acl("")
    assert rules.accounts == {} and rules.global_white == ()
