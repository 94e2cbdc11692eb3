"""Where alert webhooks may go, and the one way they are sent.

A webhook URL is user input that the console's worker POSTs to, so it must not reach the console's own network
(server-side request forgery). Rules:

1. Only ``http`` and ``https``. The host's addresses must all be public: loopback, private (RFC 1918, ULA),
   link-local (incl. cloud metadata at 169.254.169.254), unspecified, multicast, reserved, shared (CGNAT) and
   documentation addresses are refused, also when written as IPv4-mapped IPv6, unless the host name, the address or
   a network containing it is in ``settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS``.
2. Checked when a rule is saved (:func:`validate_webhook_url`: literal addresses and what the name resolves to
   now; a name that does not resolve yet is accepted) and again at every send, after resolving the name
   (:func:`post_json`).
3. The send connects to the address that was checked (the name is not resolved twice, so a DNS answer that
   changes between check and connect cannot redirect it); for ``https`` the certificate is still verified
   against the host name, which is also sent as SNI and ``Host``.
4. Redirects are never followed: a 3xx is a failed delivery.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import certifi
import urllib3
from django.conf import settings
from django.core.exceptions import ValidationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
SCHEMES = {"http": 80, "https": 443}


class WebhookRefused(ValueError):
    """A webhook URL the console will not send to (scheme, host, or a non-public address)."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    address: str  # the checked address the request connects to


def _allow_list() -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    names: set[str] = set()
    networks = []
    for entry in getattr(settings, "CONSOLE_WEBHOOK_ALLOWED_HOSTS", []):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return names, networks


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` is a public unicast address (rule 1)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def refusal(host: str, addresses: list[IPAddress]) -> str | None:
    """Why sending to ``host`` at ``addresses`` is refused, or None when it is allowed."""
    names, networks = _allow_list()
    if host.lower().rstrip(".") in names:
        return None
    for address in addresses:
        if not is_public(address) and not any(address in net for net in networks):
            return (f"{host} is {address}, a non-public address (loopback, private, link-local or reserved); "
                    "allow it in CONSOLE_WEBHOOK_ALLOWED_HOSTS if it is meant")
    return None


def _split(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise WebhookRefused("a webhook URL is http:// or https://")
    if not parts.hostname:
        raise WebhookRefused("a webhook URL needs a host")
    try:
        port = parts.port or SCHEMES[parts.scheme]
    except ValueError:
        raise WebhookRefused("the webhook URL's port is not a number from 0 to 65535") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port, path


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (raises OSError when it does not)."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos))


def check(url: str) -> Target:
    """Resolve and check ``url`` for a send (rules 1-3); raises WebhookRefused or OSError (no such host)."""
    scheme, host, port, path = _split(url)
    addresses = resolve(host, port)
    if not addresses:
        raise OSError(f"{host} has no address")
    reason = refusal(host, addresses)
    if reason is not None:
        raise WebhookRefused(reason)
    return Target(scheme, host, port, path, str(addresses[0]))


def validate_webhook_url(url: str) -> None:
    """Save-time check (a Django validator, so forms and DRF serializers both use it): refuses non-public
    literal addresses and names that resolve to one now; a name that does not resolve is left to send time."""
    if not url:
        return
    try:
        _, host, port, _ = _split(url)
        try:
            addresses = resolve(host, port)
        except (OSError, UnicodeError):
            return
        reason = refusal(host, addresses)
    except WebhookRefused as exc:
        raise ValidationError(str(exc), code="webhook_refused") from None
    if reason is not None:
        raise ValidationError(reason, code="webhook_refused")


def post_json(url: str, body: Any, timeout: float, user_agent: str) -> tuple[int, str]:
    """POST ``body`` as JSON to ``url`` under rules 1-4; returns (status, the first 500 characters of the
    response). Raises WebhookRefused, OSError or ``urllib3.exceptions.HTTPError``."""
    target = check(url)
    default_port = SCHEMES[target.scheme] == target.port
    host_header = (f"[{target.host}]" if ":" in target.host else target.host) + ("" if default_port else
                                                                                  f":{target.port}")
    pool: urllib3.HTTPConnectionPool
    if target.scheme == "https":
        pool = urllib3.HTTPSConnectionPool(target.address, target.port, timeout=timeout, retries=False,
                                           cert_reqs="CERT_REQUIRED", ca_certs=certifi.where(),
                                           server_hostname=target.host, assert_hostname=target.host)
    else:
        pool = urllib3.HTTPConnectionPool(target.address, target.port, timeout=timeout, retries=False)
    try:
        resp = pool.urlopen("POST", target.path, body=json.dumps(body).encode(), redirect=False, retries=False,
                            headers={"Host": host_header, "Content-Type": "application/json",
                                     "User-Agent": user_agent}, preload_content=True)
        return resp.status, resp.data[:2000].decode("utf-8", "replace")[:500]
    finally:
        pool.close()
