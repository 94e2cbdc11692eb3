"""The one place that builds ``broker_core.client`` objects from settings.

One :class:`ClientInstance`-backed ``AdminClient``, one ``Producer`` and one browsing ``PullConsumer`` per
process and name server address, and one ``SimpleConsumer`` per consumer group, all sharing a connection pool
and signing with the ACL account of settings (:func:`credentials`).
Clients are keyed by ``settings.BROKER_CORE_NAMESRV`` and the ACL account, so changing those settings (tests do)
yields fresh clients; :func:`reset` shuts every cached client down.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from broker_core.client import AdminClient, Producer, PullConsumer, SessionCredentials, SimpleConsumer
from broker_core.client.admin import ADMIN_GROUP
from broker_core.client.controller_admin import ControllerAdmin
from broker_core.client.instance import ClientInstance

# The reserved group the browsing PullConsumer pulls as: it never commits offsets, and brokers do not trace
# its pulls as deliveries (the admin client's dead-letter browsing uses the same group).
BROWSE_GROUP = ADMIN_GROUP


@dataclass
class _Clients:
    """The clients cached for one name server address."""

    instance: ClientInstance
    admin: AdminClient
    producer: Producer | None = None
    browser: PullConsumer | None = None
    consumers: dict[str, SimpleConsumer] = field(default_factory=dict)


_lock = threading.Lock()
_cache: dict[tuple[str, SessionCredentials | None], _Clients] = {}  # by name server and ACL account
_installed_admins: dict[str, Any] = {}
_controller_admins: dict[str, ControllerAdmin] = {}


def namesrv_addr() -> str:
    """The name server address(es) from settings (``BROKER_CORE_NAMESRV``)."""
    return str(settings.BROKER_CORE_NAMESRV)


def credentials() -> SessionCredentials | None:
    """The ACL account from settings (``BROKER_CORE_ACCESS_KEY``/``BROKER_CORE_SECRET_KEY``), None when unset;
    every client built here signs with it (the console's, the Celery workers' and the Spark jobs' requests)."""
    access_key = str(getattr(settings, "BROKER_CORE_ACCESS_KEY", "") or "")
    secret_key = str(getattr(settings, "BROKER_CORE_SECRET_KEY", "") or "")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ImproperlyConfigured("set both BROKER_CORE_ACCESS_KEY and BROKER_CORE_SECRET_KEY, or neither")
    return SessionCredentials(access_key, secret_key)


def _clients() -> _Clients:
    addr = namesrv_addr()
    key = (addr, credentials())
    with _lock:
        found = _cache.get(key)
        if found is None:
            instance = ClientInstance(addr, instance_name="console", credentials=key[1])
            admin = AdminClient(addr, timeout=settings.BROKER_CORE_TIMEOUT_S, instance=instance).start()
            found = _cache[key] = _Clients(instance, admin)
        return found


def admin() -> AdminClient:
    """The process-wide admin client (or the stand-in :func:`install_admin` put in its place)."""
    installed = _installed_admins.get(namesrv_addr())
    if installed is not None:
        return installed  # a stand-in with AdminClient's methods (tests)
    return _clients().admin


def install_admin(client: Any | None) -> None:
    """Answer :func:`admin` for the configured name server with ``client``, an in-process stand-in with
    ``AdminClient``'s methods and return shapes (the console's unit tests run services and selectors against
    one, without a broker); None removes it, as :func:`reset` does."""
    if client is None:
        _installed_admins.pop(namesrv_addr(), None)
    else:
        _installed_admins[namesrv_addr()] = client


def producer() -> Producer:
    """The process-wide producer (group ``BROKER_CORE_PRODUCER_GROUP``)."""
    clients = _clients()
    with _lock:
        if clients.producer is None:
            clients.producer = Producer(settings.BROKER_CORE_PRODUCER_GROUP, namesrv_addr(),
                                        send_timeout=settings.BROKER_CORE_TIMEOUT_S,
                                        instance=clients.instance, create_topics=False).start()
        return clients.producer


def browser() -> PullConsumer:
    """The process-wide PullConsumer (group :data:`BROWSE_GROUP`) for reading queues by offset and time;
    it only pulls and searches, never commits."""
    clients = _clients()
    with _lock:
        if clients.browser is None:
            clients.browser = PullConsumer(BROWSE_GROUP, namesrv_addr(), instance=clients.instance)
        return clients.browser


def consumer(group: str) -> SimpleConsumer:
    """The receive/ack consumer of ``group`` (raises ValueError for an invalid group name)."""
    clients = _clients()
    with _lock:
        found = clients.consumers.get(group)
        if found is None:
            found = clients.consumers[group] = SimpleConsumer(group, namesrv_addr(), instance=clients.instance)
        return found


def controller_addr() -> str:
    """The controllers' addresses from settings (``BROKER_CORE_CONTROLLER``); empty: no controller mode."""
    return str(getattr(settings, "BROKER_CORE_CONTROLLER", "") or "")


def controller_admin() -> ControllerAdmin:
    """The process-wide controller admin client for ``BROKER_CORE_CONTROLLER`` (ImproperlyConfigured when unset)."""
    addr = controller_addr()
    if not addr:
        raise ImproperlyConfigured("BROKER_CORE_CONTROLLER is not set")
    with _lock:
        found = _controller_admins.get(addr)
        if found is None:
            found = _controller_admins[addr] = ControllerAdmin(addr, timeout=settings.BROKER_CORE_TIMEOUT_S)
        return found


def reset() -> None:
    """Shut down and forget every cached client (tests, and after a settings change)."""
    with _lock:
        cached = list(_cache.values())
        _cache.clear()
        _installed_admins.clear()
        controllers = list(_controller_admins.values())
        _controller_admins.clear()
    for c in controllers:
        c.close()
    for clients in cached:
        if clients.producer is not None:
            clients.producer.shutdown()  # also closes the shared instance
        else:
            clients.admin.shutdown()
