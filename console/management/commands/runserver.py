"""``manage.py runserver`` with TCP_NODELAY on every accepted connection.

Django's development server writes a response's headers and body separately; on a kept-alive connection
the second write then waits for the client's delayed ACK (about 40 ms a request). Disabling Nagle's
algorithm removes that stall; everything else is Django's own ``runserver`` (the staticfiles one, which
also serves static files; ``console`` is listed before ``django.contrib.staticfiles`` so this one wins).
"""

from __future__ import annotations

import socket
from typing import Any

from django.contrib.staticfiles.management.commands.runserver import Command as RunserverCommand
from django.core.servers.basehttp import WSGIServer


class NoDelayWSGIServer(WSGIServer):
    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


class Command(RunserverCommand):
    server_cls = NoDelayWSGIServer
