"""RocketMQ ACL 1.0 request signatures (reference §9.2), sans-I/O, shared by the clients and the broker.

A signed request carries, in ``extFields``, ``AccessKey``, ``Signature`` and, when one is configured,
``SecurityToken``. The signature is ``Base64(HmacSHA1(secretKey as UTF-8, content))`` where ``content`` is the
UTF-8 encoding of the **values** of every ``extFields`` entry but ``Signature``, concatenated in key order
(Java ``TreeMap`` order: UTF-16 code units, which is byte order of the keys' UTF-16BE encoding), followed by the
raw body. The broker also leaves out ``_UNIQUE_KEY_QUERY`` (``MixAll.UNIQUE_MSG_QUERY_FLAG``).

Invariants:
1. Signing and verifying see ``extFields`` as text, converted exactly as the header codec does
   (:func:`broker_core.protocol.command.stringify_fields`: ints in decimal, booleans ``true``/``false``, nulls
   dropped), so a value a client sent as a JSON number verifies against the text the client signed.
2. Signing is idempotent: a command signed twice (a retried request) carries the same signature.

The name server's registration proof (:func:`sign_registration`) uses the same content scheme with a cluster
secret and a signing time; it is broker_core's addition and never changes a request a Java name server reads.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker_core.protocol.command import RemotingCommand, stringify_fields

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
ONS_CHANNEL = "OnsChannel"  # the C++ and ONS clients' extra signed field
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG: the broker leaves it out of the content

# The registration proof (broker_core's own): the fixed access key and the signing time field (ms since epoch).
CLUSTER_ACCESS_KEY = "BrokerCoreCluster"
SIGN_TIMESTAMP = "BrokerCoreSignTime"
DEFAULT_MAX_SKEW_MS = 300_000


@dataclass(frozen=True)
class SessionCredentials:
    """An account of the broker's ``plain_acl.yml``: the SDK signs every request with it (Java's
    ``SessionCredentials`` / ``AclClientRPCHook``)."""

    access_key: str
    secret_key: str
    security_token: str = ""

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("SessionCredentials need an access key and a secret key")

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"


def _java_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def signing_content(fields: Mapping[str, str], body: bytes = b"",
                    exclude: frozenset[str] = frozenset({SIGNATURE})) -> bytes:
    """The bytes a signature covers: the values of ``fields`` (text) but ``exclude``, sorted by key in Java
    ``TreeMap`` order, concatenated and UTF-8 encoded, then ``body``."""
    keys = sorted(k for k in fields if k not in exclude)  # code point order: Java's too while keys are ASCII
    if not "".join(keys).isascii():
        keys.sort(key=_java_order)  # U+10000 and above sort as surrogates, before U+E000..U+FFFF
    return "".join(fields[k] for k in keys).encode("utf-8", "surrogatepass") + bytes(body)


def calc_signature(secret_key: str, content: bytes) -> str:
    """``AclSigner.calSignature``: Base64(HmacSHA1(secret_key as UTF-8, content))."""
    return base64.b64encode(hmac.digest(secret_key.encode("utf-8"), content, "sha1")).decode("ascii")


def sign_command(cmd: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    """Sign ``cmd`` in place as Java's ``AclClientRPCHook.doBeforeRequest``: the header becomes text, gains
    ``AccessKey`` (and ``SecurityToken``), and ``Signature`` over it and the body. Returns ``cmd``."""
    fields = stringify_fields(cmd.header)
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields[SIGNATURE] = calc_signature(credentials.secret_key, signing_content(fields, cmd.body))
    cmd.header = fields
    return cmd


def signature_matches(fields: Mapping[str, Any], body: bytes, secret_key: str) -> bool:
    """The broker's check: HMAC of every field but ``Signature`` and ``_UNIQUE_KEY_QUERY`` (values turned to
    text first) plus the body equals the ``Signature`` field, compared in constant time."""
    text = stringify_fields(dict(fields))
    given = text.get(SIGNATURE)
    if not given:
        return False
    expected = calc_signature(secret_key, signing_content(text, body, frozenset({SIGNATURE, UNIQUE_KEY_QUERY})))
    return hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------------- registration proof (name server)
def sign_registration(cmd: RemotingCommand, cluster_secret: str, now_ms: int) -> RemotingCommand:
    """Sign a REGISTER_BROKER / UNREGISTER_BROKER with the cluster secret: ``AccessKey`` =
    :data:`CLUSTER_ACCESS_KEY`, the signing time in :data:`SIGN_TIMESTAMP`, ``Signature`` as for any request."""
    cmd.header = {**stringify_fields(cmd.header), SIGN_TIMESTAMP: str(int(now_ms))}
    return sign_command(cmd, SessionCredentials(CLUSTER_ACCESS_KEY, cluster_secret))


def registration_refusal(cmd: RemotingCommand, cluster_secret: str, now_ms: int,
                         max_skew_ms: int = DEFAULT_MAX_SKEW_MS) -> str | None:
    """Why a registration does not prove the cluster secret (None when it does): no or another access key,
    a bad signature, or a signing time more than ``max_skew_ms`` away from ``now_ms`` (a replayed request)."""
    h = cmd.header
    if h.get(ACCESS_KEY) != CLUSTER_ACCESS_KEY or not h.get(SIGNATURE):
        return ("this name server requires a broker registration signed with the cluster secret "
                "(set clusterSecret on the broker, the same as --cluster-secret here)")
    if not signature_matches(h, cmd.body, cluster_secret):
        return "the registration's signature does not match this name server's cluster secret"
    try:
        signed_at = int(str(h.get(SIGN_TIMESTAMP)))
    except ValueError:
        return f"the registration has no valid {SIGN_TIMESTAMP} field"
    if abs(now_ms - signed_at) > max_skew_ms:
        return (f"the registration was signed {abs(now_ms - signed_at)} ms away from this name server's clock "
                f"(at most {max_skew_ms} ms accepted)")
    return None
